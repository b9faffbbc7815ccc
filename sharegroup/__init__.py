"""sharegroup: the broker-side half of Kafka share groups (KIP-932) with a Cython core.

Public names live here. The in-flight tracker is the native Cython build unless
`SHAREGROUP_PUREPYTHON=1` selects the pure-Python twin (a missing native build is an error).
"""

from .clock import Clock, ManualClock, SystemClock
from .config import BrokerConfig, ShareGroupConfig
from .errors import Errors, ShareError
from .persistence import Persister
from .types import (
    AbortedTransaction,
    AcknowledgeType,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PartitionState,
    RecordState,
    RecordView,
    StateBatch,
    StateSummary,
)

__all__ = [
    "AcknowledgePartition",
    "AcknowledgeTopic",
    "BrokerConfig",
    "FetchPartition",
    "FetchTopic",
    "ForgottenTopic",
    "LogBatch",
    "LogRead",
    "PartitionLogs",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareAcquireMode",
    "ShareFetchPartitionData",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "SharePartitionManager",
    "AbortedTransaction",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "Clock",
    "Errors",
    "FetchedBatch",
    "InFlightTracker",
    "ManualClock",
    "PartitionState",
    "Persister",
    "RecordState",
    "RecordView",
    "SharePartition",
    "ShareError",
    "ShareGroupConfig",
    "StateBatch",
    "StateSummary",
    "SystemClock",
]

__version__ = "0.1.0"


_LAZY_LAYER0 = {
    **dict.fromkeys(("LogBatch", "LogRead", "PartitionLogs"), "logs"),
    **dict.fromkeys(
        (
            "AcknowledgePartition",
            "AcknowledgeTopic",
            "FetchPartition",
            "FetchTopic",
            "ForgottenTopic",
            "ShareAcknowledgeRequest",
            "ShareAcknowledgeResponse",
            "ShareAcquireMode",
            "ShareFetchPartitionData",
            "ShareFetchRequest",
            "ShareFetchResponse",
        ),
        "share_messages",
    ),
}


def __getattr__(name):  # lazy: importing the vocabulary must not require the native build
    if name == "InFlightTracker":
        from .tracker import InFlightTracker

        return InFlightTracker
    if name == "SharePartition":
        from .manager.share_partition import SharePartition

        return SharePartition
    if name in _LAZY_LAYER0:  # the embedding API's vocabulary, loaded on first use
        import importlib

        return getattr(importlib.import_module(f".{_LAZY_LAYER0[name]}", __name__), name)
    if name == "SharePartitionManager":
        from .manager import SharePartitionManager

        return SharePartitionManager
    raise AttributeError(f"module 'sharegroup' has no attribute {name!r}")
