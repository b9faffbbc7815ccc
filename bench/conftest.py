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
