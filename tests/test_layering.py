"""Layering (SPEC §2), checked on the sources: every module of `sharegroup` and `persister` belongs to a
layer by its package, imports only from its own layer or below, and no import cycle exists between
modules — `TYPE_CHECKING` imports and imports inside functions included."""

from __future__ import annotations

import ast
import functools
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Package (or module) -> layer. The longest matching prefix decides; every module must match one.
LAYERS = {
    # layer 0: vocabulary, protocols and the one native/twin switch
    "sharegroup.types": 0, "sharegroup.errors": 0, "sharegroup.config": 0, "sharegroup.clock": 0,
    "sharegroup.persistence": 0, "sharegroup.logs": 0, "sharegroup.share_messages": 0, "sharegroup._twins": 0,
    # layer 1: the pure core (both twins of the in-flight tracker)
    "sharegroup.tracker": 1,
    # layer 2: durability (share state; topic logs)
    "persister": 2, "sharegroup.topics": 2,
    # layer 3: services
    "sharegroup.manager": 3, "sharegroup.coordinator": 3,
    # layer 4: edges
    "sharegroup.server": 4, "sharegroup.admin": 4, "sharegroup.audit": 4, "sharegroup.demo": 4,
    "sharegroup.cli": 4, "sharegroup.metrics": 4, "sharegroup.__main__": 4,
}
# What a layer may import besides its own packages. Layer 3 reaches durability only through the
# protocols of layer 0 (`Persister`, `PartitionLogs`); the persister and the topic logs depend on layer 0
# only; the edges choose implementations and wire them.
MAY_IMPORT = {0: {0}, 1: {0}, 2: {0}, 3: {0, 1}, 4: {0, 1, 2, 3}}
IMPURE = {"asyncio", "time", "os", "socket", "threading", "aiofiles", "persister"}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for pkg in ("sharegroup", "persister") for p in sorted((ROOT / pkg).rglob("*.py"))}


def layered() -> list[str]:
    """Every module but the package root `sharegroup` (checked by its own rule below)."""
    return [m for m in modules() if m != "sharegroup"]


def _resolve(name: str) -> str | None:
    """The module of ours that an imported name lives in (a package's `__init__` for a package)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def imports_of(module: str) -> frozenset[str]:
    """Our modules that `module` imports anywhere in its source (relative imports resolved)."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names]
            names = subs if all(s in modules() for s in subs) else [base]
        else:
            continue
        found.update(m for m in map(_resolve, names) if m and m != module)
    return frozenset(found)


def external_imports_of(module: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(modules()[module].read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def layer_of(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return LAYERS[best]


def owner_of(module: str) -> str:
    """The package of the LAYERS map a module belongs to (its unit for the package-cycle rule)."""
    return max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)


def test_every_module_is_in_a_layer_and_the_map_names_real_modules():
    for module in layered():
        layer_of(module)
    for prefix in LAYERS:
        assert prefix in modules(), f"LAYERS names {prefix}, which is no module or package"


def test_each_layer_imports_only_what_it_may():
    for module in layered():
        layer = layer_of(module)
        for imported in imports_of(module):
            if imported == "sharegroup" or owner_of(imported) == owner_of(module):
                continue
            assert layer_of(imported) in MAY_IMPORT[layer] | {layer}, (module, imported)


def test_the_package_root_loads_only_vocabulary_at_import_time():
    """`import sharegroup` must not need the native build or any service: its module-level imports are
    layer 0; the services and the tracker load on first use (`__getattr__`)."""
    tree = ast.parse(modules()["sharegroup"].read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            assert layer_of(f"sharegroup.{node.module}") == 0, node.module


def test_no_import_cycle_between_modules():
    graph = {m: imports_of(m) - {"sharegroup"} for m in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components, recursive (the graph is small)
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_packages_of_a_layer_do_not_import_each_other_in_a_circle():
    edges = {(owner_of(m), owner_of(i)) for m in layered()
             for i in imports_of(m) if i != "sharegroup" and owner_of(i) != owner_of(m)}
    for a, b in edges:
        assert (b, a) not in edges, (a, b)


def test_the_core_is_pure():
    """Layer 1: no I/O, no clock, no asyncio, in both twins."""
    for module in layered():
        if layer_of(module) == 1:
            assert not external_imports_of(module) & IMPURE, module
    for path in [*(ROOT / "_native").glob("tracker.pyx"), *(ROOT / "_native").glob("*.pxi")]:
        text = path.read_text()
        for word in ("import asyncio", "import time", "import os", "from persister", "import persister"):
            assert word not in text, (path.name, word)


def test_services_use_no_edge_library():
    for module in layered():
        if layer_of(module) <= 3:
            assert not external_imports_of(module) & {"pyspark", "matplotlib"}, module
        if layer_of(module) in (1, 3):
            assert "prometheus_client" not in external_imports_of(module), module


def test_the_layering_check_sees_a_violation(monkeypatch):
    """The checks above can fail: a service that imports the concrete persister is caught."""
    module = "sharegroup.manager.share_partition"
    real = imports_of

    def with_violation(name: str) -> frozenset[str]:
        return real(name) | {"persister.local"} if name == module else real(name)

    monkeypatch.setattr(sys.modules[__name__], "imports_of", with_violation)
    with pytest.raises(AssertionError, match="persister.local"):
        test_each_layer_imports_only_what_it_may()


# Inside the server: api is the seam (RequestContext, the exceptions that cross the server, BrokerView),
# beside security (whose settings BrokerView names); the connection and the handlers see the broker only
# through the seam; the broker wires them; serve (the command) sits on top.
SERVER_TIERS = {
    "sharegroup.server.api": 0, "sharegroup.server.security": 0,
    "sharegroup.server.connection": 1, "sharegroup.server.handlers": 1,
    "sharegroup.server.broker": 2,
    "sharegroup.server.serve": 3,
}


def _server_tier(module: str) -> int | None:
    best = max((p for p in SERVER_TIERS if module == p or module.startswith(p + ".")), key=len, default=None)
    return None if best is None else SERVER_TIERS[best]


def test_the_server_sees_the_broker_only_through_its_api_seam():
    for prefix in SERVER_TIERS:
        assert prefix in modules(), prefix
    for module in layered():
        tier = _server_tier(module)
        if tier is None:
            continue
        for imported in imports_of(module):
            other = _server_tier(imported)
            if other is not None and not (module.startswith("sharegroup.server.handlers")
                                          and imported.startswith("sharegroup.server.handlers")):
                assert other <= tier, (module, imported)
