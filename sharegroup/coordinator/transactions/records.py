"""The transaction coordinator's durable record (Kafka's `__transaction_state` key and value) and states.

One record per transition, keyed by the transactional id; the latest record of a key is the id's state
(a tombstone, value None, means the id expired), so a compacted sink keeps one record per live id.
The value holds Kafka's TransactionLogValue fields, plus what a one-node broker keeps in the same
record instead of in `__consumer_offsets`: the producer id before a rotation and the pending
transactional offsets (TxnOffsetCommit), which become committed offsets only at the commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, NamedTuple

__all__ = ["TxnState", "STATE_NAMES", "TransactionLogKey", "TransactionLogValue", "PendingOffset",
           "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"  # the partition AddOffsetsToTxn adds stands for the group's offsets


class TxnState(IntEnum):
    """Kafka's transaction states, with their ids (TransactionStatus in the state record)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# The names DescribeTransactions and ListTransactions answer (Kafka's TransactionState names).
STATE_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    """The key of a transactional id's record (Kafka's TransactionLogKey v0)."""

    record_type: ClassVar[int] = 0
    transactional_id: str

    @property
    def group_id(self) -> str:  # the record sinks name a record's owner so
        return self.transactional_id


class PendingOffset(NamedTuple):
    """One offset a TxnOffsetCommit left pending until its transaction ends."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class TransactionLogValue(NamedTuple):
    """A transactional id's state after one transition (Kafka's TransactionLogValue fields first)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # a TxnState id
    partitions: tuple[tuple[str, int], ...]  # (topic, partition), sorted; empty outside a transaction
    last_update_ms: int
    start_ms: int  # when the transaction's first partition was added, -1 when none is open
    previous_producer_id: int  # the id before the last rotation (epoch exhaustion), -1 when none
    pending_offsets: tuple[tuple[str, str, int, int, int, str | None], ...]  # PendingOffset fields, sorted
