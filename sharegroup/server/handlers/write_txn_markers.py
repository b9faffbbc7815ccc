"""WriteTxnMarkers (key 27) v1: a COMMIT or ABORT marker written straight to partitions, as Kafka's
transaction coordinator sends it to partition leaders and as Admin `abortTransaction` (KIP-664,
`kafka-transactions.sh abort`) uses it to close a hanging transaction.

- ALTER on the CLUSTER, else CLUSTER_ACTION on it (Kafka's order); without either every partition of
  the request answers CLUSTER_AUTHORIZATION_FAILED.
- Per partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a marker epoch older than
  the producer's current epoch in that partition is INVALID_PRODUCER_EPOCH; otherwise the control batch
  is appended (durable before the answer) and ends the producer's open transaction there, which moves
  the last stable offset. A marker for a producer with no open transaction is appended too and changes
  nothing else (Kafka's rule, so a marker sent again is harmless); a storage fault is KAFKA_STORAGE_ERROR.
- Only v1: v0 was removed in Kafka 4.0, and v2 carries a transaction version 2 that serve does not run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...errors import Errors, ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType


async def _write(ctx: RequestContext, marker: Any, name: str, partition: int) -> int:
    store = ctx.broker.store
    info = store.topic_by_name(name)
    if info is None or not 0 <= partition < info.num_partitions:
        return int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        await store.write_transaction_marker(info.topic_id, partition, int(marker.producer_id),
                                             int(marker.producer_epoch), commit=bool(marker.transaction_result),
                                             coordinator_epoch=int(marker.coordinator_epoch))
    except ShareError as exc:
        return int(exc.error)
    return 0


async def write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    if not (ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
            or ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)):
        return write_txn_markers_error(ctx, request, int(Errors.CLUSTER_AUTHORIZATION_FAILED))
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            codes = await asyncio.gather(*(_write(ctx, marker, topic.name, int(p)) for p in topic.partition_indexes))
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": int(p), "error_code": code} for p, code in zip(topic.partition_indexes, codes)]})
        markers.append({"producer_id": int(marker.producer_id), "topics": topics})
    return ctx.response({"markers": markers})


def write_txn_markers_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"markers": [
        {"producer_id": int(m.producer_id), "topics": [
            {"name": t.name, "partitions": [{"partition_index": int(p), "error_code": code}
                                            for p in t.partition_indexes]} for t in m.topics]}
        for m in request.markers]})


HANDLERS = (ApiHandler(27, "WriteTxnMarkers", 1, 1, write_txn_markers, write_txn_markers_error),)
