"""The public surface, pinned: each package's `__all__` as listed here. Adding or removing a public name is
a deliberate change made in this file too; every listed name must import."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import persister
import sharegroup

PUBLIC = {
    "sharegroup": [
        "AbortedTransaction", "AcknowledgePartition", "AcknowledgeTopic", "AcknowledgeType", "AcknowledgementBatch",
        "AcquiredRecords", "BrokerConfig", "Clock", "Errors", "FetchPartition", "FetchTopic", "FetchedBatch",
        "ForgottenTopic", "InFlightTracker", "LogBatch", "LogRead", "ManualClock", "PartitionLogs", "PartitionState",
        "Persister", "RecordState", "RecordView", "ShareAcknowledgeRequest", "ShareAcknowledgeResponse",
        "ShareAcquireMode", "ShareError", "ShareFetchPartitionData", "ShareFetchRequest", "ShareFetchResponse",
        "ShareGroupConfig", "SharePartition", "SharePartitionManager", "StateBatch", "StateSummary", "SystemClock",
    ],
    "sharegroup.tracker": [
        "InFlightTracker", "InFlightTrackerProtocol", "NATIVE", "native_tracker_class", "pure_tracker_class",
    ],
    "sharegroup.topics": ["CorruptLogError", "InMemoryPartitionLogs", "LogConfig", "TopicStore"],
    "sharegroup.manager": [
        "DeadLetterBatch", "DeadLetterCause", "DeadLetterSink", "DelayedFetchPurgatory", "GroupConfigSource",
        "LockTimer", "ManagerObserver", "SharePartition",
        "SharePartitionManager", "SharePartitionStatus", "ShareSession", "ShareSessionCache", "WaitOutcome",
        "next_epoch",
    ],
    "sharegroup.coordinator": [
        "ConsumerGroupConfig", "ConsumerGroupDescription", "ConsumerGroupState", "ConsumerMemberDescription",
        "GroupConfig", "GroupCoordinator", "GroupDescription", "GroupListener", "GroupState", "HeartbeatResult",
        "InMemoryTopics", "MemberDescription", "MemberState", "MemoryRecordSink", "OffsetInfo", "PERSISTER_ATTEMPTS",
        "Record", "RecordSink", "TopicInfo", "TopicsLookup", "range_assign", "simple_assign", "uniform_assign",
    ],
    "sharegroup.coordinator.share": [
        "GroupConfig", "GroupDescription", "GroupState", "MemberDescription", "OffsetInfo", "simple_assign",
    ],
    "sharegroup.coordinator.consumer": [
        "ConsumerGroupConfig", "ConsumerGroupDescription", "ConsumerGroupState", "ConsumerMemberDescription",
        "MemberState", "range_assign", "uniform_assign",
    ],
    "sharegroup.coordinator.classic": [
        "ClassicGroupConfig", "ClassicGroupDescription", "ClassicMemberDescription", "CommittedOffset",
        "GroupListing", "JoinGroupResult", "LeaveMemberResult", "SyncGroupResult", "decode_assignment",
        "encode_assignment", "encode_subscription", "subscribed_topics",
    ],
    "sharegroup.coordinator.transactions": [
        "EXHAUSTED_EPOCH", "MarkerWriter", "OFFSETS_TOPIC", "PendingOffset", "STATE_NAMES", "TransactionCoordinator",
        "TransactionLogKey", "TransactionLogValue", "TransactionMetadata", "TransactionSink", "TransactionalOffsets",
        "TxnState", "offsets_partition_for",
    ],
    "sharegroup.server": [],
    "sharegroup.server.handlers": ["HANDLER_MODULES", "all_handlers"],
    "sharegroup.server.security": [],
    "sharegroup.admin": [],
    "sharegroup.audit": [
        "AuditEnvironmentError", "AuditOptions", "AuditResult", "FinalState", "KeyResult", "Rule", "Violation",
        "main", "replay_log", "run_audit",
    ],
    "sharegroup.demo": ["DemoError", "run_demo", "run_live_demo", "run_walkthrough"],
    "sharegroup.demo.live": [],
    "sharegroup.demo.simulated": [],
    "persister": [
        "BulkRecordLog", "CoordinatorPersister", "CorruptLogError", "DeleteItem", "InMemoryPersister",
        "InitializeItem", "KafkaLogError", "KafkaPersister", "KafkaRecordLog", "KeyState", "LocalPersister",
        "LogEntry", "LogLockedError", "LogWriteError", "MemoryLog", "PartitionResult", "ReadItem",
        "RecordDecodeError", "RecordLog", "SegmentInfo", "SegmentLog", "ShareCheckpoint", "ShareCoordinator",
        "ShareDelta", "StateKey", "TornRecordError", "WriteItem", "WriteRequest", "apply_record", "check_frame",
        "combine", "decode_record", "encode_record", "iter_records", "parse_segment_file_name",
        "parse_start_offset", "read_log", "replay_log", "replay_record", "segment_file_name",
        "valid_frames_follow",
    ],
}


def _packages() -> list[str]:
    names = []
    for root in (sharegroup, persister):
        names.append(root.__name__)
        names += [m.name for m in pkgutil.walk_packages(root.__path__, root.__name__ + ".") if m.ispkg]
    return sorted(names)


def test_every_package_is_pinned():
    assert sorted(PUBLIC) == _packages()


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_names_are_exactly_the_pinned_ones(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    assert len(set(module.__all__)) == len(module.__all__), "a name listed twice"
    for name in module.__all__:
        assert getattr(module, name) is not None, name
