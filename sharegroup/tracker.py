"""Selects the in-flight tracker twin and states the contract both implement.

`SHAREGROUP_PUREPYTHON=1` selects the pure-Python twin (`sharegroup.in_flight`); otherwise the Cython
build (`sharegroup._native.tracker`) is required and its absence is an error, never a silent fallback.
"""

from __future__ import annotations

import os
from typing import Protocol, Sequence

from .types import AcquiredRecords, RecordView, StateBatch, TrackerWrite

__all__ = ["InFlightTracker", "InFlightTrackerProtocol", "NATIVE", "pure_tracker_class", "native_tracker_class"]


class InFlightTrackerProtocol(Protocol):
    """The contract of both twins (layer 1: pure, given `now_ms`, returning what to persist)."""

    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def in_flight_count(self) -> int: ...
    @property
    def delivery_complete_count(self) -> int: ...
    @property
    def pending_transitions(self) -> int: ...

    def reset(self, start_offset: int) -> None: ...
    def load(self, start_offset: int, state_batches: Sequence[Sequence[int]]) -> None: ...
    def next_fetch_offset(self) -> int: ...
    def next_lock_deadline_ms(self) -> int: ...
    def record_state(self, offset: int) -> RecordView | None: ...
    def state_batches(self) -> list[StateBatch]: ...
    def acquire(self, member_id: str, fetched: Sequence[Sequence], max_records: int, now_ms: int,
                fetch_offset: int = -1, batch_size: int = 0, aborted_transactions: Sequence = (),
                read_committed: bool = False) -> list[AcquiredRecords]: ...
    def begin_acknowledge(self, member_id: str, batches: Sequence[Sequence], now_ms: int) -> TrackerWrite: ...
    def begin_release(self, member_id: str, now_ms: int) -> TrackerWrite: ...
    def complete(self, transition_id: int, committed: bool, now_ms: int) -> None: ...
    def expire_locks(self, now_ms: int) -> tuple[int, TrackerWrite]: ...
    def update_log_start_offset(self, log_start_offset: int) -> None: ...
    def _check(self) -> None: ...


def pure_tracker_class():
    from .in_flight import InFlightTracker as cls

    return cls


def native_tracker_class():
    """The Cython twin; raises ImportError with a clear message when the extension is not built."""
    try:
        from ._native.tracker import InFlightTracker as cls
    except ImportError as exc:
        raise ImportError(
            "the native in-flight tracker (sharegroup._native.tracker) is not built: run `make build` "
            "(or `python setup.py build_ext --inplace`), or set SHAREGROUP_PUREPYTHON=1 to use the "
            f"pure-Python twin ({exc})"
        ) from exc
    return cls


NATIVE = os.environ.get("SHAREGROUP_PUREPYTHON") != "1"
InFlightTracker = native_tracker_class() if NATIVE else pure_tracker_class()
