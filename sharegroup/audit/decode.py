"""Decoding a state log's segment files into audit rows, and judging the segments as a whole.

Both engines (Spark executors and the single-process replay) run `SegmentSplitter` over the bytes of one
segment file (framing and CRC checks; frames routed by share-partition key), `decode_chunks` over each
key's frames and `judge_segments` over what all splitters found, so framing is judged once, the way the
segment log's recovery judges it (persister/state_log_recovery.py): a bad frame in the last segment with nothing valid
after it is a torn tail (tolerated: recovery truncates it); any other bad frame is corruption, reported
with its file, byte position and log offset. Records are decoded with `persister.state_records.decode_record`,
so what the audit accepts is exactly what recovery accepts.

Unlike recovery, the audit does not stop at the first fault: a corrupt frame whose length field still
leads to a valid next frame is skipped (it keeps its log offset) and decoding goes on; otherwise the
rest of that segment is reported unreadable.
"""

from __future__ import annotations

import array
import dataclasses
import posixpath
from typing import Iterable, Iterator, NamedTuple

import msgpack

# The recovery rules of the segment log (torn tail or corruption; the start offset file's format; the
# segment file names) and of the record format (the key's shape check), public in persister so that the
# audit judges exactly as recovery does instead of keeping a second copy of the rules.
from persister.state_log_files import START_OFFSET_FILE, parse_segment_file_name, parse_start_offset, segment_file_name
from persister.state_log_recovery import valid_frames_follow
from persister.state_records import (
    FRAME_HEADER_BYTES,
    MAX_FRAME_BYTES,
    RecordDecodeError,
    check_encoded_key,
    check_frame,
    decode_record,
)

from .rules import Rule

__all__ = [
    "START_OFFSET_FILE",
    "SegmentFault",
    "SegmentScan",
    "SegmentSplitter",
    "KeyChunk",
    "decode_chunks",
    "SegmentJudgement",
    "judge_segments",
    "LogPlan",
    "plan_log",
    "live_segments",
    "parse_segment_name",
    "display_path",
    "parse_start_offset",
    "segment_file_name",
]

_BODY_MIN_BYTES = 3


def parse_segment_name(path: str) -> int | None:
    """The base offset of a segment file path or URI (`.../00000000000000004711.log`), else None."""
    return parse_segment_file_name(posixpath.basename(path.rstrip("/")))


def display_path(path: str) -> str:
    """A local `file:` URI as a plain path (what Spark lists), anything else unchanged."""
    if path.startswith("file:"):
        rest = path[len("file:") :]
        return "/" + rest.lstrip("/") if rest.startswith("/") else rest
    return path


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentFault:
    """A bad frame or record in one segment: its log offset, byte position, rule and why."""

    log_offset: int
    byte_pos: int
    rule: Rule
    reason: str


@dataclasses.dataclass(slots=True)
class SegmentScan:
    """What decoding one segment file found (small: it travels back from a Spark executor).

    `record_count` counts the frames read (a skipped corrupt frame keeps its offset); `count_exact` is
    False when a fault made the rest of the file unreadable, so the next segment's base offset cannot be
    checked. `tail` is a bad frame with nothing valid after it: a torn tail if this is the last segment.
    """

    path: str
    base_offset: int
    file_bytes: int = 0
    valid_bytes: int = 0
    record_count: int = 0
    records_routed: int = 0  # frames handed on for decoding (records at or above the log start offset)
    count_exact: bool = True
    faults: list = dataclasses.field(default_factory=list)
    tail: SegmentFault | None = None


class KeyChunk(NamedTuple):
    """Some frames of one key from one segment file, in file order: their log offsets and byte positions
    and the frames themselves concatenated (frames delimit themselves). Compact and cheap to pickle: this
    is what crosses the shuffle."""

    path: str
    offsets: array.array
    positions: array.array
    frames: bytes


