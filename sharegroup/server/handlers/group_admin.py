"""The share-group admin APIs an operator's tools use: ListGroups (key 16) v0-5 (filters from v4), DeleteGroups (42) v0-2,
DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets (92) v0.

Every call goes to the group coordinator (`share.coordinator`), which holds the group lock and drives
the persister; this module only maps topic names to ids and the coordinator's answers to Kafka's shapes.

- ListGroups lists every group with its protocol type, its group type (v5: "classic", "share", ...)
  and its state; `states_filter` (v4+) and `types_filter` (v5) match case-insensitively, an empty
  filter matches all. As in Kafka, DESCRIBE on the cluster lists every group, else only the groups the
  client may DESCRIBE (the others are left out, never an error).
- DeleteGroups answers per group: GROUP_ID_NOT_FOUND, GROUP_NOT_EMPTY or NONE (the share-partition
  state is deleted through the persister before the group's records).
- DescribeShareGroupOffsets: start offset and lag per partition; `topics` null means every topic the
  group holds state for. A requested partition the group holds no state for, or of a topic that does
  not exist, answers start offset -1 and lag -1 without an error (as Kafka: absence of data, like
  OffsetFetch; the unknown topic has the zero topic id); a partition index the topic does not have
  answers UNKNOWN_TOPIC_OR_PARTITION (negative: INVALID_REQUEST). A failed partition has start offset -1, leader epoch 0 and lag -1. A missing group
  is GROUP_ID_NOT_FOUND at group level.
- Alter/DeleteShareGroupOffsets carry group-level errors (GROUP_NOT_EMPTY, GROUP_ID_NOT_FOUND) in the
  top-level error code, per-topic or per-partition ones (UNKNOWN_TOPIC_OR_PARTITION) in the responses.
  DeleteShareGroupOffsets words them as Kafka does: a topic the broker does not know "This server does
  not host this topic-partition.", a topic the group holds no state for "There is no offset information
  to delete.".

Without share services every group answers COORDINATOR_NOT_AVAILABLE.

Authorization (Kafka's checks and order; group checks come before the coordinator is asked, so whether
an unauthorized group or topic exists is never revealed):
- ListGroups: DESCRIBE on the cluster lists every group; otherwise only the groups with DESCRIBE on the
  group are listed (never an error);
- DeleteGroups: DELETE on each group, else GROUP_AUTHORIZATION_FAILED for that group;
- DescribeShareGroupOffsets: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the group), then
  DESCRIBE on each topic: a named one answers TOPIC_AUTHORIZATION_FAILED per partition with topic id zero
  and start offset -1; with `topics` null such topics are left out;
- AlterShareGroupOffsets: READ on the group (top level), then READ on each topic (per partition), then
  existence (UNKNOWN_TOPIC_OR_PARTITION);
- DeleteShareGroupOffsets: DELETE on the group (top level), then READ on each topic (per topic).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..codec import ZERO_UUID

NOT_AVAILABLE = int(Errors.COORDINATOR_NOT_AVAILABLE)
GROUP_DENIED, TOPIC_DENIED = int(Errors.GROUP_AUTHORIZATION_FAILED), int(Errors.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED_MESSAGE, TOPIC_DENIED_MESSAGE = "Group authorization failed.", "Topic authorization failed."
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
NO_OFFSETS_MESSAGE = "There is no offset information to delete."  # Kafka's, for a topic the group holds no state for
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."  # Kafka's, for a topic it does not know


def _topic(ctx: RequestContext, name: str) -> Any:
    return ctx.broker.store.topic_by_name(name)


# -- ListGroups ---------------------------------------------------------------------------------------


async def list_groups(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return list_groups_error(ctx, request, NOT_AVAILABLE)
    listings = share.coordinator.list_groups(getattr(request, "states_filter", ()), getattr(request, "types_filter", ()))
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        listings = [g for g in listings if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
               "group_type": g.group_type} for g in listings]
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups})


def list_groups_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "groups": []})


# -- DeleteGroups -------------------------------------------------------------------------------------


async def delete_groups(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    results = []
    for group_id in request.groups_names:
        code = NOT_AVAILABLE
        if share is not None and not ctx.authorized(AclOperation.DELETE, GROUP, group_id):
            code = GROUP_DENIED
        elif share is not None:
            try:
                await share.coordinator.delete_group(group_id)
                code = ErrorCode.none
                share.group_configs.forget(group_id)  # Kafka deletes a group's configs with it
            except ShareError as exc:
                code = int(exc.error)
        results.append({"group_id": group_id, "error_code": code})
    return ctx.response({"throttle_time": 0, "results": results})


def delete_groups_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0,
                         "results": [{"group_id": g, "error_code": code} for g in request.groups_names]})


# -- DescribeShareGroupOffsets ------------------------------------------------------------------------


def _offset_partition(partition: int, start_offset: int, lag: int, code: int,
                      message: str | None = None) -> dict[str, Any]:
    """One partition of a described group; a failed one has Kafka's defaults: start offset -1, leader
    epoch 0, lag -1 (an unauthorized topic's keep leader epoch -1)."""
    leader_epoch = -1 if code == TOPIC_DENIED else 0
    return {"partition_index": partition, "start_offset": start_offset, "leader_epoch": leader_epoch,
            "lag": lag, "error_code": code, "error_message": message}


async def _describe_one(ctx: RequestContext, share: Any, group: Any) -> dict[str, Any]:
    group_id = group.group_id
    if not ctx.authorized(AclOperation.DESCRIBE, GROUP, group_id):
        return {"group_id": group_id, "topics": [], "error_code": GROUP_DENIED, "error_message": GROUP_DENIED_MESSAGE}
    try:
        offsets = await share.coordinator.describe_offsets(group_id)
    except ShareError as exc:
        return {"group_id": group_id, "topics": [], "error_code": int(exc.error), "error_message": exc.message or None}
    topics = []
    if group.topics is None:  # every topic the group holds state for
        for topic_id, partitions in sorted(offsets.items()):
            info = ctx.broker.store.topic_by_id(topic_id)
            if info is not None and not ctx.authorized(AclOperation.DESCRIBE, TOPIC, info.name):
                continue  # left out, as Kafka does for the topics a principal may not describe
            topics.append({"topic_name": "" if info is None else info.name, "topic_id": topic_id, "partitions": [
                _offset_partition(p, o.start_offset, o.lag, int(o.error)) for p, o in sorted(partitions.items())]})
    else:
        denied = []
        for wanted in group.topics:
            if not ctx.authorized(AclOperation.DESCRIBE, TOPIC, wanted.topic_name):
                denied.append({"topic_name": wanted.topic_name, "topic_id": ZERO_UUID, "partitions": [
                    _offset_partition(p, -1, -1, TOPIC_DENIED, TOPIC_DENIED_MESSAGE) for p in wanted.partitions]})
                continue
            info = _topic(ctx, wanted.topic_name)
            if info is None:  # as Kafka: absence of data (start offset -1), not an error
                topics.append({"topic_name": wanted.topic_name, "topic_id": ZERO_UUID, "partitions": [
                    _offset_partition(p, -1, -1, 0) for p in wanted.partitions]})
                continue
            held = offsets.get(info.topic_id, {})
            parts = []
            for p in wanted.partitions:
                o = held.get(p)
                if not 0 <= p < info.num_partitions:  # what the state summary answers for it
                    parts.append(_offset_partition(p, -1, -1, int(Errors.INVALID_REQUEST if p < 0
                                                                  else Errors.UNKNOWN_TOPIC_OR_PARTITION)))
                else:
                    parts.append(_offset_partition(p, -1, -1, 0) if o is None
                                 else _offset_partition(p, o.start_offset, o.lag, int(o.error)))
            topics.append({"topic_name": info.name, "topic_id": info.topic_id, "partitions": parts})
        topics += denied  # after the authorized ones, as Kafka appends them
    return {"group_id": group_id, "topics": topics, "error_code": ErrorCode.none, "error_message": None}


async def describe_offsets(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return describe_offsets_error(ctx, request, NOT_AVAILABLE)
    return ctx.response({"throttle_time": 0, "groups": [await _describe_one(ctx, share, g) for g in request.groups]})


def describe_offsets_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "groups": [
        {"group_id": g.group_id, "topics": [], "error_code": code, "error_message": None} for g in request.groups]})


