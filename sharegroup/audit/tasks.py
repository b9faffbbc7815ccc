"""The audit's steps as plain functions over plain data, run by Spark's Python workers and, in the same
order, by the single-process replay (no pyspark import here).

Map side, `split_partition`: for every segment file of a partition (path + bytes, as Spark's
`binaryFile` source reads them) check the framing of every frame and route it by its share-partition
key, emitting one (key, KeyChunk) pair per key per chunk of at most CHUNK_RECORDS frames, so the
shuffle moves concatenated raw frames (about the log's own size), then one (None, SegmentScan) pair per
file. Reduce side, `audit_group`: decode a key's frames, sort them by log offset and replay them with
the shared KeyAuditor; the None group passes the scans through.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Iterator

import crc32c

from persister.state_records import StateKey

from .decode import KeyChunk, SegmentSplitter, decode_chunks, display_path, parse_segment_name
from .rules import AuditOptions, KeyResult, Rule, audit_key

__all__ = ["split_partition", "audit_chunks", "audit_group", "partition_of", "CHUNK_RECORDS"]

CHUNK_RECORDS = 65_536  # frames a map task holds before handing them to the shuffle


def split_partition(files: Iterable, log_start_offset: int, chunk_records: int = CHUNK_RECORDS) -> Iterator[tuple]:
    """Split the segment files of one partition: `files` yields (path, content) pairs or Spark Rows."""
    for path, content in files:
        base_offset = parse_segment_name(path)
        if base_offset is None:  # the driver lists segment files only; be safe anyway
            continue
        splitter = SegmentSplitter(display_path(path), base_offset, content, log_start_offset)
        for chunk in splitter.chunks(chunk_records):
            yield from chunk.items()
        yield None, splitter.scan


def partition_of(route_key) -> int:
    """A stable hash of a route key (group_id, topic bytes, partition) for the shuffle (Python's own str
    hash differs between processes)."""
    if route_key is None:
        return 0
    group_id, topic_bytes, partition = route_key
    return crc32c.crc32c(b"%s\0%s\0%d" % (group_id.encode("utf-8", "surrogatepass"), topic_bytes, partition))


def audit_chunks(
    route_key: tuple, chunks: Iterable[KeyChunk], options: AuditOptions, log_start_offset: int
) -> KeyResult:
    """Decode one key's frames and audit them; undecodable records become RECORD violations of the key."""
    group_id, topic_bytes, partition = route_key
    key = StateKey(group_id, uuid.UUID(bytes=topic_bytes), partition)
    rows, faults = decode_chunks(chunks)
    result = audit_key(key, rows, options, log_start_offset)
    if faults:
        result.violations.extend((offset, Rule.RECORD, detail) for offset, detail in faults)
        result.violations.sort(key=_violation_offset)
    return result


def _violation_offset(violation: tuple) -> int:
    return violation[0]


def audit_group(item: tuple, options: AuditOptions, log_start_offset: int) -> tuple:
    """Audit one shuffled group: ('key', KeyResult) for a key, ('scans', [SegmentScan]) for None."""
    route_key, chunks = item
    if route_key is None:
        return "scans", list(chunks)
    return "key", audit_chunks(route_key, chunks, options, log_start_offset)
