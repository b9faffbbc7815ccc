"""`sharegroup serve` runs on uvloop when it is installed (the optional extra `fast`), else on asyncio's
default loop; SHAREGROUP_EVENT_LOOP=asyncio forces the default loop."""

from __future__ import annotations

import asyncio
import sys

import pytest

from sharegroup.server.serve import event_loop_factory


def test_without_uvloop_the_default_loop_runs(monkeypatch):
    monkeypatch.delenv("SHAREGROUP_EVENT_LOOP", raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop_factory() is None
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        assert runner.run(asyncio.sleep(0, result=7)) == 7


def test_uvloop_is_used_when_installed(monkeypatch):
    uvloop = pytest.importorskip("uvloop", reason="uvloop (the optional extra `fast`) is not installed")
    monkeypatch.delenv("SHAREGROUP_EVENT_LOOP", raising=False)
    factory = event_loop_factory()
    assert factory is uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)


def test_the_environment_forces_the_default_loop(monkeypatch):
    monkeypatch.setenv("SHAREGROUP_EVENT_LOOP", "asyncio")
    assert event_loop_factory() is None
