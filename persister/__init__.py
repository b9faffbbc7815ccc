"""persister: durable share-group state (layer 2): the share coordinator's rules over a record log.

`ShareCoordinator` holds every rule (validation, fencing, combining, checkpoint counting) and changes
its state only by replaying the records it appends to a `RecordLog`; `InMemoryPersister` is that
coordinator over a `MemoryLog`, with controls for tests; `LocalPersister` is the same coordinator over
the durable `SegmentLog` (SPEC §3.2, §5). Depends on layer 0 only.
"""

from .combiner import combine
from .coordinator import ShareCoordinator
from .coordinator_persister import CoordinatorPersister
from .in_memory import InMemoryPersister, WriteRequest
from .local import LocalPersister
from .log import LogLockedError, LogWriteError, SegmentInfo, SegmentLog, read_log
from .log_api import CorruptLogError, LogEntry, RecordLog
from .memory_log import MemoryLog
from .records import (
    RecordDecodeError,
    ShareCheckpoint,
    ShareDelta,
    StateKey,
    TornRecordError,
    check_frame,
    decode_record,
    encode_record,
    iter_records,
)
from .requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem

__all__ = [
    "CoordinatorPersister",
    "CorruptLogError",
    "DeleteItem",
    "InMemoryPersister",
    "InitializeItem",
    "LocalPersister",
    "LogEntry",
    "LogLockedError",
    "LogWriteError",
    "MemoryLog",
    "PartitionResult",
    "ReadItem",
    "RecordDecodeError",
    "RecordLog",
    "SegmentInfo",
    "SegmentLog",
    "ShareCheckpoint",
    "ShareCoordinator",
    "ShareDelta",
    "StateKey",
    "TornRecordError",
    "WriteItem",
    "WriteRequest",
    "check_frame",
    "combine",
    "decode_record",
    "encode_record",
    "iter_records",
    "read_log",
]
