"""ListOffsets (key 2), versions 1-9: offsets by time, for consumers resetting and for `list_offsets`.

Per partition, by Kafka's special timestamps:
- -1 (LATEST): the high watermark, or the last stable offset with `isolation_level` 1 (read_committed);
- -2 (EARLIEST) and -4 (EARLIEST_LOCAL, v8+; no tiered storage here): the log start offset;
- -3 (MAX_TIMESTAMP, v7+): the largest timestamp, from the first batch that has it, and the offset of
  that batch's first record carrying it (a compressed batch: its base offset; never below the log
  start); -1/-1 for an empty log;
- -5 (LATEST_TIERED, v9+): nothing is ever tiered: offset -1;
- a timestamp >= 0: the first record at or after it (from the log start on) and that record's own
  timestamp, found in the first batch whose max timestamp reaches it; offset -1 (and timestamp -1) when
  no record is that recent. As Kafka, this walks the records of an uncompressed batch (see
  `record_batch.record_timestamps`); a compressed batch (or one whose records do not parse) answers for
  itself as a whole, its base offset and max timestamp, because the broker never decompresses records,
  so a time inside such a batch lands on its first record (Kafka decompresses it and finds the record).
- with read_committed, a time or MAX_TIMESTAMP look-up that lands at or past the last stable offset
  finds nothing (-1/-1), as Kafka answers only offsets a read_committed consumer could fetch.
Special timestamps answer timestamp -1, as Kafka does. Leader epoch is 0 (one node, never re-elected),
or -1 when no offset is found (offset -1), as Kafka leaves it.
Errors per partition: TOPIC_AUTHORIZATION_FAILED without DESCRIBE on the topic (checked first, so
existence is not revealed); INVALID_REQUEST for each copy of a partition named twice;
UNKNOWN_TOPIC_OR_PARTITION; a `current_leader_epoch` (v4+; -1: unknown) above the leader's 0 is
UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH; a special timestamp the version does not know is
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import AclOperation, ResourceType
from ...topics.record_batch import record_timestamps

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1
LEADER_EPOCH = 0  # this node leads every partition from the start, never re-elected
_MAX_TS = struct.Struct(">q")
_MAX_TS_AT = 35  # a v2 batch header: ... firstTimestamp (int64) at 27, maxTimestamp (int64) at 35
_SCAN_BYTES = 1 << 20
_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _batch_max_timestamp(batch: Any) -> int:
    return _MAX_TS.unpack_from(bytes(batch.records[:_MAX_TS_AT + 8]), _MAX_TS_AT)[0]


def _first_record_at_or_after(batch: Any, timestamp: int, start: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the batch's first record at or after `timestamp` and at or after offset
    `start`; None when it has none. A batch whose records are not read (compressed, malformed) answers
    its max timestamp and base offset (never below `start`)."""
    records = record_timestamps(batch.records)
    if records is None:
        return _batch_max_timestamp(batch), max(batch.base_offset, start)
    for delta, record_ts in records:
        if record_ts >= timestamp and batch.base_offset + delta >= start:
            return record_ts, batch.base_offset + delta
    return None


