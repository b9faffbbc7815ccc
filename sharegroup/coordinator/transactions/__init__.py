"""Kafka's transaction coordinator (layer 3): transactional ids, their producer ids and epochs, and the
transaction state machine (`coordinator.py`), with its durable record (`records.py`). It reaches the
partitions only through a `MarkerWriter` and committed offsets through `TransactionalOffsets`; the
edges (`sharegroup/server/transactions.py`) wire the topic store, the group coordinator and a durable
sink under `DIR/transactions`."""

from .coordinator import (
    EXHAUSTED_EPOCH,
    MarkerWriter,
    TransactionalOffsets,
    TransactionCoordinator,
    TransactionMetadata,
    TransactionSink,
    offsets_partition_for,
)
from .records import OFFSETS_TOPIC, STATE_NAMES, PendingOffset, TransactionLogKey, TransactionLogValue, TxnState

__all__ = ["EXHAUSTED_EPOCH", "MarkerWriter", "TransactionalOffsets", "TransactionCoordinator", "TransactionMetadata",
           "TransactionSink", "offsets_partition_for", "OFFSETS_TOPIC", "STATE_NAMES", "PendingOffset",
           "TransactionLogKey", "TransactionLogValue", "TxnState"]
