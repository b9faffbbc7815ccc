"""Committed offsets: OffsetCommit (key 8) v2-9, OffsetFetch (9) v1-9 and OffsetDelete (47) v0.

The coordinator (`share.coordinator`) keeps offsets for every group type; this module checks what
Kafka's KafkaApis checks before it reaches the coordinator and maps the answers to Kafka's shapes.

- OffsetCommit: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ on each
  topic (TOPIC_AUTHORIZATION_FAILED), then the topic and partition must exist
  (UNKNOWN_TOPIC_OR_PARTITION); only the partitions left reach the coordinator. Group-level refusals
  (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID,
  GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH, ...) go to each of those partitions. v2-4 carry a retention
  time, v6+ the leader epoch, v7+ the group instance id.
- OffsetFetch: DESCRIBE on the group (else the group's error), then DESCRIBE on each topic: a requested
  topic the client may not describe answers TOPIC_AUTHORIZATION_FAILED, a fetch of every offset leaves
  such topics out. v1 answers errors per partition; v2-7 answer a group-level refusal at top level and
  v8+ per group (several groups per request), with no topics (as Kafka); v9 carries the member id and epoch of KIP-848 members. Unknown partitions answer
  offset -1 without an error. With RequireStable (v7+), a partition whose offset an ongoing transaction
  holds (TxnOffsetCommit, not yet committed or aborted) answers UNSTABLE_OFFSET_COMMIT (retriable), offset -1.
- OffsetDelete: DELETE on the group (top-level GROUP_AUTHORIZATION_FAILED), then READ on each topic and
  its existence per partition; GROUP_SUBSCRIBED_TO_TOPIC for topics the group consumes.
Without share services (the coordinator) everything gets COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from ...coordinator.offsets import CommitRequest
from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType

NOT_AVAILABLE = int(Errors.COORDINATOR_NOT_AVAILABLE)
GROUP_AUTH = int(Errors.GROUP_AUTHORIZATION_FAILED)
TOPIC_AUTH = int(Errors.TOPIC_AUTHORIZATION_FAILED)
UNKNOWN_PARTITION = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
UNSTABLE = int(Errors.UNSTABLE_OFFSET_COMMIT)


def _coordinator(ctx: RequestContext) -> Any:
    share = ctx.broker.share
    return None if share is None else share.coordinator


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    info = ctx.broker.store.topic_by_name(topic)
    return info is not None and 0 <= partition < info.num_partitions


# -- OffsetCommit ------------------------------------------------------------------------------------


def _topic_codes(request: Any, codes: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    """The request's topics and partitions, each with its code from `codes` (NONE when absent)."""
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": codes.get((t.name, int(p.partition_index)), 0)}
                                            for p in t.partitions]} for t in request.topics]


def _commit_response(ctx: RequestContext, request: Any, codes: dict[tuple[str, int], int]) -> Any:
    return ctx.response({"throttle_time": 0, "topics": _topic_codes(request, codes)})


def _readable_partitions(ctx: RequestContext, request: Any, codes: dict[tuple[str, int], int]) -> list[tuple[str, int, Any]]:
    """The request's partitions the principal may READ and that exist, as (topic, partition, the request's
    partition entry); the others get TOPIC_AUTHORIZATION_FAILED (asked first, once per topic, so existence
    is never revealed) or UNKNOWN_TOPIC_OR_PARTITION in `codes`."""
    allowed = {name: ctx.authorized(AclOperation.READ, ResourceType.TOPIC, name)
               for name in dict.fromkeys(t.name for t in request.topics)}
    readable = []
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, int(p.partition_index))
            if not allowed[topic.name]:
                codes[key] = TOPIC_AUTH
            elif not _partition_exists(ctx, *key):
                codes[key] = UNKNOWN_PARTITION
            else:
                readable.append((*key, p))
    return readable


async def offset_commit(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return offset_commit_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return offset_commit_error(ctx, request, NOT_AVAILABLE)
    codes: dict[tuple[str, int], int] = {}
    commits = [CommitRequest(topic, partition, int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)),
                             p.committed_metadata)
               for topic, partition, p in _readable_partitions(ctx, request, codes)]
    if commits:
        retention = getattr(request, "retention_time", None)
        retention_ms = -1 if retention is None else int(retention.total_seconds() * 1000)
        try:
            results = await coordinator.offset_commit(
                request.group_id, int(request.generation_id_or_member_epoch), request.member_id, commits,
                getattr(request, "group_instance_id", None), api_version=ctx.api_version,
                retention_ms=retention_ms)
            codes.update({key: int(error) for key, error in results.items()})
        except ShareError as exc:
            codes.update({(c.topic, c.partition): int(exc.error) for c in commits})
    return _commit_response(ctx, request, codes)


def offset_commit_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return _commit_response(ctx, request, {(t.name, int(p.partition_index)): code
                                           for t in request.topics for p in t.partitions})


# -- OffsetFetch -------------------------------------------------------------------------------------


