"""The record representation shared by the pure tracker's modules: state ids and one cached entry.

Layer 1. The Cython twin's counterpart is `_native/in_flight_entry.pxi`.
"""

from __future__ import annotations

from array import array
from typing import Any

from ..types import AcknowledgeType, RecordState

# Plain ints of the layer-0 vocabulary: they index bytearrays and compare fast in the hot loops.
AVAILABLE = int(RecordState.AVAILABLE)
ACQUIRED = int(RecordState.ACQUIRED)
ACKNOWLEDGED = int(RecordState.ACKNOWLEDGED)
ARCHIVING = int(RecordState.ARCHIVING)  # not terminal: it holds the SPSO until its dead-letter write is done
ARCHIVED = int(RecordState.ARCHIVED)
ACCEPT = int(AcknowledgeType.ACCEPT)
RELEASE = int(AcknowledgeType.RELEASE)
REJECT = int(AcknowledgeType.REJECT)
RENEW = int(AcknowledgeType.RENEW)
IN_TRANSITION = 1  # flag bit: the record's visible state awaits a persister answer (two-phase)
# Delivery counts are stored in one byte per record: a storage bound of this tracker, not a Kafka value
# (Kafka's limit is at most 10, 25 for the broker maximum).
MAX_DELIVERY_COUNT = 255


def terminal(state: int) -> bool:
    return state == ACKNOWLEDGED or state == ARCHIVED


class _Entry:
    """One cached range [first, last]: batch-level state, or per-offset arrays once split."""

    __slots__ = ("first", "last", "state", "flags", "delivery_count", "member", "deadline",
                 "offset_states", "offset_flags", "offset_delivery_counts", "offset_members", "offset_deadlines",
                 "terminal_count")
    # The per-offset arrays exist once the entry is split (`offset_states is not None`); every reader
    # checks that or splits the entry first, which a type checker cannot follow, hence `Any`.
    offset_states: Any
    offset_flags: Any
    offset_delivery_counts: Any
    offset_members: Any
    offset_deadlines: Any
    terminal_count: int

    def __init__(self, first: int, last: int, state: int, delivery_count: int, member: int, deadline: int) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.flags = 0
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline
        self.offset_states = None  # bytearray | None: per-offset state once the entry is split

    def split_per_offset(self) -> None:
        """Switch to per-offset state; every offset inherits the batch's state, owner and deadline."""
        if self.offset_states is not None:
            return
        n = self.last - self.first + 1
        self.offset_states = bytearray([self.state]) * n
        self.offset_flags = bytearray([self.flags]) * n
        self.offset_delivery_counts = bytearray([self.delivery_count]) * n
        self.offset_members = array("i", [self.member]) * n
        self.offset_deadlines = array("q", [self.deadline]) * n
        self.terminal_count = n if terminal(self.state) else 0  # terminal offsets of the split entry, kept exact


def entry_done(e: _Entry) -> bool:
    """Every record of `e` is terminal and none awaits a write."""
    if e.offset_states is None:
        return terminal(e.state) and not e.flags
    return e.terminal_count == len(e.offset_states) and e.offset_flags.find(IN_TRANSITION) < 0
