"""DeleteTopics (key 20) v1-6 and DeleteRecords (key 21) v0-2: removing data, and what share groups see.

- DeleteTopics deletes each topic from the store (by name, or by id from v6), then has the group
  coordinator delete every group's share-partition state of it through the persister (so a topic
  created later under the same name starts clean). Per topic: NONE, UNKNOWN_TOPIC_OR_PARTITION (no such
  name), UNKNOWN_TOPIC_ID (no such id), INVALID_REQUEST (both or neither of name and id given; a name
  or an id given twice, or a name and its topic's id: that topic is not deleted, as in Kafka).
- DeleteRecords moves each partition's log start offset to `offset` (-1: the high watermark) and pushes
  the new log start into the loaded share-partitions of that partition (their start offset moves up,
  records below it are archived). A partition listed more than once is deleted up to the last offset
  listed for it and answered once, as Kafka collects the request. Per partition: the new low watermark, or UNKNOWN_TOPIC_OR_PARTITION /
  OFFSET_OUT_OF_RANGE (beyond the high watermark) with low watermark -1.

Authorization (Kafka's order; TOPIC_AUTHORIZATION_FAILED per topic or partition):
- DeleteTopics by name: DESCRIBE on the topic before existence (topic id zero in the answer), then DELETE;
  by id: an unknown id is UNKNOWN_TOPIC_ID, a topic the principal may not describe answers with name
  null, then DELETE;
- DeleteRecords: DELETE on the topic, before existence.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType
from ..codec import ZERO_UUID

log = logging.getLogger("sharegroup.server")


def _wanted(request: Any) -> list[tuple[str | None, Any]]:
    """(name, topic id or None) of every topic of a DeleteTopics request, whatever its version."""
    if hasattr(request, "topics"):  # kio's DeleteTopics v6+ (names or ids); v0-5 have only topic_names
        return [(t.name, None if t.topic_id in (None, ZERO_UUID) else t.topic_id) for t in request.topics]
    return [(name, None) for name in request.topic_names]


def _topic_result(name: str | None, topic_id: Any, code: int, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id or ZERO_UUID, "error_code": code, "error_message": message}


async def _delete_one(ctx: RequestContext, name: str | None, topic_id: Any) -> dict[str, Any]:
    store = ctx.broker.store
    if name is None and topic_id is None:
        return _topic_result(None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified.")
    if name is not None and topic_id is not None:
        return _topic_result(name, topic_id, ErrorCode.invalid_request, "You may not specify both topic name and topic id.")
    if name is not None and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _topic_result(name, None, ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    info = store.topic_by_name(name) if name is not None else store.topic_by_id(topic_id)
    if info is None:
        code = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
        return _topic_result(name, topic_id, code, "This server does not host this topic.")
    if name is None and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
        return _topic_result(None, topic_id, ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, info.name):
        return _topic_result(info.name, info.topic_id, ErrorCode.topic_authorization_failed,
                             "Topic authorization failed.")
    try:
        await store.delete_topic(info.name)
    except ShareError as exc:
        return _topic_result(info.name, info.topic_id, int(exc.error), exc.message or None)
    share = ctx.broker.share
    if share is not None:
        failed = {g: e for g, e in (await share.coordinator.topic_deleted(info.topic_id)).items() if e != Errors.NONE}
        if failed:  # the topic is gone all the same; the state stays "deleting" and is retried on the next delete
            log.warning("topic %s deleted; share state of groups %s not deleted yet", info.name, sorted(failed))
        await share.coordinator.delete_topic_offsets(info.name)  # committed offsets of consumer groups
    return _topic_result(info.name, info.topic_id, ErrorCode.none)


def _refused_twice(ctx: RequestContext, wanted: list[tuple[str | None, Any]]) -> dict[int, dict[str, Any] | None]:
    """Kafka's refusals of a topic given twice in one request, by index into `wanted` (None: an entry
    whose refusal was already answered). Such a topic is not deleted: a name or an id given twice is
    INVALID_REQUEST once; a name whose topic is also given by id is INVALID_REQUEST for the name (when
    the principal may describe and delete it; otherwise the usual refusal answers)."""
    names = Counter(n for n, t in wanted if n is not None and t is None)
    ids = Counter(t for n, t in wanted if t is not None and n is None)
    refused: dict[int, dict[str, Any] | None] = {}
    answered: set[tuple[str | None, Any]] = set()
    for index, (name, topic_id) in enumerate(wanted):
        if name is not None and topic_id is None and names[name] > 1:
            refused[index] = None if (name, None) in answered else _topic_result(
                name, None, ErrorCode.invalid_request, "Duplicate topic name.")
        elif topic_id is not None and name is None and ids[topic_id] > 1:
            refused[index] = None if (None, topic_id) in answered else _topic_result(
                None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.")
        elif name is not None and topic_id is None:
            info = ctx.broker.store.topic_by_name(name)
            allowed = (AclOperation.DESCRIBE, AclOperation.DELETE)
            if info is not None and info.topic_id in ids and all(
                    ctx.authorized(op, ResourceType.TOPIC, name) for op in allowed):
                refused[index] = _topic_result(name, info.topic_id, ErrorCode.invalid_request,
                                               "The provided topic name maps to an ID that was already supplied.")
        answered.add((name, topic_id))
    return refused


async def delete_topics(ctx: RequestContext, request: Any) -> Any:
    wanted = _wanted(request)
    refused = _refused_twice(ctx, wanted)  # decided before anything is deleted
    responses = []
    for index, (name, topic_id) in enumerate(wanted):
        if index in refused:
            if refused[index] is not None:
                responses.append(refused[index])
            continue
        responses.append(await _delete_one(ctx, name, topic_id))
    return ctx.response({"throttle_time": 0, "responses": responses})


def delete_topics_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0,
                         "responses": [_topic_result(n, t, code) for n, t in _wanted(request)]})


async def _delete_records_one(ctx: RequestContext, info: Any, partition: int, offset: int) -> dict[str, Any]:
    store = ctx.broker.store
    if info is None or not store.has_partition(info.topic_id, partition):
        return {"partition_index": partition, "low_watermark": -1, "error_code": ErrorCode.unknown_topic_or_partition}
    try:
        low_watermark = await store.delete_records(info.topic_id, partition, offset)
    except ShareError as exc:
        return {"partition_index": partition, "low_watermark": -1, "error_code": int(exc.error)}
    share = ctx.broker.share
    if share is not None:
        share.log_start_moved(info.topic_id, partition)
    return {"partition_index": partition, "low_watermark": low_watermark, "error_code": ErrorCode.none}


async def delete_records(ctx: RequestContext, request: Any) -> Any:
    wanted: dict[str, dict[int, int]] = {}  # as Kafka collects them: one offset per partition, the last wins
    for topic in request.topics:
        for p in topic.partitions:
            wanted.setdefault(topic.name, {})[int(p.partition_index)] = int(p.offset)
    topics = []
    for name, offsets in wanted.items():
        if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, name):
            partitions = [{"partition_index": p, "low_watermark": -1,
                           "error_code": ErrorCode.topic_authorization_failed} for p in offsets]
            topics.append({"name": name, "partitions": partitions})
            continue
        info = ctx.broker.store.topic_by_name(name)
        partitions = [await _delete_records_one(ctx, info, p, offset) for p, offset in offsets.items()]
        topics.append({"name": name, "partitions": partitions})
    return ctx.response({"throttle_time": 0, "topics": topics})


def delete_records_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code} for p in t.partitions]}
        for t in request.topics]})


HANDLERS = (
    ApiHandler(20, "DeleteTopics", 1, 6, delete_topics, delete_topics_error),
    ApiHandler(21, "DeleteRecords", 0, 2, delete_records, delete_records_error),
)
