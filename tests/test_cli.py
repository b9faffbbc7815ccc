"""The command line: the walk-through runs and ends in the KIP example's final state; usage errors exit 2."""

from __future__ import annotations

import subprocess
import sys

from sharegroup.cli import main


def test_demo_walkthrough_prints_every_step(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "10. B accepts 111-112" in out
    assert "SPSO=120 SPEO=121 in-flight=1" in out
    assert "durable  start_offset=120 batches(first-last:state/count)=none" in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_module_entry_point_help():
    proc = subprocess.run([sys.executable, "-m", "sharegroup", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "demo" in proc.stdout
