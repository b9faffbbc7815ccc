"""Value types shared by every layer: record states, acknowledgement types and the batch shapes.

They are immutable named tuples: cheap to build (the native tracker returns many of them), compared by
value in tests, and indexable without attribute look-ups on hot paths.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

__all__ = [
    "RecordState",
    "AcknowledgeType",
    "FetchedBatch",
    "AbortedTransaction",
    "AcquiredRecords",
    "AcknowledgementBatch",
    "StateBatch",
    "RecordView",
    "PartitionState",
    "StateSummary",
    "EMPTY_MEMBER_ID",
    "TrackerWrite",
]

EMPTY_MEMBER_ID = ""


class RecordState(IntEnum):
    """State of one in-flight record, with Kafka's byte ids.

    ARCHIVING (KIP-1191) is the dead-letter step between a REJECT (or the delivery count limit) and
    ARCHIVED when the group has a dead-letter queue topic: the record holds the start offset, is never
    delivered again and becomes ARCHIVED once its dead-letter record is written (or cannot be).
    """

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """ACKNOWLEDGED and ARCHIVED records never change again (short of a reset of the partition)."""
        return self is RecordState.ACKNOWLEDGED or self is RecordState.ARCHIVED


class AcknowledgeType(IntEnum):
    """Acknowledgement types as sent on the wire; GAP marks an offset that holds no record."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class FetchedBatch(NamedTuple):
    """Header of one producer record batch read from the log; the leader never opens the records."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


class AbortedTransaction(NamedTuple):
    """An aborted transaction as listed in a fetch response (for read_committed)."""

    producer_id: int
    first_offset: int


class AcquiredRecords(NamedTuple):
    """A run of offsets handed to one consumer, all at the same delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AcknowledgementBatch(NamedTuple):
    """An acknowledgement of [first_offset, last_offset]: one type for the range or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


class StateBatch(NamedTuple):
    """The persisted form of a run of offsets sharing one delivery state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class RecordView(NamedTuple):
    """What the leader knows of one offset: state, delivery count and owner ("" when none)."""

    state: RecordState
    delivery_count: int
    member_id: str


class PartitionState(NamedTuple):
    """Durable state of one share-partition as returned by `read_state`."""

    state_epoch: int
    start_offset: int
    state_batches: list[StateBatch]


class StateSummary(NamedTuple):
    """Durable summary of one share-partition as returned by `read_summary`."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


class TrackerWrite(NamedTuple):
    """What the in-flight tracker asks to persist after a change (layer 1 → layer 3).

    `transition_id` names the pending two-phase transition to complete once the write answers (0 when the
    change is already final, as for lock expiry); `start_offset` and `delivery_complete_count` are the
    values the write must carry: the SPSO and terminal-record count as they will be once it commits.
    """

    transition_id: int
    state_batches: list[StateBatch]
    start_offset: int
    delivery_complete_count: int


# -- raw ids of the vocabulary, for code that handles plain ints (decoded records, requests) --------
# Appended for the persister and the audit: they check the ints of persisted state batches against
# these instead of keeping copies of the numbers.

RECORD_STATE_IDS = frozenset(int(state) for state in RecordState)
"""Every delivery state id a state batch may carry: 0, 1, 2, 3 (ARCHIVING) and 4."""

TERMINAL_STATE_IDS = frozenset(int(state) for state in RecordState if state.terminal)
"""The ids of the terminal states: ACKNOWLEDGED (2) and ARCHIVED (4)."""

DELIVERY_COUNT_MAX = 2**15 - 1
"""The largest delivery count a state batch can carry (DeliveryCount is an int16 on the wire)."""


def is_plain_int(value) -> bool:
    """Whether `value` is an int and not a bool (bool is an int subclass that no request field means)."""
    return isinstance(value, int) and not isinstance(value, bool)


__all__ += ["RECORD_STATE_IDS", "TERMINAL_STATE_IDS", "DELIVERY_COUNT_MAX", "is_plain_int"]
