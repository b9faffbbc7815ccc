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


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """`make bench` keeps its JSON in the repository (bench/results/latest.json, which the README's tables
    are generated from): drop every round's raw timing (the file would be megabytes, and its summary
    statistics stay), and note how pytest was invoked, so the run says which benchmark files it covers."""
    for bench in output_json["benchmarks"]:
        bench["stats"].pop("data", None)
    output_json["invocation"] = {"args": [str(arg) for arg in config.invocation_params.args],
                                 "smoke": os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1"}