def _route(view: memoryview, p: int, end: int) -> tuple:
    """The key of the well-framed record at p..end as a hashable tuple (group_id, topic bytes, partition),
    parsed as `decode_record` parses it; RecordDecodeError when it does not parse."""
    try:
        payload = msgpack.unpackb(view[p + FRAME_HEADER_BYTES + 2 : end], raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack's own errors, as decode_record wraps them
        raise RecordDecodeError(f"bad payload: {exc!r}") from None
    if type(payload) is not list or len(payload) != 2:
        raise RecordDecodeError("a payload is a 2-element array [key, value]")
    encoded_key = payload[0]
    check_encoded_key(encoded_key)
    return tuple(encoded_key)


class SegmentSplitter:
    """Splits the frames of one segment file's bytes by share-partition key, checking their framing.

    `chunks(max_records)` yields dicts {(group_id, topic bytes, partition): KeyChunk} of at most
    `max_records` frames in all, skipping records below `log_start_offset`; afterwards `scan` holds the
    segment's summary. One pass, O(bytes): per frame a CRC check and a parse of its key. The records
    themselves are decoded later, per key (`decode_chunks`).
    """

    def __init__(self, path: str, base_offset: int, content: bytes | bytearray | memoryview, log_start_offset: int):
        self.path = path
        self.base_offset = base_offset
        self._content = content
        self._log_start_offset = log_start_offset
        self.scan = SegmentScan(path, base_offset, file_bytes=len(content))

    def chunks(self, max_records: int = 65_536) -> Iterator[dict]:
        scan = self.scan
        path = self.path
        view = memoryview(self._content)
        n = len(view)
        p = 0
        offset = self.base_offset
        start = self._log_start_offset
        pending: dict = {}  # route key -> [offsets, positions, frames bytearray]
        in_chunk = 0
        while p < n:
            try:
                end = check_frame(view, p)
            except RecordDecodeError as exc:
                next_p = self._fault(view, p, offset, str(exc))
                if next_p is None:
                    break
                p = next_p
                offset += 1
                continue
            if offset >= start:
                try:
                    key = _route(view, p, end)
                except RecordDecodeError:
                    try:  # the reason exactly as recovery would give it
                        decode_record(view, p)
                        reason = "its key does not parse"
                    except RecordDecodeError as exc:
                        reason = str(exc)
                    scan.faults.append(SegmentFault(offset, p, Rule.RECORD, f"undecodable record: {reason}"))
                else:
                    entry = pending.get(key)
                    if entry is None:
                        entry = pending[key] = [array.array("q"), array.array("q"), bytearray()]
                    entry[0].append(offset)
                    entry[1].append(p)
                    entry[2] += view[p:end]
                    in_chunk += 1
                    if in_chunk >= max_records:
                        scan.records_routed += in_chunk
                        yield {k: KeyChunk(path, o, q, bytes(f)) for k, (o, q, f) in pending.items()}
                        pending, in_chunk = {}, 0
            p = end
            offset += 1
        scan.valid_bytes = p if scan.tail is None else scan.tail.byte_pos
        scan.record_count = offset - self.base_offset
        scan.records_routed += in_chunk
        if pending:
            yield {k: KeyChunk(path, o, q, bytes(f)) for k, (o, q, f) in pending.items()}

    def _fault(self, view: memoryview, p: int, offset: int, reason: str) -> int | None:
        """Record the framing fault at byte `p`; return where to go on, or None to stop."""
        scan = self.scan
        n = len(view)
        if not valid_frames_follow(bytes(view[p:])):
            # Nothing valid after it: a torn tail if this is the last segment (judge_segments decides).
            scan.tail = SegmentFault(offset, p, Rule.FRAME, reason)
            return None
        length = int.from_bytes(view[p : p + 4], "big")
        skip_to = p + FRAME_HEADER_BYTES + length
        if _BODY_MIN_BYTES <= length <= MAX_FRAME_BYTES and skip_to <= n and _frame_starts(view, skip_to):
            scan.faults.append(SegmentFault(offset, p, Rule.FRAME, reason))
            return skip_to
        scan.faults.append(
            SegmentFault(
                offset,
                p,
                Rule.FRAME,
                f"{reason}; the rest of the segment ({n - p} bytes) cannot be framed and is not audited",
            )
        )
        scan.count_exact = False
        return None


def decode_chunks(chunks: Iterable[KeyChunk]) -> tuple[list[tuple], list[tuple]]:
    """Decode one key's chunks into audit rows (log_offset, record), unsorted, with
    `persister.state_records.decode_record`; also return the records that do not decode as (log_offset,
    detail) pairs."""
    rows: list[tuple] = []
    faults: list[tuple] = []
    for path, offsets, positions, frames in chunks:
        view = memoryview(frames)
        p = 0
        for offset, position in zip(offsets, positions):
            try:
                _key, value, end = decode_record(view, p)
            except RecordDecodeError as exc:
                faults.append((offset, f"{path}: byte {position}: undecodable record: {exc}"))
                p += FRAME_HEADER_BYTES + int.from_bytes(view[p : p + 4], "big")  # the framing was checked
                continue
            rows.append((offset, value))
            p = end
        assert p == len(view), "a chunk holds whole frames"
    return rows, faults


def _frame_starts(view: memoryview, p: int) -> bool:
    """Whether a valid frame starts at `p` (or `p` is the end of the data)."""
    if p == len(view):
        return True
    try:
        check_frame(view, p)
    except RecordDecodeError:  # TornRecordError included
        return False
    return True


def live_segments(listed: list[tuple[int, str]], checkpointed_start: int | None) -> tuple[int, list[tuple[int, str]]]:
    """The log start offset and the live segments of a listing [(base_offset, path)], as recovery
    computes them: the start is the stored one (or the first segment's base, and never below it); a
    segment is live unless the next one starts at or below the start (an interrupted prune left it)."""
    listed = sorted(listed)
    if not listed:
        return (checkpointed_start or 0), []
    start = listed[0][0] if checkpointed_start is None else max(checkpointed_start, listed[0][0])
    first_live = 0
    while first_live + 1 < len(listed) and listed[first_live + 1][0] <= start:
        first_live += 1
    return start, listed[first_live:]


@dataclasses.dataclass(slots=True)
class SegmentJudgement:
    """The log-level verdict: start and end offsets, violations (log_offset, rule, detail) not tied to a
    key, and the torn tail tolerated, if any (path, byte position, bytes ignored)."""

    log_start_offset: int
    log_end_offset: int
    violations: list
    torn_tail: tuple | None


def judge_segments(
    live: list[tuple[int, str]],
    scans: dict[str, SegmentScan],
    log_start_offset: int,
    start_offset_error: str | None = None,
    start_offset_path: str | None = None,
) -> SegmentJudgement:
    """Judge the live segments (in offset order) from their scans, like SegmentLog recovery does."""
    violations: list = []
    if start_offset_error is not None:
        violations.append((None, Rule.SEGMENTS, f"{start_offset_path or START_OFFSET_FILE}: {start_offset_error}"))
    torn_tail = None
    expected: int | None = live[0][0] if live else log_start_offset
    for i, (base_offset, path) in enumerate(live):
        scan = scans[path]
        is_last = i == len(live) - 1
        if expected is not None and base_offset != expected:
            violations.append(
                (
                    expected,
                    Rule.SEGMENTS,
                    f"{path}: segment base offset {base_offset} does not follow the previous segment's end {expected}",
                )
            )
        for fault in scan.faults:
            violations.append((fault.log_offset, fault.rule, f"{path}: byte {fault.byte_pos}: {fault.reason}"))
        if scan.tail is not None:
            if is_last:
                torn_tail = (path, scan.tail.byte_pos, scan.file_bytes - scan.tail.byte_pos)
            else:
                violations.append(
                    (
                        scan.tail.log_offset,
                        Rule.FRAME,
                        f"{path}: byte {scan.tail.byte_pos}: {scan.tail.reason} (not the last segment, so not "
                        "a torn tail)",
                    )
                )
        # After a fault that hides how many records the segment held (a resynchronisation, or a torn
        # frame that is not at the log's end), the next segment's base offset cannot be checked.
        exact = scan.count_exact and (scan.tail is None or is_last)
        expected = base_offset + scan.record_count if exact else None
    end = expected if expected is not None else (live[-1][0] + scans[live[-1][1]].record_count if live else 0)
    if live and log_start_offset > end:
        violations.append(
            (log_start_offset, Rule.SEGMENTS, f"the log start offset {log_start_offset} is beyond the log end {end}")
        )
    return SegmentJudgement(log_start_offset, end, violations, torn_tail)


class LogPlan(NamedTuple):
    """Which segments an audit reads: the log start offset, the live segments [(base, path)] in offset
    order, and the fault of an unreadable start offset file (recovery refuses such a log; the audit
    reports it and starts at the first segment)."""

    log_start_offset: int
    live: list
    start_offset_error: str | None


def plan_log(listed: list[tuple[int, str]], start_file_content: bytes | None) -> LogPlan:
    """Plan an audit from a directory listing [(base_offset, path)] of segment files and the content of
    the `log-start-offset` file (None when there is none)."""
    checkpointed = None
    error = None
    if start_file_content is not None:
        try:
            checkpointed = parse_start_offset(start_file_content)
        except ValueError as exc:
            error = str(exc)
    start, live = live_segments(listed, checkpointed)
    return LogPlan(start, live, error)
