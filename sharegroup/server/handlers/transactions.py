"""The transactional producer's APIs: AddPartitionsToTxn (key 24) v0-5, AddOffsetsToTxn (25) v0-4, EndTxn
(26) v0-4 and TxnOffsetCommit (28) v0-4, over the transaction coordinator (`broker.transactions`).

serve runs transaction version 1 (it finalizes no `transaction.version` feature), so it serves the
versions of that protocol: EndTxn v5 and TxnOffsetCommit v5 belong to version 2 and are not advertised.
Kafka's per-version answers: PRODUCER_FENCED exists from v2 of AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn (older versions get INVALID_PRODUCER_EPOCH); TRANSACTION_ABORTABLE from TxnOffsetCommit v4.

Authorization (Kafka's order): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
for all four; AddPartitionsToTxn v0-3 then WRITE on each topic and its existence (a failing partition
gets TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION, every other OPERATION_NOT_ATTEMPTED, and
nothing is added); AddPartitionsToTxn v4+ (batches of transactions, the broker-to-broker form of
KIP-890, whose VerifyOnly entries only check that the partitions are in the transaction) needs
CLUSTER_ACTION on the cluster instead (top-level CLUSTER_AUTHORIZATION_FAILED); AddOffsetsToTxn and
TxnOffsetCommit READ on the group (GROUP_AUTHORIZATION_FAILED), TxnOffsetCommit READ on each topic.
Without a transaction coordinator everything answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from ...coordinator.transactions import PendingOffset
from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType

NOT_AVAILABLE = int(Errors.COORDINATOR_NOT_AVAILABLE)
TXN_AUTH = int(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _code(ctx: RequestContext, exc: ShareError, fenced_since: int = 2) -> int:
    """A coordinator refusal as this request version says it: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
    before `fenced_since`."""
    if exc.error == Errors.PRODUCER_FENCED and ctx.api_version < fenced_since:
        return int(Errors.INVALID_PRODUCER_EPOCH)
    return int(exc.error)


def _coordinator(ctx: RequestContext) -> Any:
    transactions = ctx.broker.transactions
    return None if transactions is None else transactions.coordinator


# -- AddPartitionsToTxn ----------------------------------------------------------------------------------


def _topic_results(topics: Any, code_of: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "results_by_partition": [
        {"partition_index": int(p), "partition_error_code": int(code_of(t.name, int(p)))} for p in t.partitions]}
        for t in topics]


async def _add_one(ctx: RequestContext, coordinator: Any, transactional_id: str, producer_id: int, producer_epoch: int,
                   topics: Any, verify_only: bool) -> list[dict[str, Any]]:
    """The per-partition results of one transaction's AddPartitionsToTxn (or its verification)."""
    if coordinator is None:
        return _topic_results(topics, lambda _t, _p: NOT_AVAILABLE)
    if verify_only:
        return _topic_results(topics, lambda t, p: coordinator.verify_partition(transactional_id, producer_id,
                                                                                producer_epoch, t, p))
    allowed = {t.name: ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, t.name) for t in topics}
    failed: dict[tuple[str, int], int] = {}
    for t in topics:
        info = ctx.broker.store.topic_by_name(t.name)
        for p in t.partitions:
            if not allowed[t.name]:
                failed[(t.name, int(p))] = int(Errors.TOPIC_AUTHORIZATION_FAILED)
            elif info is None or not 0 <= int(p) < info.num_partitions:
                failed[(t.name, int(p))] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if failed:  # nothing is added: the others are OPERATION_NOT_ATTEMPTED
        return _topic_results(topics, lambda t, p: failed.get((t, p), int(Errors.OPERATION_NOT_ATTEMPTED)))
    try:
        await coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [(t.name, int(p)) for t in topics for p in t.partitions])
        code = 0
    except ShareError as exc:
        code = _code(ctx, exc)
    return _topic_results(topics, lambda _t, _p: code)


