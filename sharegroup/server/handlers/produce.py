"""Produce (key 0), versions 3-12: record batches handed to the topic store as the producer's bytes.

Per partition (Kafka's rules):
- acks must be 0, 1 or -1 (else every partition that exists: INVALID_REQUIRED_ACKS; the others
  UNKNOWN_TOPIC_OR_PARTITION);
- a topic that does not exist (an illegal name included) is UNKNOWN_TOPIC_OR_PARTITION, as is a partition
  index out of range. A Produce never creates a topic, whatever `auto.create.topics.enable` says: Kafka
  creates topics only through Metadata (a client asks Metadata, allowing auto-creation, before producing);
- a ZSTD batch below v7 is UNSUPPORTED_COMPRESSION_TYPE (checked before the acks, as Kafka does);
- the store validates the batches (CRC, magic, lengths: CORRUPT_MESSAGE; above the topic's
  `max.message.bytes`: MESSAGE_TOO_LARGE; a CreateTime record timestamp outside the topic's
  `message.timestamp.before.max.ms` / `.after.max.ms` around the broker's clock: INVALID_TIMESTAMP),
  checks producer sequences and assigns offsets; its `ShareError` becomes that partition's error, and
  nothing of it is appended (an epoch or sequence fault answers the log start offset, as Kafka does, so
  the producer can tell its state was lost). A refusal naming records (INVALID_TIMESTAMP) answers as
  Kafka's does: the error message "One or more records have been rejected due to invalid timestamp", one
  `record_errors` entry (batch index, message) per offending record (both v8+), and the log start offset.
Authorization (Kafka's order): batches marked transactional need WRITE on the request's transactional id
(none given: the same refusal), else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then
WRITE on each topic, checked before existence (TOPIC_AUTHORIZATION_FAILED per partition, which beats
UNKNOWN_TOPIC_OR_PARTITION and INVALID_REQUIRED_ACKS).
With acks=0 no response is sent; when a partition fails (an unknown topic too), the connection is closed
instead (Kafka's way of telling a producer that reads no answers). A Produce is handled in two parts:
`start` checks it and begins every partition's append in request order (placed and queued for the disk,
nothing awaited in between unless the log is over its queue bound), then its answer waits for the disk.
The connection begins its next Produce while this one's fsync is in flight and answers in request order
(`connection.py`), so one producer's batches reach each partition in the order it sent them, and every
acknowledged batch is durable before its answer.
"""

from __future__ import annotations

import datetime
from typing import Any, Awaitable

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, CloseConnection, Later, Ready, RequestContext
from ..authorization import AclOperation, ResourceType
from ...topics.record_batch import RecordValidationError
from ...topics.topic_store import AppendWait

VALID_ACKS = (0, 1, -1)
_ATTRIBUTES_AT = 21  # a v2 batch header: baseOffset 8, length 4, leader epoch 4, magic 1, crc 4, then attributes
_TRANSACTIONAL_BIT = 0x10
_PRODUCER_AT = 43  # then lastOffsetDelta 4, baseTimestamp 8, maxTimestamp 8: producerId 8, producerEpoch 2
_COMPRESSION_MASK, _ZSTD, _ZSTD_SINCE_VERSION = 0x07, 4, 7
# Refusals Kafka answers with the partition's log start offset (a producer's epoch or sequence fault).
_WITH_LOG_START = frozenset({ErrorCode.out_of_order_sequence_number, ErrorCode.invalid_producer_epoch,
                             ErrorCode.duplicate_sequence_number, ErrorCode.unknown_producer_id})


def _has_transactional_batches(records: bytes | None) -> bool:
    """Whether any batch of a partition's records is marked transactional (walks the batch lengths)."""
    if not records:
        return False
    view = memoryview(records)
    position = 0
    while position + _ATTRIBUTES_AT + 2 <= len(view):
        if int.from_bytes(view[position + _ATTRIBUTES_AT:position + _ATTRIBUTES_AT + 2], "big") & _TRANSACTIONAL_BIT:
            return True
        batch_length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        if batch_length <= 0:
            break
        position += 12 + batch_length
    return False


def _transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of the first transactional batch of a partition's records, or None."""
    if not records:
        return None
    view = memoryview(records)
    position = 0
    while position + _PRODUCER_AT + 10 <= len(view):
        if int.from_bytes(view[position + _ATTRIBUTES_AT:position + _ATTRIBUTES_AT + 2], "big") & _TRANSACTIONAL_BIT:
            at = position + _PRODUCER_AT
            return (int.from_bytes(view[at:at + 8], "big", signed=True),
                    int.from_bytes(view[at + 8:at + 10], "big", signed=True))
        batch_length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        if batch_length <= 0:
            break
        position += 12 + batch_length
    return None


def _zstd_before_v7(records: bytes | None, version: int) -> bool:
    """Whether a Produce below v7 carries a v2 batch compressed with ZSTD, which came with v7 (Kafka
    checks the request's first batch so, before the acks and the log's own checks)."""
    if version >= _ZSTD_SINCE_VERSION or not records or len(records) < _ATTRIBUTES_AT + 2 or records[16] != 2:
        return False
    return records[_ATTRIBUTES_AT + 1] & _COMPRESSION_MASK == _ZSTD


def _partition(index: int, code: int, message: str | None = None, base_offset: int = -1,
               log_append_time_ms: int = -1, log_start_offset: int = -1) -> dict[str, Any]:
    append_time = (
        None if log_append_time_ms < 0
        else datetime.datetime.fromtimestamp(log_append_time_ms / 1000, tz=datetime.timezone.utc)
    )
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time": append_time,
        "log_start_offset": log_start_offset,
        "record_errors": [],
        "error_message": message,
    }


