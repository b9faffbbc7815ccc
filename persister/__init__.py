"""persister: durable share-group state (layer 2): the share coordinator's rules over a record log.

`ShareCoordinator` holds every rule (validation, fencing, combining, checkpoint counting) and changes
its state only by replaying the records it appends to a `RecordLog`; `InMemoryPersister` is that
coordinator over a `MemoryLog`, with controls for tests (SPEC §3.2, §5). Depends on layer 0 only.
"""

from .combiner import combine
from .coordinator import ShareCoordinator
from .in_memory import InMemoryPersister, WriteRequest
from .log_api import CorruptLogError, LogEntry, RecordLog
from .memory_log import MemoryLog
from .records import (
    RecordDecodeError,
    ShareCheckpoint,
    ShareDelta,
    StateKey,
    TornRecordError,
    decode_record,
    encode_record,
    iter_records,
)
from .requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem

__all__ = [
    "CorruptLogError",
    "DeleteItem",
    "InMemoryPersister",
    "InitializeItem",
    "LogEntry",
    "MemoryLog",
    "PartitionResult",
    "ReadItem",
    "RecordDecodeError",
    "RecordLog",
    "ShareCheckpoint",
    "ShareCoordinator",
    "ShareDelta",
    "StateKey",
    "TornRecordError",
    "WriteItem",
    "WriteRequest",
    "combine",
    "decode_record",
    "encode_record",
    "iter_records",
]
