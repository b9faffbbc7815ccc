"""InitProducerId (key 22), versions 0-5: producer ids for idempotent producers, from the topic store.

A producer id without an epoch or an epoch without an id (v3+) is INVALID_REQUEST, as is an empty
transactional id, before anything else but authorization (Kafka's order).

The store owns producer state (ids are durable with the topic data, so a restarted broker never hands
out an id twice). A request with a transactional id goes to the transaction coordinator
(`broker.transactions`; without one COORDINATOR_NOT_AVAILABLE), after the timeout check Kafka does
first (outside `[1, transaction.max.timeout.ms]`: INVALID_TRANSACTION_TIMEOUT): epoch bump (fencing the
previous producer and aborting its open transaction), KIP-360 checks, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
before v4), CONCURRENT_TRANSACTIONS while a transaction of the id is completing.

Authorization comes before both (Kafka's order): a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the cluster or
WRITE on at least one topic (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
    elif not (ctx.authorized(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
              or ctx.authorized_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    producer_id = int(getattr(request, "producer_id", -1))
    producer_epoch = int(getattr(request, "producer_epoch", -1))
    if (producer_id == -1) != (producer_epoch == -1):  # KIP-360: both or neither
        return error_response(ctx, request, ErrorCode.invalid_request)
    if request.transactional_id == "":
        return error_response(ctx, request, ErrorCode.invalid_request)
    if request.transactional_id is not None:
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        if not 0 < timeout_ms <= ctx.broker.config["transaction.max.timeout.ms"]:
            return error_response(ctx, request, ErrorCode.invalid_transaction_timeout)
        transactions = ctx.broker.transactions
        if transactions is None:
            return error_response(ctx, request, ErrorCode.coordinator_not_available)
        try:
            pid, epoch = await transactions.coordinator.init_producer_id(
                request.transactional_id, timeout_ms, producer_id, producer_epoch)
        except ShareError as exc:
            code = int(exc.error)
            if code == ErrorCode.producer_fenced and ctx.api_version < 4:  # PRODUCER_FENCED came with v4
                code = ErrorCode.invalid_producer_epoch
            return error_response(ctx, request, code)
        return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid,
                             "producer_epoch": epoch})
    try:
        pid, epoch = ctx.broker.store.init_producer_id(producer_id=producer_id, producer_epoch=producer_epoch)
    except ShareError as exc:
        return error_response(ctx, request, int(exc.error))
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1})


HANDLERS = (ApiHandler(22, "InitProducerId", 0, 5, handle, error_response),)
