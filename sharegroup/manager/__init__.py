"""The share-partition side of a broker (layer 3): `SharePartition`, the leader of one share-partition
(`share_partition.py`), beside the `SharePartitionManager` a broker embeds to answer ShareFetch and
ShareAcknowledge as whole requests (`manager.py` has the request path), as Kafka keeps them."""

from .dead_letters import DeadLetterBatch, DeadLetterCause, DeadLetterSink
from .delayed_fetch import DelayedFetchPurgatory, WaitOutcome
from .lock_timer import LockTimer
from .manager import SharePartitionManager
from .observer import GroupConfigSource, ManagerObserver
from .share_partition import SharePartition, SharePartitionStatus
from .sessions import ShareSession, ShareSessionCache, next_epoch

__all__ = [
    "DeadLetterBatch",
    "DeadLetterCause",
    "DeadLetterSink",
    "DelayedFetchPurgatory",
    "GroupConfigSource",
    "LockTimer",
    "ManagerObserver",
    "ShareSession",
    "ShareSessionCache",
    "SharePartition",
    "SharePartitionManager",
    "SharePartitionStatus",
    "WaitOutcome",
    "next_epoch",
]
