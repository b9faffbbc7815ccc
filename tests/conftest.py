"""Shared fixtures: the `tracker_cls` fixture runs a test once per twin; a guard stops a run that was
meant to test the native tracker but loaded the pure one (a broken build must not test Python twice)."""

from __future__ import annotations

import asyncio
import os

import pytest

from sharegroup import tracker as tracker_module

REQUIRE_NATIVE = os.environ.get("SHAREGROUP_REQUIRE_NATIVE") == "1"
PURE_ONLY = os.environ.get("SHAREGROUP_PUREPYTHON") == "1"


def pytest_sessionstart(session):
    if REQUIRE_NATIVE and not tracker_module.NATIVE:
        pytest.exit("SHAREGROUP_REQUIRE_NATIVE=1 but the pure-Python tracker was selected", returncode=3)
    if REQUIRE_NATIVE:
        cls = tracker_module.InFlightTracker
        if cls.__module__ != "sharegroup.tracker._native":
            pytest.exit(f"native tracker required, got {cls.__module__}", returncode=3)


def _twins():
    twins = [pytest.param(tracker_module.pure_tracker_class(), id="pure")]
    if not PURE_ONLY:
        twins.insert(0, pytest.param(tracker_module.native_tracker_class(), id="native"))
    return twins


@pytest.fixture(params=_twins())
def tracker_cls(request):
    """Each tracker twin available in this pass (both in the native pass, the twin in the pure pass)."""
    return request.param


@pytest.fixture
def make_tracker(tracker_cls):
    def make(start_offset=0, **kw):
        return tracker_cls(start_offset, **kw)

    return make


def run(coro):
    """Run a coroutine to completion on a fresh event loop (no pytest-asyncio needed)."""
    return asyncio.run(coro)


@pytest.fixture
def tracker(tracker_cls):
    """A default tracker (window starting at offset 0) of each twin."""
    return tracker_cls(0)


# -- the Spark audit: one Spark session for the whole run (start-up costs ~7 s on 2 cores) --------------


@pytest.fixture(scope="session")
def spark():
    """The shared SparkSession of the audit tests (local[2], the small-machine settings of
    sharegroup.audit.spark_job); skipped only when Java is not installed."""
    from sharegroup.audit import AuditEnvironmentError
    from sharegroup.audit.spark_job import build_session, check_java

    try:
        check_java()
    except AuditEnvironmentError as exc:
        pytest.skip(f"Spark audit tests need Java: {exc}")
    session = build_session("local[2]")
    yield session
    session.stop()


@pytest.fixture
def client(broker):
    """A raw kio client connected to the module's `broker` fixture (an in-process `BrokerThread`); always
    closed."""
    from tests.server_harness import RawClient

    raw = RawClient(broker.broker.port)
    try:
        yield raw
    finally:
        raw.close()
