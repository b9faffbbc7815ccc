"""FindCoordinator (key 10), versions 0-6: this node coordinates every group and every share-partition.

Key types (Kafka's `CoordinatorType`): 0 GROUP (the key is a group id, non-empty), 1 TRANSACTION (the key
is a transactional id, non-empty; COORDINATOR_NOT_AVAILABLE when the broker has no transaction coordinator),
2 SHARE (the key is `groupId:topicId:partition`, v6+, below v6 INVALID_REQUEST as in Kafka; a malformed
key is INVALID_REQUEST). Any other key
type is INVALID_REQUEST. Versions 0-3 carry one key; v4+ carry a batch and answer one entry per key.

Authorization per key, before the key is validated (Kafka's order): GROUP needs DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), TRANSACTION DESCRIBE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), SHARE CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED:
only brokers look share coordinators up).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType

GROUP, TRANSACTION, SHARE = 0, 1, 2
FIRST_SHARE_VERSION = 6


def _share_key_valid(key: str) -> bool:
    group, sep, rest = key.rpartition(":")  # the group id may itself hold ':'
    if not sep:
        return False
    group_id, sep, topic_id = group.rpartition(":")
    if not sep or not group_id:
        return False
    try:
        uuid_value = _kafka_uuid(topic_id)
        partition = int(rest)
    except ValueError:
        return False
    return uuid_value.int != 0 and 0 <= partition < 2**31


def _kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's 22-character base64 Uuid text (as in share coordinator keys)."""
    import base64
    import binascii

    if len(text) != 22:
        raise ValueError(text)
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (binascii.Error, ValueError):
        raise ValueError(text) from None


def _answer(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None]:
    """(error code, message) for one key."""
    if key_type == GROUP:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return ErrorCode.group_authorization_failed, "Group authorization failed."
        if not key:
            return ErrorCode.invalid_request, "the group id must not be empty"
        return ErrorCode.none, None
    if key_type == SHARE:
        if ctx.api_version < FIRST_SHARE_VERSION:
            return ErrorCode.invalid_request, "SHARE coordinator keys need FindCoordinator v6"
        if not ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        if not _share_key_valid(key):
            return ErrorCode.invalid_request, f"invalid share coordinator key {key!r}: expected groupId:topicId:partition"
        return ErrorCode.none, None
    if key_type == TRANSACTION:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return ErrorCode.transactional_id_authorization_failed, "Transactional Id authorization failed."
        if not key:
            return ErrorCode.invalid_request, "the transactional id must not be empty"
        if ctx.broker.transactions is None:
            return ErrorCode.coordinator_not_available, "this broker has no transaction coordinator"
        return ErrorCode.none, None
    return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}"


def _entry(ctx: RequestContext, key: str, code: int, message: str | None) -> dict[str, Any]:
    broker = ctx.broker
    ok = code == ErrorCode.none
    return {
        "key": key,
        "node_id": broker.node_id if ok else -1,
        "host": ctx.advertised_host if ok else "",
        "port": ctx.advertised_port if ok else -1,
        "error_code": code,
        "error_message": message,
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = int(getattr(request, "key_type", GROUP))
    if ctx.api_version >= 4:
        entries = [_entry(ctx, key, *_answer(ctx, key, key_type)) for key in request.coordinator_keys]
        return ctx.response({"throttle_time": 0, "coordinators": entries})
    entry = _entry(ctx, request.key, *_answer(ctx, request.key, key_type))
    return ctx.response({"throttle_time": 0, **entry})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    if ctx.api_version >= 4:
        return ctx.response({"throttle_time": 0, "coordinators": [_entry(ctx, k, code, None) for k in request.coordinator_keys]})
    return ctx.response({"throttle_time": 0, **_entry(ctx, request.key, code, None)})


HANDLERS = (ApiHandler(10, "FindCoordinator", 0, 6, handle, error_response),)