async def _begin_one(ctx: RequestContext, topic: Any, index: int, records: bytes | None, acks: int,
                     transactional_id: str | None = None) -> dict[str, Any] | tuple[Any, int, AppendWait]:
    """Begin one partition's append: its answer when it is refused at once, else what to await."""
    broker = ctx.broker
    if not 0 <= index < topic.num_partitions:
        return _partition(index, ErrorCode.unknown_topic_or_partition,
                          f"This server does not host this topic-partition: {topic.name}-{index}")
    if _zstd_before_v7(records, ctx.api_version):
        return _partition(index, ErrorCode.unsupported_compression_type,
                          f"ZSTD compression needs Produce v{_ZSTD_SINCE_VERSION} or later")
    producer = _transactional_producer(records) if transactional_id is not None else None
    if producer is not None and broker.transactions is not None:  # KIP-890: only into the ongoing transaction
        refused = broker.transactions.verify_produce(transactional_id or "", *producer, topic.name, index,
                                                     ctx.api_version)
        if refused:
            message = None
            if refused in (ErrorCode.invalid_txn_state, ErrorCode.transaction_abortable):
                message = (f"{topic.name}-{index} is not part of an ongoing transaction of producer {producer[0]} "
                           f"epoch {producer[1]}")
            log_start = broker.store.log_start_offset(topic.topic_id, index) if refused in _WITH_LOG_START else -1
            return _partition(index, int(refused), message, log_start_offset=log_start)
    try:
        wait = await broker.store.begin_append(topic.topic_id, index, records, acks=acks)  # null records: INVALID_RECORD
    except ShareError as exc:
        return _refused(ctx, topic, index, exc)
    return topic, index, wait


async def _answer_one(ctx: RequestContext, topic: Any, index: int, wait: AppendWait) -> dict[str, Any]:
    """One partition's answer once its append is durable (or refused by the disk)."""
    try:
        result = await wait
    except ShareError as exc:
        return _refused(ctx, topic, index, exc)
    return _partition(index, ErrorCode.none, None, result.base_offset, result.log_append_time_ms, result.log_start_offset)


def _refused(ctx: RequestContext, topic: Any, index: int, exc: ShareError) -> dict[str, Any]:
    log_start = -1
    record_errors = exc.record_errors if isinstance(exc, RecordValidationError) else None
    if int(exc.error) in _WITH_LOG_START or record_errors is not None:
        log_start = ctx.broker.store.log_start_offset(topic.topic_id, index)
    response = _partition(index, int(exc.error), exc.message or None, log_start_offset=log_start)
    response["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors or ()]
    return response


async def start(ctx: RequestContext, request: Any) -> Awaitable[Any]:
    """The ordered part of a Produce: every check, and every partition's append begun (placed and queued
    for the disk, in request order); returns the awaitable of the response, which waits for the disk.
    The connection may start its next Produce meanwhile (see `connection.py`)."""
    acks = int(request.acks)
    transactional_id = getattr(request, "transactional_id", None)
    if any(_has_transactional_batches(p.records) for t in request.topic_data for p in t.partition_data) and (
            transactional_id is None
            or not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)):
        return Ready(error_response(ctx, request, ErrorCode.transactional_id_authorization_failed))
    allowed = {name: ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, name)
               for name in {t.name for t in request.topic_data}}
    begun: list[tuple[str, list[Any]]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        parts: list[Any] = []
        if not allowed[name]:
            parts = [_partition(p.index, ErrorCode.topic_authorization_failed) for p in topic_data.partition_data]
        elif acks not in VALID_ACKS:  # only partitions that exist learn of the bad acks (Kafka's order)
            known = ctx.broker.topics.by_name(name)
            parts = [_partition(p.index, ErrorCode.unknown_topic_or_partition
                                if known is None or not 0 <= p.index < known.num_partitions
                                else ErrorCode.unsupported_compression_type
                                if _zstd_before_v7(p.records, ctx.api_version)
                                else ErrorCode.invalid_required_acks)
                     for p in topic_data.partition_data]
        else:
            topic = ctx.broker.topics.by_name(name)
            for p in topic_data.partition_data:
                if topic is None:
                    parts.append(_partition(p.index, ErrorCode.unknown_topic_or_partition, f"Unknown topic {name}"))
                else:
                    parts.append(await _begin_one(ctx, topic, p.index, p.records, acks, transactional_id))
        begun.append((name, parts))
    if acks == 0:  # nothing waits for the disk: a failure closes the connection before the next request
        return Ready(await _finish(ctx, acks, begun))
    return Later(_finish, ctx, acks, begun)


async def _finish(ctx: RequestContext, acks: int, begun: list[tuple[str, list[Any]]]) -> Any:
    responses = [{"name": name, "partition_responses": [p if isinstance(p, dict) else await _answer_one(ctx, *p)
                                                        for p in parts]}
                 for name, parts in begun]
    if acks == 0:
        if any(p["error_code"] for t in responses for p in t["partition_responses"]):
            raise CloseConnection("a Produce with acks=0 failed: closing, as Kafka does, so the client notices")
        return None
    return ctx.response({"responses": responses, "throttle_time": 0})


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await (await start(ctx, request))


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    if int(request.acks) == 0:
        return None
    responses = [
        {"name": t.name, "partition_responses": [_partition(p.index, code) for p in t.partition_data]}
        for t in request.topic_data
    ]
    return ctx.response({"responses": responses, "throttle_time": 0})


HANDLERS = (ApiHandler(0, "Produce", 3, 12, handle, error_response, start),)
