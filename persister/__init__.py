"""persister: durable share-group state (layer 2): the share coordinator's rules over a record log.

`ShareCoordinator` holds every rule (validation, fencing, combining, checkpoint counting) and changes
its state only by replaying the records it appends to a `RecordLog`; `InMemoryPersister` is that
coordinator over a `MemoryLog`, with controls for tests; `LocalPersister` is the same coordinator over
the durable `SegmentLog`. Depends on layer 0 only.

The replay rules (`KeyState`, `apply_record`, `replay_record`, `replay_log`) and the recovery rules
the audit shares (`valid_frames_follow`, `parse_start_offset`, `parse_segment_file_name`) are public,
so a reader of the log (the Spark audit) applies exactly what recovery applies.
"""

from .combiner import combine
from .coordinator_persister import CoordinatorPersister
from .in_memory_persister import InMemoryPersister, WriteRequest
from .local_persister import LocalPersister
from .memory_state_log import MemoryLog
from .share_coordinator import ShareCoordinator
from .state_log import LogLockedError, LogWriteError, SegmentInfo, SegmentLog, read_log
from .state_log_api import BulkRecordLog, CorruptLogError, LogEntry, RecordLog
from .state_log_files import parse_segment_file_name, parse_start_offset, segment_file_name
from .state_log_recovery import valid_frames_follow
from .state_records import (
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
from .state_replay import KeyState, apply_record, replay_log, replay_record
from .state_requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem



def __getattr__(name: str):
    """`KafkaRecordLog` and `KafkaPersister` on first use, so that `persister` imports without
    confluent-kafka (their modules import it lazily too; this keeps even their import on demand)."""
    if name in ("KafkaRecordLog", "KafkaLogError"):
        from . import kafka_state_log

        return getattr(kafka_state_log, name)
    if name == "KafkaPersister":
        from .kafka_persister import KafkaPersister

        return KafkaPersister
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BulkRecordLog",
    "CoordinatorPersister",
    "CorruptLogError",
    "DeleteItem",
    "InMemoryPersister",
    "InitializeItem",
    "KafkaLogError",
    "KafkaPersister",
    "KafkaRecordLog",
    "KeyState",
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
    "apply_record",
    "check_frame",
    "combine",
    "decode_record",
    "encode_record",
    "iter_records",
    "parse_segment_file_name",
    "parse_start_offset",
    "read_log",
    "replay_log",
    "replay_record",
    "segment_file_name",
    "valid_frames_follow",
]
