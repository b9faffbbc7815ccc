"""The operators' transaction APIs: DescribeProducers (key 61) v0, DescribeTransactions (65) v0 and
ListTransactions (66) v0-2 (what `kafka-transactions.sh` and Admin.describeTransactions use).

- DescribeProducers: READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition), then the partition
  must exist (UNKNOWN_TOPIC_OR_PARTITION); answers every producer the partition knows: id, epoch, last
  sequence, last timestamp, coordinator epoch (0: one coordinator generation) and the first offset of its
  open transaction (-1 when none).
- DescribeTransactions: DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
  unknown id is TRANSACTIONAL_ID_NOT_FOUND; topics the caller may not DESCRIBE are left out. The start
  time is -1 when no transaction is open (Kafka's value; Java's admin client reads it as "none").
- ListTransactions: ids the caller may not DESCRIBE are left out silently; filters by state (names the
  broker does not know come back in UnknownStateFilters), producer id, v1 duration (running longer than)
  and v2 transactional id pattern (a Java-style regular expression; an invalid one is
  INVALID_REGULAR_EXPRESSION).
Without a transaction coordinator, the last two answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import datetime
from typing import Any

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


# -- DescribeProducers ------------------------------------------------------------------------------------


def _producers(ctx: RequestContext, name: str, index: int, allowed: bool) -> dict[str, Any]:
    def failed(code: int, message: str | None = None) -> dict[str, Any]:
        return {"partition_index": index, "error_code": code, "error_message": message, "active_producers": []}

    if not allowed:
        return failed(int(Errors.TOPIC_AUTHORIZATION_FAILED))
    info = ctx.broker.store.topic_by_name(name)
    if info is None or not 0 <= index < info.num_partitions:
        return failed(int(Errors.UNKNOWN_TOPIC_OR_PARTITION),
                      f"This server does not host this topic-partition: {name}-{index}")
    producers = []
    for producer_id, entry, txn_start in ctx.broker.store.partition_log(info.topic_id, index).active_producers():
        producers.append({"producer_id": producer_id, "producer_epoch": entry.epoch,
                          "last_sequence": entry.batches[-1].last_seq if entry.batches else -1,
                          "last_timestamp": entry.last_timestamp, "coordinator_epoch": 0,
                          "current_txn_start_offset": txn_start})
    return {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": producers}


async def describe_producers(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for t in request.topics:
        allowed = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name)
        topics.append({"name": t.name, "partitions": [_producers(ctx, t.name, int(p), allowed)
                                                      for p in t.partition_indexes]})
    return ctx.response({"throttle_time": 0, "topics": topics})


def describe_producers_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": int(p), "error_code": code, "error_message": None,
                                         "active_producers": []} for p in t.partition_indexes]}
        for t in request.topics]})


# -- DescribeTransactions ---------------------------------------------------------------------------------


def _state(ctx: RequestContext, transactional_id: str, code: int, meta: Any = None) -> dict[str, Any]:
    if meta is None:  # the other fields keep their schema defaults, as Kafka's error entries do
        return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
                "transaction_timeout": 0, "transaction_start_time": _EPOCH, "producer_id": 0, "producer_epoch": 0,
                "topics": []}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    topics = [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()
              if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)]
    return {"error_code": 0, "transactional_id": transactional_id, "transaction_state": meta.state_name,
            "transaction_timeout": meta.timeout_ms,
            "transaction_start_time": _EPOCH + datetime.timedelta(milliseconds=meta.start_ms),
            "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch, "topics": topics}


async def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    transactions = ctx.broker.transactions
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(_state(ctx, transactional_id, int(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
        elif transactions is None:
            states.append(_state(ctx, transactional_id, int(Errors.COORDINATOR_NOT_AVAILABLE)))
        else:
            meta = transactions.coordinator.get(transactional_id)
            states.append(_state(ctx, transactional_id, int(Errors.TRANSACTIONAL_ID_NOT_FOUND))
                          if meta is None else _state(ctx, transactional_id, 0, meta))
    return ctx.response({"throttle_time": 0, "transaction_states": states})


def describe_transactions_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "transaction_states": [
        _state(ctx, transactional_id, code) for transactional_id in request.transactional_ids]})


# -- ListTransactions -------------------------------------------------------------------------------------


async def list_transactions(ctx: RequestContext, request: Any) -> Any:
    transactions = ctx.broker.transactions
    if transactions is None:
        return list_transactions_error(ctx, request, int(Errors.COORDINATOR_NOT_AVAILABLE))
    try:
        found, unknown = transactions.coordinator.list_transactions(
            request.state_filters, [int(p) for p in request.producer_id_filters],
            int(getattr(request, "duration_filter", -1)), getattr(request, "transactional_id_pattern", None))
    except ShareError as exc:
        return list_transactions_error(ctx, request, int(exc.error))
    rows = [{"transactional_id": m.transactional_id, "producer_id": m.producer_id, "transaction_state": m.state_name}
            for m in found if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)]
    return ctx.response({"throttle_time": 0, "error_code": 0, "unknown_state_filters": unknown,
                         "transaction_states": rows})


def list_transactions_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "unknown_state_filters": [], "transaction_states": []})


HANDLERS = (
    ApiHandler(61, "DescribeProducers", 0, 0, describe_producers, describe_producers_error),
    ApiHandler(65, "DescribeTransactions", 0, 0, describe_transactions, describe_transactions_error),
    ApiHandler(66, "ListTransactions", 0, 2, list_transactions, list_transactions_error),
)