# -- AlterShareGroupOffsets ---------------------------------------------------------------------------


async def alter_offsets(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return alter_offsets_error(ctx, request, NOT_AVAILABLE)
    if not ctx.authorized(AclOperation.READ, GROUP, request.group_id):
        return alter_offsets_error(ctx, request, GROUP_DENIED, GROUP_DENIED_MESSAGE)
    wanted: dict[uuid.UUID, dict[int, int]] = {}
    unknown: dict[str, list[int]] = {}
    refused: dict[str, list[int]] = {}
    names: dict[uuid.UUID, str] = {}
    for topic in request.topics:
        partitions = {int(p.partition_index): int(p.start_offset) for p in topic.partitions}
        if not ctx.authorized(AclOperation.READ, TOPIC, topic.topic_name):
            refused.setdefault(topic.topic_name, []).extend(partitions)
            continue
        info = _topic(ctx, topic.topic_name)
        if info is None:
            unknown.setdefault(topic.topic_name, []).extend(partitions)
            continue
        names[info.topic_id] = info.name
        wanted.setdefault(info.topic_id, {}).update(partitions)
    results: dict[uuid.UUID, dict[int, Errors]] = {}
    if wanted:
        try:
            results = await share.coordinator.alter_offsets(request.group_id, wanted)
        except ShareError as exc:
            return alter_offsets_error(ctx, request, int(exc.error), exc.message or None)
    responses = [{"topic_name": names[t], "topic_id": t, "partitions": [
        {"partition_index": p, "error_code": int(e), "error_message": None} for p, e in sorted(parts.items())]}
        for t, parts in results.items()]
    responses += [{"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
        {"partition_index": p, "error_code": int(Errors.UNKNOWN_TOPIC_OR_PARTITION), "error_message": None}
        for p in parts]} for name, parts in unknown.items()]
    responses += [{"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
        {"partition_index": p, "error_code": TOPIC_DENIED, "error_message": TOPIC_DENIED_MESSAGE}
        for p in parts]} for name, parts in refused.items()]
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
                         "responses": responses})


