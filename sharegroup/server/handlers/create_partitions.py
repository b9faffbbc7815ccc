"""CreatePartitions (key 37), versions 0-3: grow topics on this node, one result per topic.

New partitions are empty and start at offset 0; share groups that subscribe to the topic see the new
partition count on their next heartbeat (the metadata hash moves) and initialize the new
share-partitions at offset 0, whatever `share.auto.offset.reset` says, so no record produced before
the group noticed is skipped. Per topic, in Kafka's order: NONE, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PARTITIONS (count not above the current one), INVALID_REPLICA_ASSIGNMENT (manual assignments
not one per new partition, or naming a broker other than this node), INVALID_REQUEST (a topic listed
twice). `validate_only` checks without growing. ALTER on the topic is checked before
anything else of it (TOPIC_AUTHORIZATION_FAILED, so existence is not revealed).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType


def _result(name: str, code: int, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


def _check_assignments(assignments: Any, additional: int, node_id: int) -> None:
    """Kafka's checks of manual assignments, after existence and count: one per new partition, each a
    non-empty list of registered brokers without repeats (here: only this node)."""
    if len(assignments) != additional:
        raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"Attempted to add {additional} additional partition(s), "
                         f"but only {len(assignments)} assignment(s) were specified.")
    for assignment in assignments:
        brokers = list(assignment.broker_ids)
        if not brokers:
            raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty "
                                                                "replica list.")
        for broker in brokers:
            if broker != node_id:
                raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker {broker}, "
                                 f"but no such broker is registered.")
        if len(brokers) > 1:
            raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                                                f"broker {node_id} more than once.")


async def handle(ctx: RequestContext, request: Any) -> Any:
    counts = Counter(t.name for t in request.topics)
    results = []
    reported: set[str] = set()
    for topic in request.topics:
        if counts[topic.name] > 1:
            if topic.name not in reported:
                reported.add(topic.name)
                results.append(_result(topic.name, ErrorCode.invalid_request,
                                       "Duplicate topic name."))
            continue
        if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append(_result(topic.name, ErrorCode.topic_authorization_failed, "Topic authorization failed."))
            continue
        try:
            info = await ctx.broker.store.create_partitions(topic.name, int(topic.count), validate_only=True)
            if topic.assignments is not None:
                _check_assignments(topic.assignments, info.num_partitions - ctx.broker.store.topic_by_name(
                    topic.name).num_partitions, ctx.broker.node_id)
            if not request.validate_only:
                await ctx.broker.store.create_partitions(topic.name, int(topic.count))
        except ShareError as exc:
            results.append(_result(topic.name, int(exc.error), exc.message or None))
            continue
        results.append(_result(topic.name, ErrorCode.none))
    return ctx.response({"throttle_time": 0, "results": results})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "results": [_result(t.name, code) for t in request.topics]})


HANDLERS = (ApiHandler(37, "CreatePartitions", 0, 3, handle, error_response),)
