"""The one native/twin switch (`sharegroup._twins`): each compiled module is required unless
SHAREGROUP_PUREPYTHON=1, and a missing build is an error naming the module, never a silent fallback."""

from __future__ import annotations

import importlib
import sys

import pytest

from sharegroup import _twins

NATIVE_MODULES = {
    # compiled module -> its pure twin
    "sharegroup.tracker._native": "sharegroup.tracker._in_flight",
    "persister._native_records": "persister.frame_codec_pure",
    "sharegroup.topics._record_scan": "sharegroup.topics.record_batch",
}


@pytest.mark.parametrize("native", sorted(NATIVE_MODULES))
def test_a_missing_build_is_an_error_naming_the_module(monkeypatch, native):
    monkeypatch.setitem(sys.modules, native, None)  # what a missing build looks like to the import system
    with pytest.raises(ImportError, match=f"{native} is not built.*SHAREGROUP_PUREPYTHON=1"):
        _twins.native_module(native)
    if _twins.NATIVE:
        with pytest.raises(ImportError, match="is not built"):
            _twins.twin(native, NATIVE_MODULES[native])


@pytest.mark.parametrize("native", sorted(NATIVE_MODULES))
def test_twin_selects_by_the_one_switch(native):
    chosen = _twins.twin(native, NATIVE_MODULES[native])
    assert chosen.__name__ == (native if _twins.NATIVE else NATIVE_MODULES[native])


def test_every_selector_reads_the_one_switch():
    """The tracker, the frame codec and the record scan all answer what `_twins.NATIVE` says."""
    from persister import frame_codec
    from sharegroup import tracker

    assert tracker.NATIVE is _twins.NATIVE and frame_codec.NATIVE is _twins.NATIVE
    expected = "sharegroup.tracker._native" if _twins.NATIVE else "sharegroup.tracker._in_flight"
    assert tracker.InFlightTracker.__module__ == expected
    assert frame_codec.frame_codec().NATIVE is _twins.NATIVE
    record_batch = importlib.import_module("sharegroup.topics.record_batch")
    scanner = record_batch._timestamp_scanner()
    assert (scanner is record_batch.scan_timestamp_deltas) is (not _twins.NATIVE)
