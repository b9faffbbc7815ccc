"""Checking ShareFetch and ShareAcknowledge requests before they touch any state.

Malformed requests (wrong types, negative limits, a renew fetch asking for records) raise
`ShareError(INVALID_REQUEST)` for the whole request. Acknowledgement batches are checked per partition
as Kafka's `validateAcknowledgementBatches` does; a partition whose batches fail gets INVALID_REQUEST as
its acknowledge error code and none of its batches is applied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import Errors, ShareError
from ..share_messages import ShareAcknowledgeRequest, ShareAcquireMode, ShareFetchRequest
from ..types import AcknowledgementBatch, AcknowledgeType
from .sessions import MAX_EPOCH, TopicPartition

__all__ = ["ParsedRequest", "parse_acknowledge", "parse_fetch", "check_acknowledgement_batches"]

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)


@dataclass(slots=True)
class ParsedRequest:
    """A request's partitions in request order, with their acknowledgement batches merged per partition."""

    requested: list[TopicPartition] = field(default_factory=list)
    acks: dict[TopicPartition, list[AcknowledgementBatch]] = field(default_factory=dict)
    forgotten: list[TopicPartition] = field(default_factory=list)

    @property
    def ack_present(self) -> bool:
        return any(self.acks.values())


def _int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ShareError(Errors.INVALID_REQUEST, f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _identity(group_id: object, member_id: object, epoch: object) -> None:
    if not isinstance(group_id, str) or not group_id:
        raise ShareError(Errors.INVALID_REQUEST, "GroupId must be a non-empty string")
    if not isinstance(member_id, str) or not member_id or len(member_id) > 36:
        raise ShareError(Errors.INVALID_REQUEST, "MemberId must be a non-empty string of at most 36 characters")
    # Any int32 is an epoch: below -1 it is checked against the session like any other (Kafka answers
    # SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH, never INVALID_REQUEST).
    _int("ShareSessionEpoch", epoch, _INT32_MIN, MAX_EPOCH)


def _batch(raw: object) -> AcknowledgementBatch:
    first: object
    last: object
    raw_types: object
    try:
        first, last, raw_types = raw  # type: ignore[misc]
        types: tuple = tuple(raw_types)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ShareError(Errors.INVALID_REQUEST, f"not an acknowledgement batch: {raw!r}") from None
    for value in (first, last, *types):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement batch fields must be integers: {raw!r}")
    return AcknowledgementBatch(first, last, types)  # type: ignore[arg-type]  # checked ints above


def _topics(topics: object, what: str) -> Iterable[tuple[uuid.UUID, object]]:
    if not isinstance(topics, (tuple, list)):
        raise ShareError(Errors.INVALID_REQUEST, f"{what} must be a sequence")
    for topic in topics:
        topic_id = getattr(topic, "topic_id", None)
        partitions = getattr(topic, "partitions", None)
        if not isinstance(topic_id, uuid.UUID) or not isinstance(partitions, (tuple, list)):
            raise ShareError(Errors.INVALID_REQUEST, f"malformed topic in {what}: {topic!r}")
        for part in partitions:
            yield topic_id, part


def _partitions_with_acks(topics: object, what: str, parsed: ParsedRequest) -> None:
    for topic_id, part in _topics(topics, what):
        index = _int("PartitionIndex", getattr(part, "partition_index", None), 0, _INT32_MAX)
        raw_batches = getattr(part, "acknowledgement_batches", ())
        if not isinstance(raw_batches, (tuple, list)):
            raise ShareError(Errors.INVALID_REQUEST, "AcknowledgementBatches must be a sequence")
        tp = (topic_id, index)
        batches = [_batch(b) for b in raw_batches]
        if tp in parsed.acks:  # a topic listed twice (librdkafka does this): merge in request order
            parsed.acks[tp].extend(batches)
        else:
            parsed.requested.append(tp)
            parsed.acks[tp] = batches


def parse_fetch(request: ShareFetchRequest) -> ParsedRequest:
    """Check a ShareFetch; raises ShareError(INVALID_REQUEST) for a malformed request."""
    _identity(request.group_id, request.member_id, request.share_session_epoch)
    _int("MaxWaitMs", request.max_wait_ms, 0, _INT32_MAX)
    _int("MinBytes", request.min_bytes, 0, _INT32_MAX)
    _int("MaxBytes", request.max_bytes, 0, _INT32_MAX)
    _int("MaxRecords", request.max_records, 0, _INT32_MAX)
    _int("BatchSize", request.batch_size, 0, _INT32_MAX)
    if request.share_acquire_mode not in (ShareAcquireMode.BATCH_OPTIMIZED, ShareAcquireMode.RECORD_LIMIT) or \
            isinstance(request.share_acquire_mode, bool):
        raise ShareError(Errors.INVALID_REQUEST, f"unknown ShareAcquireMode {request.share_acquire_mode!r}")
    if not isinstance(request.is_renew_ack, bool):
        raise ShareError(Errors.INVALID_REQUEST, "IsRenewAck must be a bool")
    if request.is_renew_ack and (request.max_wait_ms or request.min_bytes or request.max_bytes or request.max_records):
        raise ShareError(
            Errors.INVALID_REQUEST, "a renew-ack ShareFetch must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0"
        )
    parsed = ParsedRequest()
    _partitions_with_acks(request.topics, "Topics", parsed)
    for topic_id, index in _topics(request.forgotten_topics_data, "ForgottenTopicsData"):
        parsed.forgotten.append((topic_id, _int("forgotten partition", index, 0, _INT32_MAX)))
    return parsed


def parse_acknowledge(request: ShareAcknowledgeRequest) -> ParsedRequest:
    """Check a ShareAcknowledge; raises ShareError(INVALID_REQUEST) for a malformed request."""
    _identity(request.group_id, request.member_id, request.share_session_epoch)
    if not isinstance(request.is_renew_ack, bool):
        raise ShareError(Errors.INVALID_REQUEST, "IsRenewAck must be a bool")
    parsed = ParsedRequest()
    _partitions_with_acks(request.topics, "Topics", parsed)
    return parsed


def check_acknowledgement_batches(batches: list[AcknowledgementBatch], renew_allowed: bool) -> str | None:
    """Why a partition's acknowledgement batches are invalid (None when they are fine): a range with
    first > last, ranges not ascending and disjoint, no types, a per-offset types list whose length is
    not the range's, or a type outside GAP..REJECT (RENEW only in a renew-ack request)."""
    top = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
    previous_last = -1
    for first, last, types in batches:
        if first < 0 or first > last:
            return f"acknowledgement range [{first}, {last}] is empty or negative"
        if first <= previous_last:
            return f"acknowledgement ranges are not ascending and disjoint at offset {first}"
        previous_last = last
        if not types:
            return f"acknowledgement range [{first}, {last}] has no acknowledge types"
        if len(types) > 1 and len(types) != last - first + 1:
            return f"acknowledgement range [{first}, {last}] has {len(types)} types"
        for t in types:
            if not 0 <= t <= top:
                if t == AcknowledgeType.RENEW:
                    return "acknowledge type RENEW (4) needs a renew-ack request (IsRenewAck, v2)"
                return f"unknown acknowledge type {t}"
    return None
