"""Segment files of a partition log, their in-memory batch index, and the recovery scan.

A partition directory holds segment files named by the offset of their first batch (20 digits,
`00000000000000004711.log`), each a plain run of RecordBatch v2 batches exactly as produced, with their
assigned base offsets, and no header of its own. Offsets are dense: each batch starts one past the
previous batch's last offset. The index (first and last offset, file position, size, running maximum
timestamp, producer id, flags, per batch) lives only in memory and is rebuilt on open by scanning the
batch headers, checking every batch's length, magic, CRC-32C and base offset on the way.

Recovery rules (`scan_segment`): a batch that does not check out in the *last* segment, with no valid
batch right after it, is a torn tail (a crash in the middle of a write that was never acknowledged:
nothing is acknowledged before its fsync) and is truncated. Any other bad batch (in an earlier segment,
followed by a valid batch, or a whole batch with a good CRC at the wrong base offset, which no torn
write leaves) is corruption: `CorruptLogError` names the file and position, and nothing is changed. A
flipped bit in the very last batch cannot be told from a torn write and is cut like one. File
primitives here take an injectable `fsync(fd)` so tests can count or fail fsyncs.

A write that fails is cut back (`SegmentWriter.undo`); when even that fails, a `failed-write` file
records where the acknowledged data ends (segment base offset and bytes), and the next open cuts
everything after it before the scan (`cut_failed_write`), so a refused write never reappears.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from array import array
from typing import Callable, NamedTuple

from sharegroup.logs import LogBatch

from .record_batch import (
    HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    MAGIC_V2,
    BatchHeader,
    batch_crc,
    control_type,
    parse_header,
)

__all__ = [
    "CorruptLogError",
    "FileFault",
    "BatchIndex",
    "Segment",
    "ScanResult",
    "FsyncFn",
    "os_fsync",
    "fsync_dir",
    "write_file_atomically",
    "read_offset_file",
    "segment_file_name",
    "list_segment_bases",
    "scan_segment",
    "SegmentWriter",
    "FAILED_WRITE_FILE",
    "write_failed_write",
    "cut_failed_write",
    "FLAG_TRANSACTIONAL",
    "FLAG_CONTROL",
]

FsyncFn = Callable[[int], None]
SEGMENT_SUFFIX = ".log"
FAILED_WRITE_FILE = "failed-write"
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")
_SCAN_CHUNK_BYTES = 4 * 2**20
_MIN_BATCH_LENGTH = HEADER_BYTES - LOG_OVERHEAD_BYTES
_LENGTH = struct.Struct(">qi")
FLAG_TRANSACTIONAL = 1
FLAG_CONTROL = 2


class CorruptLogError(Exception):
    """A partition log holds a bad batch that is not a torn tail; it is refused rather than repaired."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt batch at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class FileFault(Exception):
    """An operation on a file of the log ("create", "write", "fsync") that failed with `cause`."""

    def __init__(self, path: str, operation: str, cause: BaseException) -> None:
        super().__init__(f"{operation} of {path} failed: {cause!r}")
        self.path = path
        self.operation = operation
        self.cause = cause


def os_fsync(fd: int) -> None:
    """Make a file's data durable (fdatasync also flushes the size an append changed)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


def fsync_dir(path: str, fsync: FsyncFn) -> None:
    """Make a directory's entries durable (a created, renamed or deleted file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: str, data: bytes, fsync: FsyncFn | None) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content, never a mix:
    write a temporary file, fsync it, rename it over `path`, fsync the directory."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync is not None:
                fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if fsync is not None:
            fsync_dir(os.path.dirname(path) or ".", fsync)
    except OSError as exc:
        if exc.filename is None:  # name the file in the error (fsync and write errors carry none)
            exc.filename = tmp
        raise


def read_offset_file(path: str) -> int | None:
    """The offset in a file written as `b"%d\\n"` (None when there is no file); CorruptLogError when
    the content is anything else."""
    try:
        with open(path, "rb") as f:
            text = f.read(64)
    except FileNotFoundError:
        return None
    if not text.endswith(b"\n") or not text[:-1].isdigit() or len(text) > 21:
        raise CorruptLogError(path, 0, f"not an offset: {text[:40]!r}")
    return int(text)


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def list_segment_bases(directory: str) -> list[int]:
    """Base offsets of the segment files in `directory`, ascending (other files are ignored)."""
    bases = []
    for name in os.listdir(directory):
        m = _SEGMENT_NAME.fullmatch(name)
        if m:
            bases.append(int(m.group(1)))
    return sorted(bases)