async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    coordinator = _coordinator(ctx)
    if ctx.api_version <= 3:
        transactional_id = request.v3_and_below_transactional_id
        topics = request.v3_and_below_topics
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return add_partitions_error(ctx, request, TXN_AUTH)
        results = await _add_one(ctx, coordinator, transactional_id, int(request.v3_and_below_producer_id),
                                 int(request.v3_and_below_producer_epoch), topics, False)
        return ctx.response({"throttle_time": 0, "results_by_topic_v3_and_below": results})
    if not ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return add_partitions_error(ctx, request, int(Errors.CLUSTER_AUTHORIZATION_FAILED))
    answers = []
    for txn in request.transactions:
        results = await _add_one(ctx, coordinator, txn.transactional_id, int(txn.producer_id),
                                 int(txn.producer_epoch), txn.topics, bool(txn.verify_only))
        answers.append({"transactional_id": txn.transactional_id, "topic_results": results})
    return ctx.response({"throttle_time": 0, "error_code": 0, "results_by_transaction": answers})


def add_partitions_error(ctx: RequestContext, request: Any, code: int) -> Any:
    if ctx.api_version <= 3:
        return ctx.response({"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(
            request.v3_and_below_topics, lambda _t, _p: code)})
    return ctx.response({"throttle_time": 0, "error_code": code, "results_by_transaction": []})


# -- AddOffsetsToTxn -----------------------------------------------------------------------------------


async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _error_only(ctx, request, TXN_AUTH)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error_only(ctx, request, int(Errors.GROUP_AUTHORIZATION_FAILED))
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return _error_only(ctx, request, NOT_AVAILABLE)
    try:
        await coordinator.add_offsets(request.transactional_id, int(request.producer_id), int(request.producer_epoch),
                                      request.group_id)
    except ShareError as exc:
        return _error_only(ctx, request, _code(ctx, exc))
    return _error_only(ctx, request, 0)


def _error_only(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code})


# -- EndTxn ----------------------------------------------------------------------------------------------


async def end_txn(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _error_only(ctx, request, TXN_AUTH)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return _error_only(ctx, request, NOT_AVAILABLE)
    try:
        await coordinator.end_transaction(request.transactional_id, int(request.producer_id),
                                          int(request.producer_epoch), bool(request.committed))
    except ShareError as exc:
        return _error_only(ctx, request, _code(ctx, exc))
    return _error_only(ctx, request, 0)


# -- TxnOffsetCommit -------------------------------------------------------------------------------------


def _commit_response(ctx: RequestContext, request: Any, code_of: Any) -> Any:
    return ctx.response({"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": int(p.partition_index),
                                         "error_code": int(code_of(t.name, int(p.partition_index)))}
                                        for p in t.partitions]} for t in request.topics]})


async def txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return txn_offset_commit_error(ctx, request, TXN_AUTH)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return txn_offset_commit_error(ctx, request, int(Errors.GROUP_AUTHORIZATION_FAILED))
    if not request.group_id:
        return txn_offset_commit_error(ctx, request, int(Errors.INVALID_GROUP_ID))
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return txn_offset_commit_error(ctx, request, NOT_AVAILABLE)
    codes: dict[tuple[str, int], int] = {}
    allowed = {t.name: ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name) for t in request.topics}
    offsets = []
    for t in request.topics:
        info = ctx.broker.store.topic_by_name(t.name)
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            if not allowed[t.name]:
                codes[key] = int(Errors.TOPIC_AUTHORIZATION_FAILED)
            elif info is None or not 0 <= key[1] < info.num_partitions:
                codes[key] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                offsets.append(PendingOffset(request.group_id, t.name, key[1], int(p.committed_offset),
                                             int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata))
    if offsets:
        try:
            results = await coordinator.txn_offset_commit(
                request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.group_id,
                offsets, member_id=getattr(request, "member_id", ""),
                group_instance_id=getattr(request, "group_instance_id", None),
                generation_id=int(getattr(request, "generation_id", -1)), abortable=ctx.api_version >= 4)
            codes.update({key: int(error) for key, error in results.items()})
        except ShareError as exc:
            codes.update({(o.topic, o.partition): int(exc.error) for o in offsets})
    return _commit_response(ctx, request, lambda t, p: codes.get((t, p), 0))


def txn_offset_commit_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return _commit_response(ctx, request, lambda _t, _p: code)


HANDLERS = (
    ApiHandler(24, "AddPartitionsToTxn", 0, 5, add_partitions_to_txn, add_partitions_error),
    ApiHandler(25, "AddOffsetsToTxn", 0, 4, add_offsets_to_txn, _error_only),
    ApiHandler(26, "EndTxn", 0, 4, end_txn, _error_only),
    ApiHandler(28, "TxnOffsetCommit", 0, 4, txn_offset_commit, txn_offset_commit_error),
)