def alter_offsets_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message, "responses": [
        {"topic_name": t.topic_name, "topic_id": ZERO_UUID, "partitions": [
            {"partition_index": p.partition_index, "error_code": code, "error_message": message}
            for p in t.partitions]} for t in request.topics]})


# -- DeleteShareGroupOffsets --------------------------------------------------------------------------


async def delete_offsets(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return delete_offsets_error(ctx, request, NOT_AVAILABLE)
    if not ctx.authorized(AclOperation.DELETE, GROUP, request.group_id):
        return delete_offsets_error(ctx, request, GROUP_DENIED, GROUP_DENIED_MESSAGE)
    readable = {t.topic_name: ctx.authorized(AclOperation.READ, TOPIC, t.topic_name) for t in request.topics}
    refused = [{"topic_name": name, "topic_id": ZERO_UUID, "error_code": TOPIC_DENIED,
                "error_message": TOPIC_DENIED_MESSAGE} for name, ok in readable.items() if not ok]
    if refused and not any(readable.values()):  # nothing left to ask the coordinator (Kafka answers at once)
        return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
                             "responses": refused})
    known = [(t.topic_name, _topic(ctx, t.topic_name)) for t in request.topics if readable[t.topic_name]]
    ids = [info.topic_id for _, info in known if info is not None]
    try:
        results = await share.coordinator.delete_offsets(request.group_id, ids)
    except ShareError as exc:
        return delete_offsets_error(ctx, request, int(exc.error), exc.message or None)
    responses = []
    for name, info in known:
        if info is None:
            responses.append({"topic_name": name, "topic_id": ZERO_UUID,
                              "error_code": int(Errors.UNKNOWN_TOPIC_OR_PARTITION),
                              "error_message": UNKNOWN_TOPIC_MESSAGE})
        else:
            code = results.get(info.topic_id, Errors.NONE)
            responses.append({"topic_name": name, "topic_id": info.topic_id, "error_code": int(code),
                              "error_message": NO_OFFSETS_MESSAGE if code is Errors.UNKNOWN_TOPIC_OR_PARTITION
                              else None})
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
                         "responses": responses + refused})


def delete_offsets_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message, "responses": []})


HANDLERS = (
    ApiHandler(16, "ListGroups", 0, 5, list_groups, list_groups_error),
    ApiHandler(42, "DeleteGroups", 0, 2, delete_groups, delete_groups_error),
    ApiHandler(90, "DescribeShareGroupOffsets", 0, 1, describe_offsets, describe_offsets_error),
    ApiHandler(91, "AlterShareGroupOffsets", 0, 0, alter_offsets, alter_offsets_error),
    ApiHandler(92, "DeleteShareGroupOffsets", 0, 0, delete_offsets, delete_offsets_error),
)