class BatchIndex:
    """Per-batch header facts of one segment, in compact arrays (about 50 bytes a batch).

    `max_ts[i]` is batch i's max timestamp; `running_max_ts[i]` the largest of batches 0..i of this
    segment, which never decreases, so a timestamp look-up is a binary search.
    """

    __slots__ = ("bases", "lasts", "positions", "sizes", "max_ts", "running_max_ts", "producer_ids", "flags")

    def __init__(self) -> None:
        self.bases = array("q")
        self.lasts = array("q")
        self.positions = array("q")
        self.sizes = array("q")
        self.max_ts = array("q")
        self.running_max_ts = array("q")
        self.producer_ids = array("q")
        self.flags = bytearray()

    def __len__(self) -> int:
        return len(self.bases)

    def add(self, header: BatchHeader, position: int) -> None:
        """Index a batch (its header carries its assigned base offset) stored at `position`."""
        prev = self.running_max_ts[-1] if self.running_max_ts else -1
        self.bases.append(header.base_offset)
        self.lasts.append(header.base_offset + header.last_offset_delta)
        self.positions.append(position)
        self.sizes.append(header.batch_length + LOG_OVERHEAD_BYTES)
        self.max_ts.append(header.max_timestamp)
        self.running_max_ts.append(max(prev, header.max_timestamp))
        self.producer_ids.append(header.producer_id)
        self.flags.append((FLAG_TRANSACTIONAL if header.is_transactional else 0)
                          | (FLAG_CONTROL if header.is_control else 0))

    def find(self, offset: int) -> int:
        """Index of the batch holding `offset` (or the first batch after it). O(log batches)."""
        return max(0, bisect.bisect_right(self.bases, offset) - 1)

    def log_batch(self, i: int, records: object) -> LogBatch:
        flags = self.flags[i]
        return LogBatch(self.bases[i], self.lasts[i], self.producer_ids[i], bool(flags & FLAG_TRANSACTIONAL),
                        bool(flags & FLAG_CONTROL), self.sizes[i], records)


