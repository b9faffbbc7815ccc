"""CreatePartitions (key 37), versions 0-3: grow topics on this node, one result per topic.

New partitions are empty and start at offset 0; share groups that subscribe to the topic see the new
partition count on their next heartbeat (the metadata hash moves) and initialize the new
share-partitions at offset 0, whatever `share.auto.offset.reset` says, so no record produced before
the group noticed is skipped. Per topic: NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count
not above the current one), INVALID_REQUEST (a topic listed twice, or a manual assignment: this broker
is a single node). `validate_only` checks without growing. ALTER on the topic is checked before
anything else of it (TOPIC_AUTHORIZATION_FAILED, so existence is not revealed).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType


def _result(name: str, code: int, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


async def handle(ctx: RequestContext, request: Any) -> Any:
    counts = Counter(t.name for t in request.topics)
    results = []
    reported: set[str] = set()
    for topic in request.topics:
        if counts[topic.name] > 1:
            if topic.name not in reported:
                reported.add(topic.name)
                results.append(_result(topic.name, ErrorCode.invalid_request,
                                       f"Duplicate topic name {topic.name} in the request."))
            continue
        if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append(_result(topic.name, ErrorCode.topic_authorization_failed, "Topic authorization failed."))
            continue
        if topic.assignments:
            results.append(_result(topic.name, ErrorCode.invalid_request,
                                   "Manual partition assignment is not supported by this single-node broker."))
            continue
        try:
            await ctx.broker.store.create_partitions(topic.name, int(topic.count),
                                                     validate_only=bool(request.validate_only))
        except ShareError as exc:
            results.append(_result(topic.name, int(exc.error), exc.message or None))
            continue
        results.append(_result(topic.name, ErrorCode.none))
    return ctx.response({"throttle_time": 0, "results": results})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "results": [_result(t.name, code) for t in request.topics]})


HANDLERS = (ApiHandler(37, "CreatePartitions", 0, 3, handle, error_response),)
