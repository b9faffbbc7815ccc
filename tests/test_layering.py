"""Layering: a layer imports only from layers below it (checked on the source, not at runtime)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYER0 = {"types", "errors", "config", "clock", "persistence", "logs", "share_messages"}
LAYER0 |= {"_twins"}
LAYER1 = {"tracker"}
TRACKER_CORE = sorted((ROOT / "sharegroup" / "tracker").glob("*.py"))


def imports_of(path: pathlib.Path) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved inside `sharegroup`)."""
    tree = ast.parse(path.read_text())
    package = path.parent.relative_to(ROOT).as_posix().replace("/", ".")
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:
                    names.update(f"{mod}.{a.name}" for a in node.names)
                else:
                    names.add(mod)
            else:
                names.add(node.module or "")
    return names


def sharegroup_module(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "sharegroup" and len(parts) > 1 else None


def test_vocabulary_imports_nothing_above_layer_0():
    for mod in LAYER0:
        for name in imports_of(ROOT / "sharegroup" / f"{mod}.py"):
            sub = sharegroup_module(name)
            assert sub is None or sub in LAYER0, (mod, name)
            assert not name.startswith("persister"), (mod, name)


def test_core_is_pure_and_imports_only_vocabulary():
    forbidden = {"asyncio", "time", "os", "socket", "threading", "persister", "aiofiles"}
    native = [ROOT / "_native" / "tracker.pyx", *sorted((ROOT / "_native").glob("*.pxi"))]
    for path in [*TRACKER_CORE, *native]:
        if path.suffix in (".pyx", ".pxi"):
            text = path.read_text()
            for word in ("import asyncio", "import time", "import os", "from persister", "import persister"):
                assert word not in text, (path.name, word)
            continue
        for name in imports_of(path):
            assert name.split(".")[0] not in forbidden, (path.name, name)
            sub = sharegroup_module(name)
            assert sub is None or sub in LAYER0 or sub in LAYER1, (path.name, name)


MANAGER = sorted((ROOT / "sharegroup" / "manager").glob("*.py"))


def test_services_reach_durability_only_through_the_protocol():
    services = [ROOT / "sharegroup" / "manager" / "share_partition.py", *sorted((ROOT / "sharegroup" / "coordinator").rglob("*.py")),
                *MANAGER]
    for path in services:
        for name in imports_of(path):
            assert not name.startswith("persister"), (path.name, name)
            assert "audit" not in name and "pyspark" not in name and "prometheus" not in name, (path.name, name)


EDGES = {"cli.py", "metrics.py", "__main__.py"}  # and the audit/, demo/ and server/ packages (layer 4)


def test_only_the_edges_import_the_concrete_persister():
    for path in sorted((ROOT / "sharegroup").rglob("*.py")):
        rel = path.relative_to(ROOT / "sharegroup")
        if rel.parts[0] in ("audit", "demo", "server") or (len(rel.parts) == 1 and rel.name in EDGES):
            continue
        for name in imports_of(path):
            assert not name.startswith("persister"), (str(rel), name)


def test_persister_depends_on_layer_0_only():
    for path in sorted((ROOT / "persister").glob("*.py")):
        for name in imports_of(path):
            sub = sharegroup_module(name)
            assert sub is None or sub in LAYER0, (path.name, name)


def test_the_manager_imports_only_vocabulary_the_core_and_services_never_an_edge():
    assert MANAGER, "the sharegroup.manager package exists"
    allowed = LAYER0 | LAYER1 | {"manager"}
    for path in MANAGER:
        for name in imports_of(path):
            sub = sharegroup_module(name)
            assert sub is None or sub in allowed, (path.name, name)
            assert name.split(".")[0] not in {"persister", "prometheus_client", "pyspark"}, (path.name, name)


EDGE_MODULES = {"cli", "demo", "metrics", "audit", "server", "__main__"}


def _is_edge(sub: str) -> bool:
    return sub in EDGE_MODULES


def test_services_never_import_an_edge():
    """Layer 3 (SharePartition, the manager, the group coordinator) never imports layer 4."""
    services = [ROOT / "sharegroup" / "manager" / "share_partition.py", *sorted((ROOT / "sharegroup" / "coordinator").rglob("*.py")),
                *MANAGER]
    for path in services:
        for name in imports_of(path):
            sub = sharegroup_module(name)
            assert sub is None or not _is_edge(sub), (path.name, name)


def test_the_edge_list_names_real_modules():
    """The edge list above is not stale: each name is a module or package of sharegroup."""
    for sub in EDGE_MODULES:
        assert (ROOT / "sharegroup" / f"{sub}.py").exists() or (ROOT / "sharegroup" / sub).is_dir(), sub