def _failed_topics(ctx: RequestContext, topics: Any, code: int) -> list[dict[str, Any]]:
    """The topics of a group-level refusal: none from v2 on (the group's error code says it all, as in
    Kafka's OffsetFetchResponse.groupError); v1, which has no group error, repeats it per partition."""
    if ctx.api_version >= 2:
        return []
    return [{"name": t.name, "partitions": [_partition(ctx, p, code=code) for p in t.partition_indexes]}
            for t in topics or ()]


def _fetch_groups(ctx: RequestContext, request: Any) -> list[tuple[str, Any, str | None, int]]:
    """(group id, topics or None, member id, member epoch) of every group asked."""
    if ctx.api_version >= 8:
        return [(g.group_id, g.topics, getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1)))
                for g in request.groups]
    return [(request.group_id, request.topics, None, -1)]


def _partition(ctx: RequestContext, index: int, offset: int = -1, epoch: int = -1, metadata: str | None = "",
               code: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": epoch,
            "metadata": metadata, "error_code": code}


async def _fetch_one(ctx: RequestContext, coordinator: Any, group_id: str, topics: Any, member_id: str | None,
                     member_epoch: int, require_stable: bool = False) -> tuple[int, list[dict[str, Any]]]:
    """(group error code, topics) of one group."""
    def failed(code: int) -> tuple[int, list[dict[str, Any]]]:
        return code, _failed_topics(ctx, topics, code)

    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return failed(GROUP_AUTH)
    if coordinator is None:
        return failed(NOT_AVAILABLE)
    described: dict[str, bool] = {}

    def may_describe(name: str) -> bool:
        if name not in described:
            described[name] = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        return described[name]

    wanted = None
    if topics is not None:
        wanted = [(t.name, int(p)) for t in topics if may_describe(t.name) for p in t.partition_indexes]
    try:
        offsets = await coordinator.offset_fetch(group_id, wanted, member_id, member_epoch)
    except ShareError as exc:
        return failed(int(exc.error))
    transactions = ctx.broker.transactions
    unstable = (transactions.coordinator.unstable_offsets(group_id)
                if require_stable and transactions is not None else set())
    out: list[dict[str, Any]] = []
    if topics is None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, index), o in offsets.items():
            if may_describe(name):
                by_topic.setdefault(name, []).append(_partition(ctx, index, o.offset, o.leader_epoch, o.metadata))
        out = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    else:
        for t in topics:
            parts = []
            for index in t.partition_indexes:
                if not may_describe(t.name):
                    parts.append(_partition(ctx, int(index), code=TOPIC_AUTH))
                    continue
                if (t.name, int(index)) in unstable:  # a transaction holds an offset not committed yet
                    parts.append(_partition(ctx, int(index), code=UNSTABLE))
                    continue
                o = offsets[(t.name, int(index))]
                parts.append(_partition(ctx, int(index), o.offset, o.leader_epoch, o.metadata, int(o.error)))
            out.append({"name": t.name, "partitions": parts})
    return 0, out


async def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    coordinator = _coordinator(ctx)
    require_stable = bool(getattr(request, "require_stable", False))
    answers = [(group_id, *await _fetch_one(ctx, coordinator, group_id, topics, member_id, epoch, require_stable))
               for group_id, topics, member_id, epoch in _fetch_groups(ctx, request)]
    if ctx.api_version >= 8:
        return ctx.response({"throttle_time": 0, "groups": [
            {"group_id": g, "topics": topics, "error_code": code} for g, code, topics in answers]})
    _group_id, code, topics = answers[0]
    return ctx.response({"throttle_time": 0, "error_code": code, "topics": topics})


def offset_fetch_error(ctx: RequestContext, request: Any, code: int) -> Any:
    groups = _fetch_groups(ctx, request)
    shaped = [(g, _failed_topics(ctx, topics, code)) for g, topics, _m, _e in groups]
    if ctx.api_version >= 8:
        return ctx.response({"throttle_time": 0, "groups": [
            {"group_id": g, "topics": topics, "error_code": code} for g, topics in shaped]})
    return ctx.response({"throttle_time": 0, "error_code": code, "topics": shaped[0][1]})


# -- OffsetDelete ------------------------------------------------------------------------------------


def _delete_response(ctx: RequestContext, request: Any, code: int, codes: dict[tuple[str, int], int]) -> Any:
    return ctx.response({"error_code": code, "throttle_time": 0, "topics": _topic_codes(request, codes)})


async def offset_delete(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return offset_delete_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return offset_delete_error(ctx, request, NOT_AVAILABLE)
    codes: dict[tuple[str, int], int] = {}
    wanted = [(topic, partition) for topic, partition, _p in _readable_partitions(ctx, request, codes)]
    try:
        results = await coordinator.offset_delete(request.group_id, wanted)
    except ShareError as exc:
        return offset_delete_error(ctx, request, int(exc.error))
    codes.update({key: int(error) for key, error in results.items()})
    return _delete_response(ctx, request, 0, codes)


def offset_delete_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"error_code": code, "throttle_time": 0, "topics": []})


HANDLERS = (
    ApiHandler(8, "OffsetCommit", 2, 9, offset_commit, offset_commit_error),
    ApiHandler(9, "OffsetFetch", 1, 9, offset_fetch, offset_fetch_error),
    ApiHandler(47, "OffsetDelete", 0, 0, offset_delete, offset_delete_error),
)
