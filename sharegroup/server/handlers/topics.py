"""CreateTopics (key 19), versions 2-7: create topics on this node (the controller), one result per topic.

Each topic is checked on its own (`TopicAdmin.create`): a legal name, not existing yet, partitions >= 1
or -1 (`num.partitions`), replication factor 1 or -1, no manual assignment, known topic configs. A name
listed twice in one request is INVALID_REQUEST for that name. `validate_only` checks without creating.
v5+ results carry the partition count, replication factor and the topic's effective configs (the entries
DescribeConfigs lists: defaults included, each with its source, as Kafka returns them); v7 the topic id.
A failed topic's v5+ result has an empty configs array (Kafka's default; never null).

Authorization (Kafka's): CREATE on the cluster allows every name; otherwise CREATE on each topic name,
else TOPIC_AUTHORIZATION_FAILED "Authorization failed." (names listed twice are INVALID_REQUEST first).
The created topic's configs are returned only with DESCRIBE_CONFIGS on it; without, the result carries
`topic_config_error_code` TOPIC_AUTHORIZATION_FAILED and no configs. `__cluster_metadata` is INVALID_REQUEST
before authorization, as Kafka's controller answers it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ..codec import ZERO_UUID
from .configs import topic_config_entries

METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log: never a topic of CreateTopics


def _effective_configs(ctx: RequestContext, overrides: dict[str, str]) -> dict[str, tuple[str, int]]:
    """name -> (value, source) of a topic's effective configs: the entries DescribeConfigs lists."""
    entries = topic_config_entries(ctx, overrides, ctx.broker.store.log_config.for_topic(overrides))
    return {e["name"]: (e["value"], e["config_source"]) for e in entries}


def _result(name: str, code: int, message: str | None, topic_id=ZERO_UUID, num_partitions: int = -1,
            replication_factor: int = -1, configs: dict[str, tuple[str, int]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": topic_id,
        "error_code": code,
        "error_message": message,
        "topic_config_error_code": 0,
        "num_partitions": num_partitions,
        "replication_factor": replication_factor,
        # a failed topic's configs are an empty array, never null: Kafka's generated response leaves the
        # field at its default, and clients that decode strictly cannot read a null here
        "configs": [
            {"name": k, "value": v, "read_only": False, "config_source": source, "is_sensitive": False}
            for k, (v, source) in sorted((configs or {}).items())
        ],
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    counts = Counter(t.name for t in request.topics)
    admin = ctx.broker.topics
    results = []
    done: set[str] = set()
    any_name = ctx.authorized(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    for topic in request.topics:
        if counts[topic.name] > 1:
            if topic.name not in done:
                done.add(topic.name)
                results.append(_result(topic.name, ErrorCode.invalid_request, "Duplicate topic name."))
            continue
        if topic.name == METADATA_TOPIC:  # Kafka's controller refuses it before authorization
            results.append(_result(topic.name, ErrorCode.invalid_request,
                                   f"Creation of internal topic {METADATA_TOPIC} is prohibited."))
            continue
        if not any_name and not ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            results.append(_result(topic.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        configs = {c.name: c.value for c in topic.configs}
        try:
            info = await admin.create(
                topic.name, int(topic.num_partitions), int(topic.replication_factor), configs,
                validate_only=bool(request.validate_only), assignments=bool(topic.assignments),
            )
        except ShareError as exc:
            results.append(_result(topic.name, int(exc.error), exc.message or None))
            continue
        if ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name):
            results.append(_result(topic.name, ErrorCode.none, None, info.topic_id, info.num_partitions, 1,
                                   _effective_configs(ctx, dict(info.configs))))
        else:
            results.append({**_result(topic.name, ErrorCode.none, None, info.topic_id, info.num_partitions, 1),
                            "topic_config_error_code": ErrorCode.topic_authorization_failed})
    return ctx.response({"throttle_time": 0, "topics": results})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "topics": [_result(t.name, code, None) for t in request.topics]})


HANDLERS = (ApiHandler(19, "CreateTopics", 2, 7, handle, error_response),)
