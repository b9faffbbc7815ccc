"""ShareFetch (key 78) and ShareAcknowledge (key 79), versions 1-2: the SharePartitionManager on the wire.

A request is decoded by kio into the manager's plain request (`share_messages`), answered whole by the
`SharePartitionManager`, and its answer encoded back:

- a partition's `Records` are the stored bytes of the batches holding its acquired offsets,
  concatenated as the log keeps them (never decoded or re-encoded); the client keeps the records inside
  `AcquiredRecords` and drops the rest of a batch. `Records` is empty bytes, never null, when nothing
  was acquired (librdkafka drops a whole response with a null `Records`);
- `AcquisitionLockTimeoutMs` is the group's record lock duration (0 with a top-level error);
- session and request errors (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST,
  SHARE_SESSION_LIMIT_REACHED) are top-level with no partitions; partition errors (UNKNOWN_TOPIC_ID,
  UNKNOWN_TOPIC_OR_PARTITION, ...) and acknowledgement results are per partition;
- `CurrentLeader` is -1/-1 except with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH, and
  `NodeEndpoints` is empty: this single node leads every partition.

Authorization (Kafka's order): READ on the group first, before the share session is touched (top-level
GROUP_AUTHORIZATION_FAILED, whatever the topics and whether or not the group exists); then the session
step (its errors); then READ on each topic of the request and of the session, once per topic: a refused
topic's partitions answer TOPIC_AUTHORIZATION_FAILED, for fetching and for acknowledgements alike (before
any existence check), and nothing of them is acquired or acknowledged. Unknown topic ids stay
UNKNOWN_TOPIC_ID (ids are not secret). See `SharePartitionManager` for where the topic check sits.

A ShareFetch at epoch 0 ties the share session to this connection as it opens it (before any long
poll): when the connection closes, the sessions it still owns close and their members' acquired records
are released; a session the member re-opened on another connection is not touched (see
`share_services.py`). Without share services every request gets UNSUPPORTED_VERSION, Kafka's answer
when share groups are disabled.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import Errors
from ...share_messages import (
    AcknowledgePartition,
    AcknowledgeTopic,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from ...types import AcknowledgementBatch
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType

ZERO_UUID = uuid.UUID(int=0)
GROUP_DENIED_MESSAGE = "Group authorization failed."  # Kafka's default message of the error
_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _topic_id(value: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if value is None else value


def _ack_batches(partition: Any) -> tuple[AcknowledgementBatch, ...]:
    return tuple(AcknowledgementBatch(int(b.first_offset), int(b.last_offset),
                                      tuple(int(t) for t in b.acknowledge_types))
                 for b in partition.acknowledgement_batches)


def to_fetch_request(request: Any) -> ShareFetchRequest:
    """The manager's ShareFetch from kio's (v1 or v2)."""
    return ShareFetchRequest(
        group_id=request.group_id or "",
        member_id=request.member_id or "",
        share_session_epoch=int(request.share_session_epoch),
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes),
        max_records=int(request.max_records),
        batch_size=int(request.batch_size),
        share_acquire_mode=int(getattr(request, "share_acquire_mode", 0)),
        is_renew_ack=bool(getattr(request, "is_renew_ack", False)),
        topics=tuple(FetchTopic(_topic_id(t.topic_id), tuple(FetchPartition(int(p.partition_index), _ack_batches(p))
                                                             for p in t.partitions))
                     for t in request.topics),
        forgotten_topics_data=tuple(ForgottenTopic(_topic_id(t.topic_id), tuple(int(p) for p in t.partitions))
                                    for t in request.forgotten_topics_data),
    )


def to_acknowledge_request(request: Any) -> ShareAcknowledgeRequest:
    """The manager's ShareAcknowledge from kio's (v1 or v2)."""
    return ShareAcknowledgeRequest(
        group_id=request.group_id or "",
        member_id=request.member_id or "",
        share_session_epoch=int(request.share_session_epoch),
        is_renew_ack=bool(getattr(request, "is_renew_ack", False)),
        topics=tuple(AcknowledgeTopic(_topic_id(t.topic_id),
                                      tuple(AcknowledgePartition(int(p.partition_index), _ack_batches(p))
                                            for p in t.partitions))
                     for t in request.topics),
    )


def _leader(ctx: RequestContext, code: Errors) -> dict[str, int]:
    if code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH):
        return {"leader_id": ctx.broker.node_id, "leader_epoch": 0}
    return _NO_LEADER


def _records(batches: tuple[Any, ...]) -> bytes:
    """The stored bytes of the batches, back to back, as the log holds them."""
    if len(batches) == 1:
        return bytes(batches[0].records)
    return b"".join(bytes(batch.records) for batch in batches)


def encode_fetch(ctx: RequestContext, response: ShareFetchResponse) -> Any:
    return ctx.response({
        "throttle_time": response.throttle_time_ms,
        "error_code": int(response.error_code),
        "error_message": response.error_message,
        "acquisition_lock_timeout": response.acquisition_lock_timeout_ms,
        "responses": [{
            "topic_id": topic.topic_id,
            "partitions": [{
                "partition_index": p.partition_index,
                "error_code": int(p.error_code),
                "error_message": p.error_message,
                "acknowledge_error_code": int(p.acknowledge_error_code),
                "acknowledge_error_message": p.acknowledge_error_message,
                "current_leader": _leader(ctx, p.error_code),
                "records": _records(p.records),
                "acquired_records": [{"first_offset": first, "last_offset": last, "delivery_count": count}
                                     for first, last, count in p.acquired_records],
            } for p in topic.partitions],
        } for topic in response.responses],
        "node_endpoints": [],
    })


def encode_acknowledge(ctx: RequestContext, response: ShareAcknowledgeResponse) -> Any:
    return ctx.response({
        "throttle_time": response.throttle_time_ms,
        "error_code": int(response.error_code),
        "error_message": response.error_message,
        "acquisition_lock_timeout": response.acquisition_lock_timeout_ms,
        "responses": [{
            "topic_id": topic.topic_id,
            "partitions": [{"partition_index": p.partition_index, "error_code": int(p.error_code),
                            "error_message": p.error_message, "current_leader": _leader(ctx, p.error_code)}
                           for p in topic.partitions],
        } for topic in response.responses],
        "node_endpoints": [],
    })


def _group_readable(ctx: RequestContext, request: Any) -> bool:
    return ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id or "")


def _topic_readable(ctx: RequestContext) -> Any:
    """READ on a topic by id, for the manager; unknown ids pass (the manager answers UNKNOWN_TOPIC_ID)."""
    store = ctx.broker.store

    def readable(topic_id: uuid.UUID) -> bool:
        topic = store.topic_by_id(topic_id)
        return topic is None or ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name)

    return readable


async def share_fetch(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return fetch_error(ctx, request, ErrorCode.unsupported_version)
    if not _group_readable(ctx, request):
        return fetch_error(ctx, request, ErrorCode.group_authorization_failed, GROUP_DENIED_MESSAGE)
    fetch = to_fetch_request(request)
    response = await share.manager.share_fetch(fetch, _topic_readable(ctx), ctx.connection_id)
    return encode_fetch(ctx, response)


async def share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return acknowledge_error(ctx, request, ErrorCode.unsupported_version)
    if not _group_readable(ctx, request):
        return acknowledge_error(ctx, request, ErrorCode.group_authorization_failed, GROUP_DENIED_MESSAGE)
    response = await share.manager.share_acknowledge(to_acknowledge_request(request), _topic_readable(ctx))
    return encode_acknowledge(ctx, response)


def fetch_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return encode_fetch(ctx, ShareFetchResponse(error_code=Errors(code), error_message=message))


def acknowledge_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return encode_acknowledge(ctx, ShareAcknowledgeResponse(error_code=Errors(code), error_message=message))


HANDLERS = (
    ApiHandler(78, "ShareFetch", 1, 2, share_fetch, fetch_error),
    ApiHandler(79, "ShareAcknowledge", 1, 2, share_acknowledge, acknowledge_error),
)
