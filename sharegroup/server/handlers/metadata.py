"""Metadata (key 3), versions 0-13: brokers, this node as controller, topics by name or by id.

- This one node is the only broker, the controller (`AdminClient.create_topics` waits for one) and the
  leader of every partition (leader epoch 0, replicas and ISR = this node).
- Topics: all of them (v0: an empty list; v1+: null), none (v1+: empty list), or the listed ones, by name
  or (v12+) by topic id: once any entry carries a non-zero id, only ids are looked up (names, even one
  beside an id, are ignored, as Kafka does). An unknown id is UNKNOWN_TOPIC_ID; an unknown name is
  auto-created when the request allows it (always below v4) and `auto.create.topics.enable` is on, else
  UNKNOWN_TOPIC_OR_PARTITION; an illegal name is INVALID_TOPIC_EXCEPTION (created or not). Below v12 a
  null name or a non-zero topic id (v10-11 have the field) is INVALID_REQUEST, as Kafka answers.

Authorization (Kafka's order): DESCRIBE on each topic first, so existence is never revealed to whom may
not describe it. A topic asked by name without DESCRIBE answers TOPIC_AUTHORIZATION_FAILED with its
name and topic id zero, whether or not it exists; by id, with name null and the id (ids are not
secret; an unknown id is UNKNOWN_TOPIC_ID); an all-topics request silently omits such topics. A
missing topic is auto-created only with CREATE on the cluster or on that topic name, else
TOPIC_AUTHORIZATION_FAILED. `*_authorized_operations` report what the principal may do (the
cluster's only to whom may DESCRIBE the cluster, else 0, as Kafka does; a topic's also when a name
it could describe is unknown or illegal).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..codec import ZERO_UUID
from ..topic_admin import TopicInfo
from ...topics.topic_store import check_topic_name

NO_OPERATIONS = -(2**31)  # Kafka's "authorized operations not requested"
DESCRIBE, CREATE, TOPIC = AclOperation.DESCRIBE, AclOperation.CREATE, ResourceType.TOPIC


def _topic(ctx: RequestContext, info: TopicInfo, include_ops: bool) -> dict[str, Any]:
    node = ctx.broker.node_id
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": 0,
                "replica_nodes": (node,),
                "isr_nodes": (node,),
                "offline_replicas": (),
            }
            for p in range(info.num_partitions)
        ],
        "topic_authorized_operations": ctx.authorized_operations(TOPIC, info.name) if include_ops else NO_OPERATIONS,
    }


def _error_topic(name: str | None, topic_id: uuid.UUID | None, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id or ZERO_UUID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": NO_OPERATIONS}


def _looked_up(ctx: RequestContext, entry: dict[str, Any], include_ops: bool) -> dict[str, Any]:
    """A topic looked up by name but not found: Kafka still reports the asked operations on its name."""
    if include_ops:
        entry["topic_authorized_operations"] = ctx.authorized_operations(TOPIC, entry["name"])
    return entry


def _envelope(ctx: RequestContext, request: Any, topics: list[dict[str, Any]]) -> Any:
    broker = ctx.broker
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return ctx.response({
        "throttle_time": 0,
        "brokers": [{"node_id": broker.node_id, "host": ctx.advertised_host, "port": ctx.advertised_port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": (NO_OPERATIONS if not include_cluster_ops
                                          else ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
                                          if ctx.authorized(DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME) else 0),
        "error_code": ErrorCode.none,
    })


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    admin = ctx.broker.topics
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    wanted = request.topics
    if wanted is None or (version == 0 and not wanted):
        return _envelope(ctx, request, [_topic(ctx, t, include_ops) for t in admin.all()
                                        if ctx.authorized(DESCRIBE, TOPIC, t.name)])
    if version < 12 and any(t.name is None or getattr(t, "topic_id", ZERO_UUID) not in (None, ZERO_UUID)
                            for t in wanted):
        return error_response(ctx, request, ErrorCode.invalid_request)
    allow_create = bool(getattr(request, "allow_auto_topic_creation", True))
    by_id = version >= 12 and any(getattr(t, "topic_id", None) not in (None, ZERO_UUID) for t in wanted)
    if by_id:  # Kafka: any topic id makes it a lookup by ids alone
        wanted = [t for t in wanted if t.topic_id not in (None, ZERO_UUID)]
    out: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for entry in wanted:
        name = entry.name
        topic_id = getattr(entry, "topic_id", None)
        key = topic_id if by_id or name is None else name
        if key in seen:
            continue
        seen.add(key)
        if name is None or by_id:
            info = admin.by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            if info is None:
                out.append(_error_topic(None, topic_id, ErrorCode.unknown_topic_id))
            elif not ctx.authorized(DESCRIBE, TOPIC, info.name):
                out.append(_error_topic(None, topic_id, ErrorCode.topic_authorization_failed))
            else:
                out.append(_topic(ctx, info, include_ops))
            continue
        if not ctx.authorized(DESCRIBE, TOPIC, name):
            out.append(_error_topic(name, None, ErrorCode.topic_authorization_failed))
            continue
        info = admin.by_name(name)
        if info is None and allow_create and ctx.broker.config["auto.create.topics.enable"] and not (
                ctx.authorized(CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or ctx.authorized(CREATE, TOPIC, name)):
            out.append(_error_topic(name, None, ErrorCode.topic_authorization_failed))
            continue
        try:
            info = info or (await admin.get_or_create(name) if allow_create else None)
            if info is None:  # not created: an illegal name still says so
                check_topic_name(name)
        except ShareError as exc:
            out.append(_looked_up(ctx, _error_topic(name, None, int(exc.error)), include_ops))
            continue
        if info is None:
            out.append(_looked_up(ctx, _error_topic(name, None, ErrorCode.unknown_topic_or_partition), include_ops))
        else:
            out.append(_topic(ctx, info, include_ops))
    return _envelope(ctx, request, out)


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    legacy = ctx.api_version < 12  # names are not nullable in the response before v12
    topics = [
        _error_topic("" if legacy and t.name is None else t.name, getattr(t, "topic_id", None), code)
        for t in (request.topics or ())
    ]
    return _envelope(ctx, request, topics)


HANDLERS = (ApiHandler(3, "Metadata", 0, 13, handle, error_response),)
