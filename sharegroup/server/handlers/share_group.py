"""ShareGroupHeartbeat (key 76) v1 and ShareGroupDescribe (key 77) v1: the group coordinator's share APIs.

A heartbeat goes to `GroupCoordinator.share_group_heartbeat` unchanged (the client generates its member
id; epoch 0 joins, -1 leaves). The assignment is sent as topic ids with partitions, or null when it has
not changed. A refusal is a top-level error with no member id, member epoch 0 and no assignment, as
Kafka answers: UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH make the client rejoin with the same id,
INVALID_REQUEST and GROUP_MAX_SIZE_REACHED are fatal to it. Without share services (an embedding that
did not start them) every request gets COORDINATOR_NOT_AVAILABLE.

The wire's member id is the client's: an empty one (even on a join, where the embedding API would make
one up) or one longer than 36 characters is INVALID_REQUEST, checked after READ on the group and before
the topics, as Kafka's request handler does.

Authorization (Kafka's order, before the coordinator is asked, so a group's existence is never revealed):
- heartbeat: READ on the group (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic
  (TOPIC_AUTHORIZATION_FAILED if any one is not describable);
- describe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group), then DESCRIBE on every
  topic assigned to its members, else TOPIC_AUTHORIZATION_FAILED for that group, without members.
  `authorized_operations` is reported when asked for.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.validation import MAX_MEMBER_ID_LENGTH
from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType

NO_OPERATIONS = -(2**31)  # Kafka's "authorized operations not requested"
UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    if share is None:
        return heartbeat_error(ctx, request, ErrorCode.coordinator_not_available, "share groups are not enabled")
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return heartbeat_error(ctx, request, ErrorCode.group_authorization_failed, "Group authorization failed.")
    member_id = request.member_id
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:  # Kafka's check before the coordinator's
        message = ("MemberId can't be empty." if not member_id
                   else f"MemberId can't be longer than {MAX_MEMBER_ID_LENGTH} characters.")
        return heartbeat_error(ctx, request, ErrorCode.invalid_request, message)
    names = request.subscribed_topic_names
    if names and not all(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in set(names)):
        return heartbeat_error(ctx, request, ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    try:
        result = await share.coordinator.share_group_heartbeat(
            request.group_id, request.member_id, int(request.member_epoch),
            None if names is None else list(names), request.rack_id,
            client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        )
    except ShareError as exc:
        return heartbeat_error(ctx, request, int(exc.error), exc.message or None)
    return heartbeat_response(ctx, result)


def heartbeat_response(ctx: RequestContext, result: Any) -> Any:
    """A successful Share- or ConsumerGroupHeartbeat answer (the two responses share these fields):
    the member id and epoch, the interval, and the assignment by topic id when the member gets one."""
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic_id, "partitions": list(partitions)}
                                           for topic_id, partitions in sorted(result.assignment.items())]}
    return ctx.response({
        "throttle_time": 0, "error_code": ErrorCode.none, "member_id": result.member_id,
        "member_epoch": result.member_epoch, "heartbeat_interval": result.heartbeat_interval_ms,
        "assignment": assignment,
    })


def heartbeat_error(ctx: RequestContext, request: Any, code: int, message: str | None = None) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None,
                         "member_epoch": 0, "heartbeat_interval": 0, "assignment": None})


async def describe(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    groups = []
    for group_id in request.group_ids:
        if share is None:
            groups.append(described_error(group_id, ErrorCode.coordinator_not_available))
            continue
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(described_error(group_id, ErrorCode.group_authorization_failed))
            continue
        try:
            description = share.coordinator.describe_group(group_id)
        except ShareError as exc:
            groups.append(described_error(group_id, int(exc.error), exc.message or None))
            continue
        assigned = {_topic_name(ctx, t) for m in description.members for t in m.assignment}
        if not all(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in assigned if name):
            groups.append(described_error(group_id, ErrorCode.topic_authorization_failed, UNDESCRIBABLE_TOPICS))
            continue
        include_ops = bool(getattr(request, "include_authorized_operations", False))
        groups.append({
            "error_code": ErrorCode.none, "group_id": description.group_id,
            "group_state": description.state.value,
            "group_epoch": description.group_epoch, "assignment_epoch": description.assignment_epoch,
            "assignor_name": "simple",
            "authorized_operations": ctx.authorized_operations(ResourceType.GROUP, group_id) if include_ops else NO_OPERATIONS,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {"topic_partitions": [_topic_partitions(ctx, t, ps)
                                                    for t, ps in sorted(m.assignment.items())]},
            } for m in description.members],
        })
    return ctx.response({"throttle_time": 0, "groups": groups})


def _topic_name(ctx: RequestContext, topic_id: Any) -> str:
    topic = ctx.broker.store.topic_by_id(topic_id)
    return "" if topic is None else topic.name


def _topic_partitions(ctx: RequestContext, topic_id: Any, partitions: list[int]) -> dict[str, Any]:
    return {"topic_id": topic_id, "topic_name": _topic_name(ctx, topic_id), "partitions": list(partitions)}


def described_error(group_id: str, code: int, message: str | None = None) -> dict[str, Any]:
    """A described group that failed (share or consumer group): the code and message, every other field
    at the schema's default, as Kafka leaves them."""
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": NO_OPERATIONS}


def describe_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "groups": [described_error(g, code) for g in request.group_ids]})


HANDLERS = (
    ApiHandler(76, "ShareGroupHeartbeat", 1, 1, heartbeat, lambda ctx, req, code: heartbeat_error(ctx, req, code)),
    ApiHandler(77, "ShareGroupDescribe", 1, 1, describe, describe_error),
)
