"""The record format of share-group dead-letter queues (KIP-1191), as Kafka 4.4 writes it, and the reading of
source records for `errors.deadletterqueue.copy.record.enable`.

One DLQ record per source offset: key and value null (or the original's when copying), the original
headers first when copying, then six text headers: `__dlq.errors.topic`, `.partition`, `.offset`, `.group`,
`.delivery.count` and `.message` (Kafka's two cause texts). Records are encoded in uncompressed RecordBatch
v2 batches without a producer id, timestamped with the write time; a batch is cut before it would exceed
the DLQ topic's `max.message.bytes`.

Source records are read from the broker's own log: uncompressed and gzip batches are decoded (the only
codecs the standard library has); a record that cannot be had (deleted by retention, in a batch of
another codec, unparseable) is written with the DLQ headers only, as Kafka does when the original is no
longer available.
"""

from __future__ import annotations

import logging
import struct
import uuid
import zlib
from typing import Iterable, NamedTuple, Sequence

from ..errors import ShareError
from ..manager.dead_letters import DeadLetterBatch
from ..topics.record_batch import HEADER_BYTES, SimpleRecord, _read_varint, build_record_batch, parse_header
from ..topics.topic_store import TopicStore

__all__ = ["DLQ_HEADER_NAMES", "SourceRecord", "dead_letter_records", "encode_batches", "read_source_records"]

log = logging.getLogger("sharegroup.server.dead_letter")

DLQ_HEADER_NAMES = ("__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset", "__dlq.errors.group",
                    "__dlq.errors.delivery.count", "__dlq.errors.message")
READ_BYTES = 1 << 20  # source reads of 1 MiB, as Kafka's fetcher
_GZIP = 1
_CONTROL_BIT = 0x20
# A record's bytes beyond its key, value and headers: length, attributes, timestamp and offset deltas and
# the counts (varints, at most 5 or 10 bytes each): an upper bound used to cut batches.
_RECORD_OVERHEAD_BYTES = 32
_HEADER_OVERHEAD_BYTES = 10


class SourceRecord(NamedTuple):
    """What copying takes from a source record."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def dead_letter_records(batch: DeadLetterBatch, topic_name: str,
                        sources: dict[int, SourceRecord] | None = None) -> list[SimpleRecord]:
    """One DLQ record per offset of `batch`: the copied original (when in `sources`) then the six headers."""
    out: list[SimpleRecord] = []
    fixed = ((DLQ_HEADER_NAMES[0], topic_name.encode()), (DLQ_HEADER_NAMES[1], str(batch.partition).encode()))
    tail = ((DLQ_HEADER_NAMES[3], batch.group_id.encode()),
            (DLQ_HEADER_NAMES[4], str(batch.delivery_count).encode()),
            (DLQ_HEADER_NAMES[5], batch.cause.value.encode()))
    for offset in range(batch.first_offset, batch.last_offset + 1):
        headers = (*fixed, (DLQ_HEADER_NAMES[2], str(offset).encode()), *tail)
        source = sources.get(offset) if sources else None
        if source is None:
            out.append(SimpleRecord(None, None, headers))
        else:
            out.append(SimpleRecord(source.key, source.value, (*source.headers, *headers)))
    return out


def _size(record: SimpleRecord) -> int:
    size = _RECORD_OVERHEAD_BYTES + len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += _HEADER_OVERHEAD_BYTES + len(name) + len(value or b"")
    return size


def encode_batches(records: Sequence[SimpleRecord], timestamp_ms: int, max_message_bytes: int) -> list[bytes]:
    """`records` as RecordBatch v2 batches stamped `timestamp_ms`, each cut before its (bounded-above) size
    passes `max_message_bytes`; a record too large on its own gets a batch of its own (the append refuses
    it with RECORD_TOO_LARGE)."""
    out: list[bytes] = []
    chunk: list[SimpleRecord] = []
    size = HEADER_BYTES
    for record in records:
        n = _size(record)
        if chunk and size + n > max_message_bytes:
            out.append(build_record_batch(chunk, base_timestamp_ms=timestamp_ms))
            chunk, size = [], HEADER_BYTES
        chunk.append(record)
        size += n
    if chunk:
        out.append(build_record_batch(chunk, base_timestamp_ms=timestamp_ms))
    return out


def read_source_records(store: TopicStore, topic_id: uuid.UUID, partition: int, first: int,
                        last: int) -> dict[int, SourceRecord]:
    """The records of [first, last] still in the source log that can be decoded, by offset (a read error
    or a missing log gives none: the DLQ records then carry headers only)."""
    out: dict[int, SourceRecord] = {}
    offset = first
    try:
        offset = max(offset, store.log_start_offset(topic_id, partition))
        end = store.log_end_offset(topic_id, partition)
        while offset <= last and offset < end:
            read = store.read(topic_id, partition, offset, READ_BYTES)
            if not read.batches:
                break
            for batch in read.batches:
                if batch.is_control or batch.last_offset < offset:
                    continue
                for rec_offset, record in _decode_batch(bytes(batch.records)):
                    if offset <= rec_offset <= last:
                        out[rec_offset] = record
            offset = max(offset, read.batches[-1].last_offset + 1)
    except (ShareError, OSError) as exc:
        log.warning("dead-letter copy: source %s-%d offsets %d-%d unreadable, headers only: %s", topic_id,
                    partition, first, last, exc)
    return out


def _decode_batch(data: bytes) -> Iterable[tuple[int, SourceRecord]]:
    """(offset, record) of every record of one RecordBatch v2; nothing for an unparseable batch or a codec
    other than none and gzip."""
    try:
        header = parse_header(data)
        if header.magic != 2 or header.attributes & _CONTROL_BIT:
            return []
        body = data[HEADER_BYTES:header.size_bytes]
        codec = header.compression
        if codec == _GZIP:
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif codec != 0:
            return []
        return _decode_records(body, header.base_offset, header.record_count)
    except (ValueError, IndexError, zlib.error, struct.error):
        return []


def _decode_records(body: bytes, base_offset: int, count: int) -> list[tuple[int, SourceRecord]]:
    out = []
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        _timestamp_delta, pos = _read_varint(body, pos)
        offset_delta, pos = _read_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        n_headers, pos = _read_varint(body, pos)
        headers = []
        for _h in range(n_headers):
            name, pos = _read_bytes(body, pos)
            hvalue, pos = _read_bytes(body, pos)
            headers.append(((name or b"").decode("utf-8", "replace"), hvalue))
        if pos != end:
            raise ValueError("record length does not match its fields")
        out.append((base_offset + offset_delta, SourceRecord(key, value, tuple(headers))))
    return out


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("field past the record")
    return buf[pos:pos + n], pos + n