class Segment:
    """One segment file: its base offset, an open descriptor (pread/pwrite), the published index and
    the published size (bytes written, fsync'd when the store fsyncs, and indexed)."""

    __slots__ = ("base_offset", "path", "fd", "index", "size_bytes")

    def __init__(self, base_offset: int, path: str, fd: int, size_bytes: int = 0) -> None:
        self.base_offset = base_offset
        self.path = path
        self.fd = fd
        self.index = BatchIndex()
        self.size_bytes = size_bytes

    @classmethod
    def create(cls, directory: str, base_offset: int) -> Segment:
        """Create the (empty) file of a new segment. The caller fsyncs the directory before anything
        written to it is acknowledged."""
        path = os.path.join(directory, segment_file_name(base_offset))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size:
            os.close(fd)
            raise FileExistsError(f"{path} exists and is not empty")
        return cls(base_offset, path, fd)

    @property
    def next_offset(self) -> int:
        """One past the last indexed offset (the base offset when the segment is empty)."""
        return self.index.lasts[-1] + 1 if len(self.index) else self.base_offset

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp in the segment (Kafka's `largestTimestamp`), -1 when empty."""
        return self.index.running_max_ts[-1] if len(self.index) else -1

    def read_range(self, first: int, end: int) -> memoryview:
        """The bytes of batches first..end-1 (contiguous in the file), in one pread."""
        idx = self.index
        start = idx.positions[first]
        length = idx.positions[end - 1] + idx.sizes[end - 1] - start
        data = os.pread(self.fd, length, start)
        if len(data) != length:
            raise OSError(f"{self.path}: short read of {length} bytes at {start} (got {len(data)})")
        return memoryview(data)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def check(self) -> None:
        """Invariants of the index, batch by batch: dense offsets, contiguous positions, the running
        maximum timestamp, the size. O(batches)."""
        idx = self.index
        expected_base, expected_pos, running = self.base_offset, 0, -1
        for i in range(len(idx)):
            assert (idx.bases[i], idx.positions[i]) == (expected_base, expected_pos), (self.path, i)
            assert idx.lasts[i] >= idx.bases[i] and idx.sizes[i] >= HEADER_BYTES
            running = max(running, idx.max_ts[i])
            assert idx.running_max_ts[i] == running
            expected_base, expected_pos = idx.lasts[i] + 1, expected_pos + idx.sizes[i]
        assert self.size_bytes == expected_pos and self.fd >= 0, self.path


class SegmentWriter:
    """The writing end of a partition log, used by one worker thread at a time (the log's writer).

    `write_group` writes a group of appends, each `(new_segment, segment_base, position, data)`, with
    `pwrite` at the positions the log assigned, and makes them durable: a segment is fsync'd before the
    next one gets bytes, the last one and (when segments were created) the directory at the end. It
    returns the segments it created and the fsyncs it made, or raises FileFault naming the file and
    the operation that failed. After a failure `undo` deletes the segments the group created and cuts
    the last published segment back to its published size, durably.
    """

    def __init__(self, directory: str, fsync: FsyncFn | None) -> None:
        self.directory = directory
        self.fsync = fsync
        self.segment: Segment | None = None  # the segment appends go to
        self.created: list[Segment] = []  # segments the current group created

    def write_group(self, writes: list[tuple[bool, int, int, bytes | bytearray]]) -> tuple[list[Segment], int]:
        fsync = self.fsync
        self.created = new = []
        fsyncs = 0
        seg = self.segment
        dirty = False
        operation, path = "write", self.directory
        try:
            for new_segment, segment_base, position, data in writes:
                if new_segment:
                    if dirty and fsync is not None:
                        operation, path = "fsync", seg.path  # type: ignore[union-attr]
                        fsync(seg.fd)  # type: ignore[union-attr]
                        fsyncs += 1
                    operation, path = "create", os.path.join(self.directory, segment_file_name(segment_base))
                    seg = self.segment = Segment.create(self.directory, segment_base)
                    new.append(seg)
                    dirty = False
                operation, path = "write", seg.path  # type: ignore[union-attr]
                view = memoryview(data)
                while view:
                    written = os.pwrite(seg.fd, view, position)  # type: ignore[union-attr]
                    view = view[written:]
                    position += written
                dirty = True
            if fsync is not None:
                if dirty:
                    operation, path = "fsync", seg.path  # type: ignore[union-attr]
                    fsync(seg.fd)  # type: ignore[union-attr]
                    fsyncs += 1
                if new:
                    operation, path = "fsync", self.directory
                    fsync_dir(self.directory, fsync)
                    fsyncs += 1
        except OSError as exc:
            raise FileFault(path, operation, exc) from exc
        self.created = []
        return new, fsyncs

    def undo(self, published: Segment | None) -> None:
        """Delete the segments the failed group created and cut `published` (the last published
        segment) back to its published size, fsync'd; raises OSError when that fails too."""
        created, self.created = self.created, []
        for seg in created:
            seg.close()
            try:
                os.unlink(seg.path)
            except FileNotFoundError:
                pass
        if published is not None and published.fd >= 0:
            os.ftruncate(published.fd, published.size_bytes)
            if self.fsync is not None:
                self.fsync(published.fd)
            self.segment = published
        if created and self.fsync is not None:
            fsync_dir(self.directory, self.fsync)

    def close(self) -> None:
        if self.segment is not None:
            self.segment.close()


def write_failed_write(directory: str, segment_base: int, size_bytes: int, fsync: FsyncFn | None) -> None:
    """Record, when a failed write could not be cut back, where the acknowledged data of the log ends:
    segment `segment_base` keeps `size_bytes` bytes and every later segment goes (`cut_failed_write`)."""
    write_file_atomically(os.path.join(directory, FAILED_WRITE_FILE), b"%d %d\n" % (segment_base, size_bytes), fsync)


def cut_failed_write(directory: str, fsync: FsyncFn | None) -> int | None:
    """Recovery, before the scan: when a `failed-write` file is present, cut what it says never was
    acknowledged (the bytes after its end, the segments after its segment), make the cut durable, then
    remove the file. Returns the bytes cut, or None when there is no such file."""
    path = os.path.join(directory, FAILED_WRITE_FILE)
    try:
        with open(path, "rb") as f:
            text = f.read(64)
    except FileNotFoundError:
        return None
    fields = text[:-1].split(b" ") if text.endswith(b"\n") else []
    if len(fields) != 2 or not all(x.isdigit() and len(x) <= 19 for x in fields):
        raise CorruptLogError(path, 0, f"not a segment offset and a size: {text[:40]!r}")
    base, size = int(fields[0]), int(fields[1])
    cut = 0
    for segment_base in list_segment_bases(directory):
        segment_path = os.path.join(directory, segment_file_name(segment_base))
        length = os.path.getsize(segment_path)
        if segment_base > base:
            os.unlink(segment_path)
            cut += length
        elif segment_base == base and length > size:
            fd = os.open(segment_path, os.O_RDWR)
            try:
                os.ftruncate(fd, size)
                if fsync is not None:
                    fsync(fd)
            finally:
                os.close(fd)
            cut += length - size
    if fsync is not None:
        fsync_dir(directory, fsync)
    os.unlink(path)
    if fsync is not None:
        fsync_dir(directory, fsync)
    return cut


class ScanResult(NamedTuple):
    """What a recovery scan found: the segment (index built), and where a torn tail was cut (or None)."""

    segment: Segment
    truncated_at: int | None


BatchCallback = Callable[[BatchHeader, "int | None"], None]


def _batch_fault(buf, p: int, n: int, expected_base: int | None) -> str | None:
    """Why the batch at buf[p:] (n bytes available) is not a whole valid batch, or None if it is."""
    if n - p < HEADER_BYTES:
        return f"only {n - p} bytes left, too few for a batch header"
    base, length = _LENGTH.unpack_from(buf, p)
    if buf[p + 16] != MAGIC_V2:
        return f"magic {buf[p + 16]}, not 2"
    if length < _MIN_BATCH_LENGTH:
        return f"batchLength {length} below the minimum {_MIN_BATCH_LENGTH}"
    size = length + LOG_OVERHEAD_BYTES
    if p + size > n:
        return f"batchLength {length} runs past the end of the data"
    header = parse_header(buf, p)
    if batch_crc(buf, p, size) != header.crc:
        return "CRC-32C mismatch"
    if header.last_offset_delta < 0:
        return f"lastOffsetDelta {header.last_offset_delta} < 0"
    if expected_base is not None and base != expected_base:
        return f"base offset {base}, expected {expected_base}"
    return None


def scan_segment(directory: str, base_offset: int, *, is_last: bool,
                 on_batch: BatchCallback, truncate: bool = True) -> ScanResult:
    """Open a segment file and index its batches, calling `on_batch(header, control_type)` for each.

    A torn tail of the last segment is truncated (and fsync'd by the caller); a bad batch anywhere
    else raises CorruptLogError. Reads the file once, in chunks of 4 MiB (or one batch if larger).
    """
    path = os.path.join(directory, segment_file_name(base_offset))
    fd = os.open(path, os.O_RDWR)
    segment = Segment(base_offset, path, fd)
    try:
        file_size = os.fstat(fd).st_size
        expected = base_offset
        pos = 0
        while pos < file_size:
            want = min(file_size - pos, _SCAN_CHUNK_BYTES)
            buf = os.pread(fd, want, pos)
            n = len(buf)
            p = 0
            progressed = False
            while p < n:
                if n - p >= HEADER_BYTES:
                    size = _LENGTH.unpack_from(buf, p)[1] + LOG_OVERHEAD_BYTES
                    if p + size > n and pos + p + size <= file_size and size > 0:
                        if p == 0:  # one batch larger than the chunk: read it whole
                            buf = os.pread(fd, size, pos)
                            n = len(buf)
                        else:
                            break
                elif pos + n < file_size:
                    break  # the header straddles the chunk: re-read from here
                fault = _batch_fault(buf, p, n, expected)
                if fault is not None:
                    at = pos + p
                    # A torn write leaves a batch that does not check out; a whole batch (good CRC)
                    # at the wrong offset is never one.
                    wrong_offset = fault.startswith("base offset")
                    if not is_last or wrong_offset or _valid_batch_follows(fd, buf, p, n, pos, file_size):
                        raise CorruptLogError(path, at, fault)
                    if truncate:
                        os.ftruncate(fd, at)
                    segment.size_bytes = at
                    return ScanResult(segment, at)
                header = parse_header(buf, p)
                ctype = control_type(buf, p) if header.is_control else None
                segment.index.add(header, pos + p)
                on_batch(header, ctype)
                expected = header.base_offset + header.last_offset_delta + 1
                p += header.batch_length + LOG_OVERHEAD_BYTES
                progressed = True
            if not progressed and p == 0:  # cannot happen: a partial header at EOF is a fault above
                raise CorruptLogError(path, pos, "scan made no progress")
            pos += p
        segment.size_bytes = pos
        return ScanResult(segment, None)
    except BaseException:
        segment.close()
        raise


def _valid_batch_follows(fd: int, buf, p: int, n: int, pos: int, file_size: int) -> bool:
    """Whether a valid batch starts right after the bad batch at buf[p:] (whose length field is read
    as written). If so the bad batch is corruption in the middle, not a torn tail."""
    if n - p < 12:
        return False
    length = _LENGTH.unpack_from(buf, p)[1]
    if length < _MIN_BATCH_LENGTH:
        return False
    nxt = pos + p + length + LOG_OVERHEAD_BYTES
    if nxt + HEADER_BYTES > file_size:
        return False
    head = os.pread(fd, 12, nxt)
    size = _LENGTH.unpack_from(head, 0)[1] + LOG_OVERHEAD_BYTES
    if size < HEADER_BYTES or nxt + size > file_size:
        return False
    data = os.pread(fd, size, nxt)
    return _batch_fault(data, 0, len(data), None) is None
