"""ConsumerGroupHeartbeat (key 68) v0-1 and ConsumerGroupDescribe (key 69) v0-1: KIP-848 consumer groups.

A heartbeat goes to `GroupCoordinator.consumer_group_heartbeat` (the group coordinator is the share
services' one: one coordinator for every group type). Authorization is Kafka's: READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED
as the top-level error); a subscription regex matches only topics the member may DESCRIBE. A refusal is a top-level error with no member id and epoch 0, as Kafka
answers. v0 clients may join with an empty member id (the coordinator picks one); v1 clients generate it.

ConsumerGroupDescribe answers per group: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), an empty id
is INVALID_GROUP_ID, a missing group or one of another type GROUP_ID_NOT_FOUND (a classic group too: "Group
g is not a consumer group."); a member without a regex subscription has SubscribedTopicRegex "" as
Kafka's member records keep it; a group whose members
hold (in their assignment or target assignment) topics the caller may not DESCRIBE gets
TOPIC_AUTHORIZATION_FAILED with Kafka's message and no members (subscriptions are not checked). With
`include_authorized_operations` each group carries the operations the caller may perform on it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType
from ..codec import ZERO_UUID
from .classic_group import GROUP_OPERATIONS
from .share_group import (  # the same response shapes as the share APIs
    NO_OPERATIONS,
    describe_error,
    described_error,
    heartbeat_error,
    heartbeat_response,
)


def _coordinator(ctx: RequestContext) -> Any:
    share = ctx.broker.share
    return None if share is None else share.coordinator


async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return heartbeat_error(ctx, request, ErrorCode.coordinator_not_available, "group coordinator not running")
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return heartbeat_error(ctx, request, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names:
        for name in dict.fromkeys(names):
            if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                return heartbeat_error(ctx, request, ErrorCode.topic_authorization_failed)
    owned = request.topic_partitions
    try:
        result = await coordinator.consumer_group_heartbeat(
            request.group_id, request.member_id, int(request.member_epoch),
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            subscribed_topic_names=None if names is None else list(names),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            # kio reads the zero topic id as None: it is a topic id all the same (one the member holds
            # nothing of), so an older epoch claiming it is fenced like any partition not assigned.
            owned_topic_partitions=None if owned is None else [
                (ZERO_UUID if tp.topic_id is None else tp.topic_id, list(tp.partitions)) for tp in owned],
            client_id=ctx.client_id or "", client_host="/" + ctx.client_host, api_version=ctx.api_version,
            topic_authorized=lambda name: ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name),
        )
    except ShareError as exc:
        return heartbeat_error(ctx, request, int(exc.error), exc.message or None)
    return heartbeat_response(ctx, result)


async def describe(ctx: RequestContext, request: Any) -> Any:
    coordinator = _coordinator(ctx)
    groups = []
    for group_id in request.group_ids:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(described_error(group_id, ErrorCode.group_authorization_failed))
            continue
        if coordinator is None:
            groups.append(described_error(group_id, ErrorCode.coordinator_not_available))
            continue
        try:
            description = coordinator.consumer_group_describe(group_id)
        except ShareError as exc:
            groups.append(described_error(group_id, int(exc.error), exc.message or None))
            continue
        names = {t: _topic_name(ctx, t) for m in description.members for t in {*m.assignment, *m.target_assignment}}
        used = set(names.values()) - {""}  # Kafka checks the assigned and target topics, not the subscriptions
        if any(not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in sorted(used)):
            groups.append(described_error(
                group_id, ErrorCode.topic_authorization_failed,
                "The group has described topic(s) that the client is not authorized to describe."))
            continue
        groups.append({
            "error_code": ErrorCode.none, "group_id": description.group_id, "group_state": str(description.state),
            "group_epoch": description.group_epoch, "assignment_epoch": description.assignment_epoch,
            "assignor_name": description.assignor_name,
            "authorized_operations": _authorized_operations(ctx, request, group_id),
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka's member records keep ""
                "assignment": _assignment(m.assignment, names),
                "target_assignment": _assignment(m.target_assignment, names),
                "member_type": 1,
            } for m in description.members],
        })
    return ctx.response({"throttle_time": 0, "groups": groups})


def _authorized_operations(ctx: RequestContext, request: Any, group_id: str) -> int:
    """The bit set of the group operations the caller may perform, when the request asks for it (as
    DescribeGroups answers it)."""
    if not getattr(request, "include_authorized_operations", False):
        return NO_OPERATIONS
    return sum(1 << int(op) for op in GROUP_OPERATIONS if ctx.authorized(op, ResourceType.GROUP, group_id))


def _topic_name(ctx: RequestContext, topic_id: Any) -> str:
    topic = ctx.broker.store.topic_by_id(topic_id)
    return "" if topic is None else topic.name


def _assignment(assignment: dict, names: dict) -> dict[str, Any]:
    """A member's partitions by topic; a topic that is gone (deleted, its members not yet told) is left
    out, as Kafka describes only topics of its current metadata."""
    return {"topic_partitions": [{"topic_id": t, "topic_name": names[t], "partitions": list(ps)}
                                 for t, ps in sorted(assignment.items()) if names.get(t)]}


HANDLERS = (
    ApiHandler(68, "ConsumerGroupHeartbeat", 0, 1, heartbeat, lambda ctx, req, code: heartbeat_error(ctx, req, code)),
    ApiHandler(69, "ConsumerGroupDescribe", 0, 1, describe, describe_error),
)
