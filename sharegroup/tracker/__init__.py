"""The in-flight tracker (layer 1): the contract both twins implement, and the twin this process uses.

The Cython twin `sharegroup.tracker._native` (built from `_native/tracker.pyx` and its `.pxi` parts) and
the pure-Python twin (`_in_flight` and its private parts, one per `.pxi`) implement one behaviour.
`sharegroup._twins` chooses: `SHAREGROUP_PUREPYTHON=1` selects the pure twin, otherwise the native
build is required and its absence is an error, never a silent fallback.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from .._twins import NATIVE, native_module
from ..types import AcquiredRecords, RecordView, StateBatch, TrackerWrite

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


def pure_tracker_class() -> type:
    """The pure-Python twin (`sharegroup.tracker._in_flight`)."""
    from ._in_flight import InFlightTracker as cls

    return cls


def native_tracker_class() -> type:
    """The Cython twin (`sharegroup.tracker._native`); ImportError with a clear message when not built."""
    return native_module("sharegroup.tracker._native").InFlightTracker


InFlightTracker = native_tracker_class() if NATIVE else pure_tracker_class()
