"""Recovery of a state log directory: the scan that judges every frame, `read_log`, and opening.

Recovery on open scans every live segment from the log start and checks each frame's length and CRC.
A bad frame in the last segment with nothing valid after it is a torn tail (a crash during an append
that was never acknowledged): it is truncated. Any other bad frame (in an earlier segment, or followed
by valid frames) raises CorruptLogError naming the file and the record's offset, and nothing is
truncated or deleted. Segments are written in order and the previous one is fsync'd before a new one
gets bytes, so after a crash only the last segment can end torn. (A flipped bit in the very last record
of the log cannot be told from a torn write; it is truncated like one, with a warning naming the file.)
A `failed-write` file (left by a failed group commit that could not be cut back, see
persister.state_log_writer) says where the acknowledged records end: what lies after it is ignored by
the scan and cut by the open, so a refused record never reappears.

Frames are scanned and decoded in bulk by the frame codec (`persister.frame_codec`: the Cython twin
unless SHAREGROUP_PUREPYTHON=1), a chunk of the file at a time. `valid_frames_follow` is the one rule
that tells a torn tail from corruption; the audit judges segments with it too.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Iterator, NamedTuple

from . import state_log_files
from .frame_codec import frame_codec
from .frame_rows import KeyTable
from .state_log_api import CorruptLogError, LogEntry
from .state_log_files import FAILED_WRITE_FILE, START_OFFSET_FILE, FileHandles, SegmentInfo, segment_file_name
from .state_records import FRAME_HEADER_BYTES, RecordDecodeError, TornRecordError, check_frame, decode_record

__all__ = ["read_log", "valid_frames_follow", "recover_dir", "open_and_recover", "read_entries", "read_rows"]

_logger = logging.getLogger("persister.log")  # one logger for the whole state log

_READ_CHUNK_BYTES = 4 * 2**20
# Decoding reads smaller chunks: a chunk's rows live until it has been replayed, and the fewer
# containers live at once, the less work the cyclic garbage collector does while recovery allocates.
_DECODE_CHUNK_BYTES = 256 * 2**10


class _BadFrame(Exception):
    """Raised by `_walk_frames` at the first frame that is not valid: its file position and why."""

    def __init__(self, file_pos: int, cause: RecordDecodeError) -> None:
        super().__init__(file_pos, cause)
        self.file_pos = file_pos
        self.cause = cause


def _walk_frames(f, limit: int, parse=check_frame, skip: int = 0) -> Iterator[tuple[int, object]]:
    """Parse the frames in the first `limit` bytes of the open file `f`, reading in chunks, and yield
    (file position, what `parse(buffer, start)` returned) for each. `parse` is `check_frame` (framing
    only; returns the frame's end) or `decode_record` (returns (key, value, end)); the first `skip`
    frames get `check_frame` whatever `parse` is. Raise _BadFrame at the first frame that does not
    parse (a frame cut off by `limit` or by the end of the file raises with a TornRecordError cause)."""
    buf = b""
    buf_file_pos = 0  # file position of buf[0]
    read_pos = 0
    seen = 0
    decode = parse is not check_frame
    while True:
        view = memoryview(buf)
        n = len(buf)
        p = 0
        need = 0
        while p < n:
            try:
                if seen < skip:
                    result = e = check_frame(view, p)
                elif decode:
                    result = parse(view, p)
                    e = result[-1]
                else:
                    result = e = check_frame(view, p)
            except TornRecordError as exc:
                if read_pos < limit:
                    if n - p >= 4:  # read at least the rest of this frame in one go
                        need = int.from_bytes(view[p : p + 4], "big") + FRAME_HEADER_BYTES - (n - p)
                    break
                raise _BadFrame(buf_file_pos + p, exc) from None
            except RecordDecodeError as exc:
                raise _BadFrame(buf_file_pos + p, exc) from None
            yield buf_file_pos + p, result
            seen += 1
            p = e
        if read_pos >= limit:
            return
        data = f.read(min(max(_READ_CHUNK_BYTES, need), limit - read_pos))
        if not data:  # the file is shorter than `limit`: whatever is left is cut off
            if p < n:
                raise _BadFrame(buf_file_pos + p, TornRecordError("the file ends inside a frame"))
            return
        read_pos += len(data)
        buf_file_pos += p
        buf = bytes(view[p:]) + data if p < n else data


def _process_frames(f, limit: int, process, why, chunk_bytes: int = _READ_CHUNK_BYTES) -> Iterator[None]:
    """Feed the first `limit` bytes of the open file `f` to `process` in chunks of whole frames; a
    generator that yields (None) after each chunk, so that a consumer can take what `process` made.

    `process(buf, pos)` handles the whole valid frames of `buf` from `pos` on (a bulk codec call) and
    returns where it stopped: `len(buf)`, or the start of a frame it could not take. Such a frame is
    either cut off by the chunk (the next chunk carries it on) or bad; `why(buf, pos)` (`check_frame`
    when `process` checks framing only, else `decode_record`) raises the reason, and _BadFrame is
    raised at its file position, as `_walk_frames` would.
    """
    buf = b""
    buf_file_pos = 0  # file position of buf[0]
    read_pos = 0
    while True:
        n = len(buf)
        stop = process(buf, 0) if n else 0
        yield
        need = 0
        if stop < n:
            try:
                why(buf, stop)
            except TornRecordError as exc:
                if read_pos >= limit:
                    raise _BadFrame(buf_file_pos + stop, exc) from None
                if n - stop >= 4:  # read at least the rest of this frame in one go
                    need = int.from_bytes(buf[stop : stop + 4], "big") + FRAME_HEADER_BYTES - (n - stop)
            except RecordDecodeError as exc:
                raise _BadFrame(buf_file_pos + stop, exc) from None
            else:
                raise AssertionError(f"the frame codec refused a valid frame at byte {buf_file_pos + stop}")
        if read_pos >= limit:
            return
        data = f.read(min(max(chunk_bytes, need), limit - read_pos))
        if not data:  # the file is shorter than `limit`: whatever is left is cut off
            if stop < n:
                raise _BadFrame(buf_file_pos + stop, TornRecordError("the file ends inside a frame"))
            return
        read_pos += len(data)
        buf_file_pos += stop
        buf = buf[stop:] + data if stop < n else data




def valid_frames_follow(tail: bytes) -> bool:
    """Whether valid data follows a bad frame at tail[0]: some later position starts a valid frame from
    which valid frames continue to the end of `tail` (the last may be cut off). A torn tail (the prefix
    of an interrupted append, or zeros) has none; a corrupt record in the middle of the data does."""
    n = len(tail)
    if not tail.strip(b"\0"):
        return False
    view = memoryview(tail)
    for s in range(1, n - FRAME_HEADER_BYTES):
        length = int.from_bytes(view[s : s + 4], "big")
        if length < 3 or s + FRAME_HEADER_BYTES + length > n:
            continue  # cannot be a complete frame here
        try:
            p = check_frame(view, s)
        except RecordDecodeError:
            continue
        while p < n:
            try:
                p = check_frame(view, p)
            except TornRecordError:
                return True
            except RecordDecodeError:
                break
        else:
            return True
    return False


class _Scanned(NamedTuple):
    base_offset: int
    path: str
    valid_bytes: int  # bytes of whole valid frames from the start of the file
    file_bytes: int
    record_count: int
    torn_reason: str | None  # set when the last segment ends with a torn tail (valid_bytes < file_bytes)


def _scan_segment(path: str, base_offset: int, is_last: bool, limit: int | None = None) -> _Scanned:
    scan_frames = frame_codec().scan_frames
    count = 0

    def scan(buf: bytes, pos: int) -> int:
        nonlocal count
        checked, stop = scan_frames(buf, pos, len(buf))
        count += checked
        return stop

    with open(path, "rb") as f:
        file_bytes = os.fstat(f.fileno()).st_size
        if limit is not None:  # bytes past a failed-write mark were never acknowledged: not scanned
            file_bytes = min(file_bytes, limit)
        try:
            for _ in _process_frames(f, file_bytes, scan, check_frame):
                pass
        except _BadFrame as bad:
            if is_last:
                f.seek(bad.file_pos)
                if not valid_frames_follow(f.read(file_bytes - bad.file_pos)):
                    reason = f"torn tail at byte {bad.file_pos} of {file_bytes}: {bad.cause}"
                    return _Scanned(base_offset, path, bad.file_pos, file_bytes, count, reason)
            raise CorruptLogError(
                path, base_offset + count, f"bad frame at byte {bad.file_pos}: {bad.cause}"
            ) from None
    return _Scanned(base_offset, path, file_bytes, file_bytes, count, None)


class _Recovered(NamedTuple):
    start_offset: int
    segments: list[_Scanned]  # the live segments, in offset order; the first holds start_offset
    below_start: list[str]  # segment files wholly below the start: what an interrupted prune left
    refused: list[str]  # segment files after a failed-write mark (all refused)
    marked: tuple[int, int] | None  # the failed-write mark: segment base offset, bytes it keeps


def recover_dir(log_dir: str) -> _Recovered:
    """Scan a log directory without changing it; raise CorruptLogError for anything but a torn tail."""
    try:
        checkpointed_start = state_log_files.read_start_offset(log_dir)
    except ValueError as exc:
        raise CorruptLogError(os.path.join(log_dir, START_OFFSET_FILE), None, str(exc)) from None
    try:
        marked = state_log_files.read_failed_write(log_dir)
    except ValueError as exc:
        raise CorruptLogError(os.path.join(log_dir, FAILED_WRITE_FILE), None, str(exc)) from None
    listed = state_log_files.list_segments(log_dir)
    refused: list[str] = []
    if marked is not None:
        refused = [path for base_offset, path in listed if base_offset > marked[0]]
        listed = listed[: len(listed) - len(refused)]
    if not listed:
        return _Recovered(checkpointed_start or 0, [], [], refused, marked)
    start = listed[0][0] if checkpointed_start is None else max(checkpointed_start, listed[0][0])
    first_live = 0
    while first_live + 1 < len(listed) and listed[first_live + 1][0] <= start:
        first_live += 1
    live = listed[first_live:]
    scanned: list[_Scanned] = []
    expected = live[0][0]
    for i, (base_offset, path) in enumerate(live):
        if base_offset != expected:
            raise CorruptLogError(
                path,
                expected,
                f"segment base offset {base_offset} does not follow the previous segment's end {expected}",
            )
        limit = marked[1] if marked is not None and marked[0] == base_offset else None
        segment = _scan_segment(path, base_offset, is_last=i == len(live) - 1, limit=limit)
        scanned.append(segment)
        expected = base_offset + segment.record_count
    if start > expected:
        raise CorruptLogError(
            os.path.join(log_dir, START_OFFSET_FILE), start, f"log start offset beyond the log end {expected}"
        )
    return _Recovered(start, scanned, [path for _base, path in listed[:first_live]], refused, marked)


def read_entries(segments: list[SegmentInfo], start_offset: int) -> Iterator[LogEntry]:
    """Decode the records at or above `start_offset` in the first `size_bytes` of each segment."""
    for segment in segments:
        if segment.base_offset + segment.record_count <= start_offset:
            continue
        offset = segment.base_offset
        skip = max(0, start_offset - offset)
        with open(segment.path, "rb") as f:
            try:
                for _pos, result in _walk_frames(f, segment.size_bytes, decode_record, skip):
                    if offset >= start_offset:
                        key, record, _end = result
                        yield LogEntry(offset, key, record)
                    offset += 1
            except _BadFrame as bad:
                raise CorruptLogError(segment.path, offset, f"bad record at byte {bad.file_pos}: {bad.cause}") from None
        if offset != segment.base_offset + segment.record_count:
            raise CorruptLogError(
                segment.path, offset, f"expected {segment.record_count} records, found {offset - segment.base_offset}"
            )


def read_rows(segments: list[SegmentInfo], start_offset: int, keys: KeyTable) -> Iterator[tuple[int, list]]:
    """The records at or above `start_offset` as decoded rows (persister.frame_codec_pure explains the
    layout; key ids index `keys.keys`), in batches: yields (offset of the batch's first row, rows).
    What the coordinator replays on open; records below the start offset in the first segment are
    only framing-checked, as `read_entries` does."""
    codec = frame_codec()
    scan_frames, decode_frames = codec.scan_frames, codec.decode_frames
    for segment in segments:
        if segment.base_offset + segment.record_count <= start_offset:
            continue
        offset = segment.base_offset
        skip = max(0, start_offset - offset)
        batches: list[tuple[int, list]] = []

        def process(buf: bytes, pos: int) -> int:
            nonlocal offset, skip
            if skip:
                skipped, pos = scan_frames(buf, pos, len(buf), skip)
                skip -= skipped
                offset += skipped
                if skip:
                    return pos
            rows, stop = decode_frames(buf, pos, len(buf), keys)
            if rows:
                batches.append((offset, rows))
                offset += len(rows)
            return stop

        with open(segment.path, "rb") as f:
            try:
                for _ in _process_frames(f, segment.size_bytes, process, decode_record, _DECODE_CHUNK_BYTES):
                    yield from batches
                    batches.clear()
            except _BadFrame as bad:
                raise CorruptLogError(segment.path, offset, f"bad record at byte {bad.file_pos}: {bad.cause}") from None
        if offset != segment.base_offset + segment.record_count:
            raise CorruptLogError(
                segment.path, offset, f"expected {segment.record_count} records, found {offset - segment.base_offset}"
            )


def read_log(log_dir: str | os.PathLike) -> Iterator[LogEntry]:
    """Every record of the state log in `log_dir`, from its start offset, in offset order (read-only).

    For audits and tests: the directory is neither locked nor changed, so it may be read while a
    SegmentLog has it open (records appended after the scan are not seen). A torn tail is skipped, not
    truncated; a corrupt record raises CorruptLogError (when called, for framing faults; while iterating,
    for a payload that does not decode).
    """
    recovered = recover_dir(os.fspath(log_dir))
    segments = [SegmentInfo(s.base_offset, s.path, s.valid_bytes, s.record_count) for s in recovered.segments]
    return read_entries(segments, recovered.start_offset)


# -- the log -------------------------------------------------------------------------------------



def _cut_refused(log_dir: str, recovered: _Recovered, fsync: bool) -> int:
    """Cut what a failed-write file marks as refused (the bytes after its mark, the segments after its
    segment), durably, then remove the file; return the fsyncs made."""
    base_offset, keep = recovered.marked  # type: ignore[misc]
    fsyncs = 0
    cut = 0
    for segment in recovered.segments:
        if segment.base_offset == base_offset and os.path.getsize(segment.path) > keep:
            cut += os.path.getsize(segment.path) - keep
            fd = os.open(segment.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, keep)
                if fsync:
                    state_log_files.fsync_file(fd)
                    fsyncs += 1
            finally:
                os.close(fd)
    cut += sum(os.path.getsize(path) for path in recovered.refused)
    fsyncs += state_log_files.delete_files(log_dir, recovered.refused, fsync)
    fsyncs += state_log_files.delete_files(log_dir, [os.path.join(log_dir, FAILED_WRITE_FILE)], fsync)
    _logger.warning("state log %s: cut %d bytes of records refused before the restart (%s was left when they "
                    "could not be cut back)", log_dir, cut, FAILED_WRITE_FILE)
    return fsyncs


def open_and_recover(log_dir: str, fsync: bool) -> dict:
    """In a worker thread: create and lock the directory, recover it, apply the recovery (truncate a
    torn tail, finish an interrupted prune, create the first segment) and open the active segment."""
    started = time.perf_counter()
    fsyncs = 0
    if not os.path.isdir(log_dir):
        os.makedirs(log_dir, exist_ok=True)
        if fsync:
            state_log_files.fsync_dir(os.path.dirname(os.path.abspath(log_dir)))
            fsyncs += 1
    handles = FileHandles(state_log_files.lock_log_dir(log_dir))
    try:
        recovered = recover_dir(log_dir)  # changes nothing; raises on corruption
        segments = [SegmentInfo(s.base_offset, s.path, s.valid_bytes, s.record_count) for s in recovered.segments]
        if recovered.marked is not None:
            fsyncs += _cut_refused(log_dir, recovered, fsync)
        if recovered.segments and recovered.segments[-1].torn_reason is not None:
            last = recovered.segments[-1]
            _logger.warning(
                "state log %s: truncating %s to %d bytes (%s)",
                log_dir,
                last.path,
                last.valid_bytes,
                last.torn_reason,
            )
            fd = os.open(last.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, last.valid_bytes)
                if fsync:
                    state_log_files.fsync_file(fd)
                    fsyncs += 1
            finally:
                os.close(fd)
        if recovered.below_start:
            fsyncs += state_log_files.delete_files(log_dir, recovered.below_start, fsync)
        if not segments:
            path = os.path.join(log_dir, segment_file_name(recovered.start_offset))
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            if fsync:
                state_log_files.fsync_dir(log_dir)
                fsyncs += 1
            segments = [SegmentInfo(recovered.start_offset, path, 0, 0)]
        handles.active_fd = os.open(segments[-1].path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except BaseException:
        handles.close()
        raise
    return {
        "log_dir": log_dir,
        "handles": handles,
        "segments": segments,
        "start_offset": recovered.start_offset,
        "recovery_seconds": time.perf_counter() - started,
        "recovery_fsyncs": fsyncs,
    }