def _by_timestamp(store: Any, topic_id: Any, partition: int, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) of the first record at or after `timestamp`, or (-1, end) when none is. The
    store finds the first batch whose max timestamp reaches it; when none of its records from the log
    start on does (a max timestamp that lies, a log start inside the batch) the next such batch is read."""
    start = store.log_start_offset(topic_id, partition)
    end = store.log_end_offset(topic_id, partition)
    offset = store.offset_for(topic_id, partition, timestamp)
    while offset < end:
        read = store.read(topic_id, partition, offset, 1)  # one batch
        if not read.batches:
            break
        batch = read.batches[0]
        if _batch_max_timestamp(batch) >= timestamp:
            found = _first_record_at_or_after(batch, timestamp, start)
            if found is not None:
                return found
        offset = batch.last_offset + 1
    return -1, end


def _max_timestamp(store: Any, topic_id: Any, partition: int) -> tuple[int, int]:
    """(max timestamp, offset) over the whole log, by reading it through once: the first batch with the
    largest max timestamp, and in it the first record carrying that timestamp (the batch's base offset
    when its records are not read or none carries it); never below the log start."""
    best_ts, best = -1, None
    start = offset = store.log_start_offset(topic_id, partition)
    end = store.log_end_offset(topic_id, partition)
    while offset < end:
        read = store.read(topic_id, partition, offset, _SCAN_BYTES)
        if not read.batches:
            break
        for batch in read.batches:
            ts = _batch_max_timestamp(batch)
            if ts > best_ts:
                best_ts, best = ts, batch
        offset = read.batches[-1].last_offset + 1
    if best is None:
        return -1, -1
    records = record_timestamps(best.records) or ()
    found = next((best.base_offset + delta for delta, ts in records if ts == best_ts), best.base_offset)
    return best_ts, max(found, start)


def _lookup(ctx: RequestContext, info: Any, partition: int, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) of one partition's answer."""
    store = ctx.broker.store
    topic_id = info.topic_id
    if timestamp == LATEST:
        end = store.last_stable_offset(topic_id, partition) if read_committed else store.log_end_offset(topic_id, partition)
        return -1, end
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, store.log_start_offset(topic_id, partition)
    if timestamp == LATEST_TIERED:
        return -1, -1
    fetchable = store.last_stable_offset(topic_id, partition) if read_committed else store.log_end_offset(topic_id, partition)
    if timestamp == MAX_TIMESTAMP:
        found_ts, offset = _max_timestamp(store, topic_id, partition)
        return (found_ts, offset) if offset < fetchable else (-1, -1)
    found_ts, offset = _by_timestamp(store, topic_id, partition, timestamp)
    return (found_ts, offset) if offset < fetchable else (-1, -1)


def _partition(index: int, code: int, timestamp: int = -1, offset: int = -1, leader_epoch: int = -1) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": timestamp, "offset": offset,
            "leader_epoch": leader_epoch, "old_style_offsets": None}


async def handle(ctx: RequestContext, request: Any) -> Any:
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    store = ctx.broker.store
    topics = []
    allowed = {name: ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
               for name in {t.name for t in request.topics}}
    named = Counter((t.name, int(p.partition_index)) for t in request.topics for p in t.partitions)
    duplicates = {key for key, count in named.items() if count > 1}
    for topic in request.topics:
        info = store.topic_by_name(topic.name)
        partitions = []
        for p in topic.partitions:
            index, timestamp = int(p.partition_index), int(p.timestamp)
            if not allowed[topic.name]:
                partitions.append(_partition(index, ErrorCode.topic_authorization_failed))
                continue
            if (topic.name, index) in duplicates:
                partitions.append(_partition(index, ErrorCode.invalid_request))
                continue
            if info is None or not store.has_partition(info.topic_id, index):
                partitions.append(_partition(index, ErrorCode.unknown_topic_or_partition))
                continue
            current_epoch = int(getattr(p, "current_leader_epoch", -1))
            if current_epoch != -1 and current_epoch != LEADER_EPOCH:
                partitions.append(_partition(index, ErrorCode.unknown_leader_epoch if current_epoch > LEADER_EPOCH
                                             else ErrorCode.fenced_leader_epoch))
                continue
            if timestamp < 0 and (timestamp < LATEST_TIERED or ctx.api_version < _MIN_VERSION.get(timestamp, 0)):
                partitions.append(_partition(index, ErrorCode.unsupported_version))
                continue
            try:
                found_ts, offset = _lookup(ctx, info, index, timestamp, read_committed)
            except ShareError as exc:
                partitions.append(_partition(index, int(exc.error)))
                continue
            partitions.append(_partition(index, ErrorCode.none, found_ts, offset, LEADER_EPOCH if offset >= 0 else -1))
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.response({"throttle_time": 0, "topics": topics})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_partition(int(p.partition_index), code) for p in t.partitions]}
        for t in request.topics]})


HANDLERS = (ApiHandler(2, "ListOffsets", 1, 9, handle, error_response),)
