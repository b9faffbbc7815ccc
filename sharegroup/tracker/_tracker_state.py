"""`TrackerState`: what the pure twin's part modules see of the tracker they are given.

The part modules (acquisition, transitions, start offset, invariants) are functions over the tracker's
state rather than methods, mirroring the Cython twin's `.pxi` parts. They are typed against this
Protocol, a leaf module, so no part imports `_in_flight` (which imports every part): no import cycle.
"""

from __future__ import annotations

from typing import Protocol

from ..types import StateBatch, TrackerWrite
from ._in_flight_entry import _Entry


class TrackerState(Protocol):
    """The fields and helpers of `InFlightTracker` its part modules read and move."""

    _lock_ms: int
    _limit: int
    _dlq_state: int
    _max_locks: int
    _record_limit: bool
    _throttle: int
    _entries: list[_Entry]
    _firsts: list[int]
    _heap: list[tuple[int, int]]
    _transitions: dict[int, tuple[int, list[tuple[int, int]]]]
    _member_index: dict[str, int]
    _member_names: list[str]
    _spso: int
    _speo: int
    _terminal_total: int
    _gap_start: int
    _gap_end: int
    _fetch_scan_from: int

    def _set_state(self, e: _Entry, state: int) -> None: ...
    def _set_offset_state(self, e: _Entry, k: int, state: int) -> None: ...
    def _insert_entry(self, e: _Entry) -> None: ...
    def _member(self, member_id: str) -> int: ...
    def _index_from(self, offset: int) -> int: ...
    def _next_fetch_offset_from(self, start: int) -> int: ...
    def _records_available_from(self, offset: int) -> None: ...
    def _count_terminal_from(self, start: int) -> int: ...
    def _archive(self, a: int, b: int, from_state: int, pending_too: bool = False) -> int: ...
    def _ack_target(self, ack_type: int, delivery_count: int) -> int: ...
    def _pending(self, owner: int, ranges: list[tuple[int, int]], writes: list[StateBatch]) -> TrackerWrite: ...
