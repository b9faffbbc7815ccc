"""Benchmarks compare the two tracker twins side by side in one run (ratios, not absolute numbers)."""

from __future__ import annotations

import os

import pytest

from sharegroup.tracker import native_tracker_class, pure_tracker_class


def _twins():
    twins = [pytest.param(pure_tracker_class(), id="pure")]
    if os.environ.get("SHAREGROUP_PUREPYTHON") != "1":
        twins.insert(0, pytest.param(native_tracker_class(), id="native"))
    return twins


@pytest.fixture(params=_twins())
def twin(request):
    return request.param


_LOAD_AT_START: list[float] = []


def pytest_sessionstart(session):
    _LOAD_AT_START[:] = os.getloadavg()


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """`make bench` keeps its JSON in the repository (bench/results/latest.json, which the README's tables
    are generated from): drop every round's raw timing (the file would be megabytes, and its summary
    statistics stay); note how pytest was invoked, so the run says which benchmark files it covers, and the
    load averages (1, 5, 15 min) when the session started and ended, since the machine is shared."""
    for bench in output_json["benchmarks"]:
        bench["stats"].pop("data", None)
    output_json["invocation"] = {"args": [str(arg) for arg in config.invocation_params.args],
                                 "smoke": os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1",
                                 "load_average_at_start": [round(x, 2) for x in _LOAD_AT_START],
                                 "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
