"""The command line: `demo --walkthrough` ends in the KIP example's final state; `demo` runs the main job
and its exit status follows the audit; usage and environment errors exit 2; `audit` delegates to the
audit's own command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sharegroup.cli import main

from .test_demo import fake_audit_module


def test_demo_walkthrough_prints_every_step(capsys):
    assert main(["demo", "--walkthrough"]) == 0
    out = capsys.readouterr().out
    assert "10. B accepts 111-112" in out
    assert "SPSO=120 SPEO=121 in-flight=1" in out
    assert "durable  start_offset=120 batches(first-last:state/count)=none" in out


def test_demo_without_the_audit(tmp_path, capsys):
    data = tmp_path / "data"
    argv = ["demo", "--simulated", "--data", str(data), "--records", "600", "--partitions", "2", "--consumers", "3",
            "--seed", "5", "--no-audit"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "600 records on 2 partitions" in captured.out and "Summary" in captured.out
    assert "durable state" in captured.out and "Audit" not in captured.out
    assert "100%" in captured.err  # the progress bar (plain lines: stderr is not a terminal here)
    assert any(p.suffix == ".log" for p in data.iterdir())


def test_demo_exit_status_follows_the_audit(tmp_path, monkeypatch, capsys):
    class Result:
        ok = False
        violations = ["x"]

    audit = fake_audit_module(lambda *a, **k: Result())
    monkeypatch.setitem(sys.modules, "sharegroup.audit", audit)
    assert main(["demo", "--simulated", "--data", str(tmp_path / "d"), "--records", "200"]) == 1

    def no_java(*a, **k):
        raise audit.AuditEnvironmentError("Java not found: install a JRE 17+")

    audit.run_audit = no_java
    assert main(["demo", "--simulated", "--data", str(tmp_path / "d"), "--records", "200"]) == 2
    assert "Java not found" in capsys.readouterr().out


@pytest.mark.parametrize("mode", [[], ["--simulated"]])
def test_demo_refuses_a_directory_it_did_not_create(tmp_path, capsys, mode):
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert main(["demo", *mode, "--data", str(tmp_path), "--no-audit"]) == 2
    assert "did not create" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    [],
    ["demo", "--partitions", "0"],
    ["demo", "--records", "many"],
    ["demo", "--duration", "-1"],
    ["demo", "--metrics-port", "70000"],
    ["frobnicate"],
])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "usage" in capsys.readouterr().err


def test_help_explains_each_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "audit" in out and "exit status" in out
    assert main(["demo", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--data", "--partitions", "--consumers", "--records", "--duration", "--seed",
                   "--metrics-port", "--keep", "--no-audit", "--master", "--simulated", "--walkthrough"):
        assert option in out


def test_audit_delegates_to_the_audit_command_line(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setitem(sys.modules, "sharegroup.audit", fake_audit_module(main=lambda argv: seen.append(argv) or 1))
    assert main(["audit", str(tmp_path), "--master", "local[1]", "--out", str(tmp_path / "o")]) == 1
    assert seen == [[str(tmp_path), "--master", "local[1]", "--out", str(tmp_path / "o")]]


def test_audit_of_a_missing_directory_exits_2(tmp_path):
    assert main(["audit", str(tmp_path / "nowhere")]) == 2


def test_audit_without_pyspark_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sharegroup.audit", None)
    assert main(["audit", "somewhere"]) == 2
    assert "pip install pyspark" in capsys.readouterr().err
    assert main(["audit", "--help"]) == 0
    assert "STATE_LOG_DIR" in capsys.readouterr().out


def test_module_entry_point_help():
    proc = subprocess.run([sys.executable, "-m", "sharegroup", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "demo" in proc.stdout and "audit" in proc.stdout
