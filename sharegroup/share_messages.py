"""ShareFetch and ShareAcknowledge (v1–v2) requests and responses as plain dataclasses (layer 0).

These are the decoded forms of Kafka's ShareFetch (API key 78) and ShareAcknowledge (API key 79)
messages, field for field, in snake_case. A wire edge decodes into them and encodes from them; the
`SharePartitionManager` answers them as whole requests.

Version differences: v2 adds `share_acquire_mode` (ShareFetch) and `is_renew_ack` (both requests) and
allows acknowledge type 4 (RENEW) when `is_renew_ack` is set; the ShareAcknowledge v2 response adds
`acquisition_lock_timeout_ms`. A v1 request is one that leaves those fields at their defaults.

A response partition carries the `LogBatch`es that hold its acquired records: handles to bytes the log
already has (`LogBatch.records`), passed through untouched, never re-encoded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from .errors import Errors
from .logs import LogBatch
from .types import AcknowledgementBatch, AcquiredRecords

__all__ = [
    "AcknowledgePartition",
    "AcknowledgeTopic",
    "FetchPartition",
    "FetchTopic",
    "ForgottenTopic",
    "LeaderIdAndEpoch",
    "NodeEndpoint",
    "ShareAcknowledgePartitionData",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareAcknowledgeTopicResponse",
    "ShareAcquireMode",
    "ShareFetchPartitionData",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareFetchTopicResponse",
    "INITIAL_EPOCH",
    "FINAL_EPOCH",
]

INITIAL_EPOCH = 0  # a ShareFetch at this epoch opens (or resets) the share session: a full request
FINAL_EPOCH = -1  # a request at this epoch closes the share session after its acknowledgements


class ShareAcquireMode(IntEnum):
    """ShareFetch v2 `ShareAcquireMode`: whether MaxRecords is a soft limit rounded up to whole producer
    batches (the only v1 behaviour) or a hard cap."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


# -- requests -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition of a ShareFetch request, with the acknowledgements piggy-backed on it."""

    partition_index: int
    acknowledgement_batches: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic_id: uuid.UUID
    partitions: tuple[FetchPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ForgottenTopic:
    """Partitions a subsequent ShareFetch removes from its share session."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareFetchRequest:
    """ShareFetch v1–v2. Defaults are a Kafka consumer's (fetch.wait.max.ms 500, fetch.min.bytes 1,
    max.poll.records 500)."""

    group_id: str
    member_id: str
    share_session_epoch: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 0x7FFFFFFF
    max_records: int = 500
    batch_size: int = 500
    share_acquire_mode: int = ShareAcquireMode.BATCH_OPTIMIZED  # v2
    is_renew_ack: bool = False  # v2
    topics: tuple[FetchTopic, ...] = ()
    forgotten_topics_data: tuple[ForgottenTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class AcknowledgePartition:
    partition_index: int
    acknowledgement_batches: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class AcknowledgeTopic:
    topic_id: uuid.UUID
    partitions: tuple[AcknowledgePartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeRequest:
    """ShareAcknowledge v1–v2."""

    group_id: str
    member_id: str
    share_session_epoch: int
    is_renew_ack: bool = False  # v2
    topics: tuple[AcknowledgeTopic, ...] = ()


# -- responses ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    """`CurrentLeader`: -1/-1 unless the partition error is NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""

    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class ShareFetchPartitionData:
    """One partition of a ShareFetch response. `records` are the log batches holding the acquired
    offsets (whole producer batches; the consumer keeps only offsets inside `acquired_records`)."""

    partition_index: int
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    acknowledge_error_code: Errors = Errors.NONE
    acknowledge_error_message: str | None = None
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()
    records: tuple[LogBatch, ...] = ()
    acquired_records: tuple[AcquiredRecords, ...] = ()

    @property
    def acquired_count(self) -> int:
        return sum(last - first + 1 for first, last, _dc in self.acquired_records)

    @property
    def records_size_bytes(self) -> int:
        return sum(batch.size_bytes for batch in self.records)


@dataclass(slots=True)
class ShareFetchTopicResponse:
    topic_id: uuid.UUID
    partitions: list[ShareFetchPartitionData] = field(default_factory=list)


@dataclass(slots=True)
class ShareFetchResponse:
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    acquisition_lock_timeout_ms: int = 0
    responses: list[ShareFetchTopicResponse] = field(default_factory=list)
    node_endpoints: tuple[NodeEndpoint, ...] = ()

    def partition(self, topic_id: uuid.UUID, partition_index: int) -> ShareFetchPartitionData | None:
        """The response entry of one partition, or None when the response does not list it."""
        for topic in self.responses:
            if topic.topic_id == topic_id:
                for data in topic.partitions:
                    if data.partition_index == partition_index:
                        return data
        return None

    def partitions(self) -> list[tuple[uuid.UUID, ShareFetchPartitionData]]:
        """Every listed partition with its topic id, in response order."""
        return [(topic.topic_id, data) for topic in self.responses for data in topic.partitions]

    @property
    def acquired_count(self) -> int:
        return sum(data.acquired_count for topic in self.responses for data in topic.partitions)


@dataclass(slots=True)
class ShareAcknowledgePartitionData:
    partition_index: int
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()


@dataclass(slots=True)
class ShareAcknowledgeTopicResponse:
    topic_id: uuid.UUID
    partitions: list[ShareAcknowledgePartitionData] = field(default_factory=list)


@dataclass(slots=True)
class ShareAcknowledgeResponse:
    throttle_time_ms: int = 0
    error_code: Errors = Errors.NONE
    error_message: str | None = None
    acquisition_lock_timeout_ms: int = 0  # v2
    responses: list[ShareAcknowledgeTopicResponse] = field(default_factory=list)
    node_endpoints: tuple[NodeEndpoint, ...] = ()

    def partition(self, topic_id: uuid.UUID, partition_index: int) -> ShareAcknowledgePartitionData | None:
        for topic in self.responses:
            if topic.topic_id == topic_id:
                for data in topic.partitions:
                    if data.partition_index == partition_index:
                        return data
        return None
