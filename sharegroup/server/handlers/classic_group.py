"""The classic group protocol: JoinGroup (key 11) v0-9, SyncGroup (14) v0-5, Heartbeat (12) v0-4,
LeaveGroup (13) v0-5 and DescribeGroups (15) v0-6.

Each request goes to the group coordinator (`share.coordinator`, which serves every group type); this
module only maps Kafka's message shapes. Authorization comes first, as in Kafka: READ on the group for
JoinGroup, SyncGroup, Heartbeat and LeaveGroup (top-level GROUP_AUTHORIZATION_FAILED), DESCRIBE on each
group for DescribeGroups (that group's entry fails). Version differences:
- JoinGroup v0 has no rebalance timeout (the session timeout is used); v4+ members get their id with
  MEMBER_ID_REQUIRED first; v5+ carry `group.instance.id`; v7+ answer the protocol type; v9 the
  `skip_assignment` flag a rejoining static leader gets;
- LeaveGroup v0-2 name one member and answer one top-level error; v3+ name a batch (by member id or
  instance id) and answer per member;
- DescribeGroups before v6 answers a missing group with state Dead and no error; v6 with GROUP_ID_NOT_FOUND.
A JoinGroup or SyncGroup may wait for the rest of the group (the rebalance), as Kafka parks them.
Without share services (the coordinator) every request gets COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType

NOT_AVAILABLE = int(Errors.COORDINATOR_NOT_AVAILABLE)
GROUP_AUTH = int(Errors.GROUP_AUTHORIZATION_FAILED)
NOT_REQUESTED_OPERATIONS = -2147483648
# The operations a group supports (Kafka's AclEntry.supportedOperations(GROUP)), for DescribeGroups v3+.
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)


def _coordinator(ctx: RequestContext) -> Any:
    share = ctx.broker.share
    return None if share is None else share.coordinator


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.client_host


# -- JoinGroup ---------------------------------------------------------------------------------------


async def join_group(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return join_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return join_error(ctx, request, NOT_AVAILABLE)
    rebalance = getattr(request, "rebalance_timeout", None)
    try:
        result = await coordinator.join_group(
            request.group_id, request.member_id, request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols], _ms(request.session_timeout),
            -1 if rebalance is None else _ms(rebalance), getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "", client_host=_client_host(ctx),
            require_known_member_id=ctx.api_version >= 4)
    except ShareError as exc:
        return join_error(ctx, request, int(exc.error))
    v7 = ctx.api_version >= 7
    return ctx.response({
        "throttle_time": 0, "error_code": int(result.error), "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if v7 else (result.protocol_name or ""),
        "leader": result.leader, "skip_assignment": result.skip_assignment, "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    })


def join_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "generation_id": -1, "protocol_type": None,
                         "protocol_name": None if ctx.api_version >= 7 else "", "leader": "",
                         "skip_assignment": False, "member_id": request.member_id, "members": []})


# -- SyncGroup ---------------------------------------------------------------------------------------


async def sync_group(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return sync_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return sync_error(ctx, request, NOT_AVAILABLE)
    try:
        result = await coordinator.sync_group(
            request.group_id, int(request.generation_id), request.member_id,
            {a.member_id: a.assignment for a in request.assignments},
            getattr(request, "group_instance_id", None), getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None))
    except ShareError as exc:
        return sync_error(ctx, request, int(exc.error))
    return ctx.response({"throttle_time": 0, "error_code": int(result.error), "protocol_type": result.protocol_type,
                         "protocol_name": result.protocol_name, "assignment": result.assignment})


def sync_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "protocol_type": None, "protocol_name": None,
                         "assignment": b""})


# -- Heartbeat ---------------------------------------------------------------------------------------


async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return heartbeat_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return heartbeat_error(ctx, request, NOT_AVAILABLE)
    try:
        error = await coordinator.heartbeat(request.group_id, int(request.generation_id), request.member_id,
                                            getattr(request, "group_instance_id", None))
    except ShareError as exc:
        error = exc.error
    return heartbeat_error(ctx, request, int(error))


def heartbeat_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code})


# -- LeaveGroup --------------------------------------------------------------------------------------


def _leaving(ctx: RequestContext, request: Any) -> list[tuple[str, str | None]]:
    if ctx.api_version >= 3:
        return [(m.member_id, m.group_instance_id) for m in request.members]
    return [(request.member_id, None)]


async def leave_group(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return leave_error(ctx, request, GROUP_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return leave_error(ctx, request, NOT_AVAILABLE)
    try:
        results = await coordinator.leave_group(request.group_id, _leaving(ctx, request))
    except ShareError as exc:
        return leave_error(ctx, request, int(exc.error))
    if ctx.api_version < 3:  # one member, its outcome is the request's
        return ctx.response({"throttle_time": 0, "error_code": int(results[0].error) if results else 0})
    return ctx.response({"throttle_time": 0, "error_code": 0, "members": [
        {"member_id": r.member_id, "group_instance_id": r.group_instance_id, "error_code": int(r.error)}
        for r in results]})


def leave_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "members": []})


# -- DescribeGroups ----------------------------------------------------------------------------------


def _authorized_operations(ctx: RequestContext, request: Any, group_id: str) -> int:
    if not getattr(request, "include_authorized_operations", False):
        return NOT_REQUESTED_OPERATIONS
    return sum(1 << int(op) for op in GROUP_OPERATIONS if ctx.authorized(op, ResourceType.GROUP, group_id))


def _described_error(group_id: str, code: int, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": NOT_REQUESTED_OPERATIONS}


async def describe_groups(ctx: RequestContext, request: Any) -> Any:
    coordinator = _coordinator(ctx)
    groups = []
    for group_id in request.groups:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_described_error(group_id, GROUP_AUTH))
            continue
        if coordinator is None:
            groups.append(_described_error(group_id, NOT_AVAILABLE))
            continue
        try:
            described = coordinator.describe_groups([group_id])[0]
        except ShareError as exc:
            groups.append(_described_error(group_id, int(exc.error), exc.message or None))
            continue
        if described.error is Errors.GROUP_ID_NOT_FOUND and ctx.api_version < 6:
            # Before v6 a missing group is described as Dead, without an error.
            described = described._replace(error=Errors.NONE, message=None)
        groups.append({
            "error_code": int(described.error), "error_message": described.message, "group_id": group_id,
            "group_state": described.state, "protocol_type": described.protocol_type,
            "protocol_data": described.protocol_data,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                         "client_host": m.client_host, "member_metadata": m.metadata,
                         "member_assignment": m.assignment} for m in described.members],
            "authorized_operations": _authorized_operations(ctx, request, group_id),
        })
    return ctx.response({"throttle_time": 0, "groups": groups})


def describe_groups_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "groups": [_described_error(g, code) for g in request.groups]})


HANDLERS = (
    ApiHandler(11, "JoinGroup", 0, 9, join_group, join_error),
    ApiHandler(12, "Heartbeat", 0, 4, heartbeat, heartbeat_error),
    ApiHandler(13, "LeaveGroup", 0, 5, leave_group, leave_error),
    ApiHandler(14, "SyncGroup", 0, 5, sync_group, sync_error),
    ApiHandler(15, "DescribeGroups", 0, 6, describe_groups, describe_groups_error),
)
