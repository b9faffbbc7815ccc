"""A durable, compacted `RecordSink` for the group coordinator: its records in `DIR/groups/records.log`.

`sharegroup serve` keeps the coordinator's records (share, consumer and classic groups, committed
offsets) in one file, so a restarted broker rebuilds every group with `GroupCoordinator.load()`. One
`append(records)` call is one frame, written at the file's end and fsync'd before the call returns, so a
group change either survives a crash whole or not at all:

    frame = length:uint32 | crc32(payload):uint32 | payload (UTF-8 JSON: a list of [key, value])

Keys and values are the coordinator's frozen dataclasses and NamedTuples of str, int, UUID and tuples,
written with their class name and fields (bytes as base64); a name that is not a record class is
refused, never guessed.

- **Compaction** (as Kafka's log cleaner compacts `__consumer_offsets`): the sink holds only the latest
  record of every key (tombstones drop their key), so its memory follows the live groups, members and
  offsets, not the history. Once the file is at least `min_compaction_bytes` and its dirty part (bytes
  of records overwritten or deleted since) is at least `min_cleanable_dirty_ratio` of it (Kafka's
  name and default, 0.5), the live records are written one frame each to `records.log.compacting`,
  fsync'd, renamed over `records.log` and the directory fsync'd; so after every append the file is at
  most max(`min_compaction_bytes`, live bytes / (1 - ratio)), twice the live records by default. A crash
  leaves the old file or the new one, both holding every acknowledged record; a leftover
  `.compacting` file is deleted at open.
- **Storage faults** (as Kafka takes a failed log dir offline): a failed write or fsync is logged at
  ERROR naming the file and the error, the frame is cut back off (explicit-offset writes, no buffer
  that could flush it later), the append raises ShareError(KAFKA_STORAGE_ERROR) and so does every
  later one until a restart. Nothing that was not durable is acknowledged.
- **Recovery**: at open every frame is replayed. A bad frame with nothing valid after it is a torn
  tail (an append interrupted by a crash, never acknowledged): it is cut off with a WARNING naming the
  file. A bad frame followed by valid ones, or a frame with a good CRC that is not a record list, is
  corruption: `CorruptLogError` names the file and byte, and nothing is changed (`sharegroup serve`
  exits 1).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import dataclasses
import json
import logging
import os
import struct
import threading
import uuid
import zlib
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

from persister.state_log_files import fsync_dir as _fsync_dir
from persister.state_log_files import fsync_file as _fsync

from ..coordinator import records as rec
from ..coordinator.classic import records as classic_records
from ..coordinator.consumer import records as consumer_records
from ..coordinator.share import records as share_records
from ..coordinator.transactions import records as txn_records
from ..errors import Errors, ShareError
from ..topics import CorruptLogError

__all__ = ["FileRecordSink", "encode_records", "decode_records", "FILE_NAME", "COMPACTING_FILE_NAME"]

log = logging.getLogger(__name__)

FILE_NAME = "records.log"
COMPACTING_FILE_NAME = FILE_NAME + ".compacting"
_HEADER = struct.Struct(">II")
_MIN_PAYLOAD_BYTES = 2  # "[]": a shorter payload (zeros a crash left, say) is never a frame
_MAX_FRAME_BYTES = 64 << 20  # a larger length is corruption, not a record list
_READ_CHUNK_BYTES = 4 << 20
_COMPACTED_WRITE_BYTES = 1 << 20  # the compacted file is written in pieces of about this size
# The compacted file holds one frame per live record, so its size is exactly the sum of their frames.
_RECORD_FRAME_OVERHEAD = _HEADER.size + 2
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5  # Kafka's min.cleanable.dirty.ratio default
# Small, so the file stays near twice its live records: a rewrite costs about the live records, which is
# cheap, and a restart replays the whole file (about 0.2 s per MiB), so a larger floor only slows restarts.
DEFAULT_MIN_COMPACTION_BYTES = 256 << 10

_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (*share_records.SHARE_VALUE_TYPES, *share_records.SHARE_VALUE_TYPES.values(), rec.TopicPartitions,
                share_records.TopicMetadata,
                *classic_records.CLASSIC_VALUE_TYPES, *classic_records.CLASSIC_VALUE_TYPES.values(),
                *classic_records.NESTED_TYPES,
                *consumer_records.CONSUMER_VALUE_TYPES, *consumer_records.CONSUMER_VALUE_TYPES.values(),
                txn_records.TransactionLogKey, txn_records.TransactionLogValue)  # DIR/transactions reuses the sink
}


# -- the codec ---------------------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, uuid.UUID):
        return {"u": value.hex}
    if isinstance(value, bytes):  # a classic member's protocol metadata and assignment
        return {"b": base64.b64encode(value).decode()}
    name = type(value).__name__
    if name in _CLASSES:
        if dataclasses.is_dataclass(value):
            return {"t": name, "f": [_encode(getattr(value, f.name)) for f in dataclasses.fields(value)]}
        return {"t": name, "f": [_encode(item) for item in value]}
    if isinstance(value, tuple):
        return {"l": [_encode(item) for item in value]}
    raise TypeError(f"cannot encode {value!r} in a group record")


def _decode(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if isinstance(data, dict):
        if "u" in data:
            return uuid.UUID(hex=data["u"])
        if "l" in data:
            return tuple(_decode(item) for item in data["l"])
        if "b" in data:
            return base64.b64decode(data["b"], validate=True)
        cls = _CLASSES.get(data.get("t", ""))
        if cls is None:
            raise ValueError(f"not a group record class: {data.get('t')!r}")
        return cls(*(_decode(item) for item in data["f"]))
    raise ValueError(f"not a group record field: {data!r}")


def _encode_record(record: rec.Record) -> bytes:
    """One record as the JSON of `[key, value]`; a frame's payload is these joined into a list."""
    return json.dumps([_encode(record.key), _encode(record.value)], separators=(",", ":")).encode()


def _frame(items: Sequence[bytes]) -> bytes:
    payload = b"[" + b",".join(items) + b"]"
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def encode_records(records: Sequence[rec.Record]) -> bytes:
    """One frame holding `records`."""
    return _frame([_encode_record(r) for r in records])


def decode_records(payload: bytes) -> list[rec.Record]:
    """The records of one frame's payload; ValueError (or TypeError) when it is not a record list."""
    return [record for record, _size in _decode_frame(payload)]


def _decode_frame(payload: bytes) -> list[tuple[rec.Record, int]]:
    """The records of one frame's payload, each with the size of its encoding (what `_encode_record`
    gives: the JSON is written compact and ASCII-only, so dumping a parsed pair again gives its bytes)."""
    data = json.loads(payload)
    if not isinstance(data, list):
        raise ValueError("a frame's payload is not a list of records")
    single = len(data) == 1
    out = []
    for pair in data:
        key, value = pair
        size = len(payload) - 2 if single else len(json.dumps(pair, separators=(",", ":")))
        out.append((rec.Record(_decode(key), _decode(value)), size))
    return out


# -- the file ----------------------------------------------------------------------------------------


def _write_at(fd: int, data: bytes, position: int) -> None:
    """Write all of `data` at `position` (no buffer: what is not written here is never written)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


class _Fault(NamedTuple):
    """Why the bytes at a position are not a whole valid frame; `cut` when the data ends inside it."""

    reason: str
    cut: bool


def _frame_fault(buf: bytes | memoryview, p: int) -> _Fault | None:
    """Why the bytes at `p` are not a whole valid frame (None when they are)."""
    if len(buf) - p < _HEADER.size:
        return _Fault("the data ends inside a frame header", True)
    length, crc = _HEADER.unpack_from(buf, p)
    if length < _MIN_PAYLOAD_BYTES or length > _MAX_FRAME_BYTES:
        return _Fault(f"frame length {length} out of range", False)
    end = p + _HEADER.size + length
    if end > len(buf):
        return _Fault(f"the data ends inside a frame of {length} bytes", True)
    if zlib.crc32(buf[p + _HEADER.size:end]) != crc:
        return _Fault("CRC-32 mismatch", False)
    return None


def _valid_frames_follow(tail: bytes) -> bool:
    """Whether valid frames follow a bad frame at tail[0]: some later position starts a valid frame from
    which valid frames continue to the end of `tail` (the last may be cut off). A torn tail (the start
    of an interrupted append, or zeros) has none; a damaged frame in the middle of the file does."""
    n = len(tail)
    for s in range(1, n - _HEADER.size + 1):
        length = int.from_bytes(tail[s:s + 4], "big")
        if length < _MIN_PAYLOAD_BYTES or length > _MAX_FRAME_BYTES or s + _HEADER.size + length > n:
            continue
        p = s
        while p < n:
            fault = _frame_fault(tail, p)
            if fault is None:
                p += _HEADER.size + _HEADER.unpack_from(tail, p)[0]
            elif fault.cut:
                return True  # valid frames up to one cut off by the end: data after the bad frame
            else:
                break
        else:
            return True
    return False


class _Scanned(NamedTuple):
    position: int  # where the frame starts
    end: int  # where it ends (`position` for a bad frame)
    records: list[tuple[rec.Record, int]] | None  # with their encoded sizes; None: a bad frame, the scan stops
    fault: _Fault | None


def _scan(path: Path, fd: int) -> Iterator[_Scanned]:
    """Every valid frame of the file, read in chunks of 4 MiB (a larger frame whole); at the first bad
    frame one with `records` None, and the scan stops. A frame whose CRC holds but whose payload is not
    a record list raises CorruptLogError: no torn write leaves that."""
    size = os.fstat(fd).st_size
    pos = 0
    want = _READ_CHUNK_BYTES
    while pos < size:
        buf = os.pread(fd, min(want, size - pos), pos)
        want = _READ_CHUNK_BYTES
        at_end = pos + len(buf) >= size
        p = 0
        while p < len(buf):
            fault = _frame_fault(buf, p)
            if fault is not None:
                if fault.cut and not at_end:
                    break  # the chunk, not the file, cut the frame: read on from its start
                yield _Scanned(pos + p, pos + p, None, fault)
                return
            end = p + _HEADER.size + _HEADER.unpack_from(buf, p)[0]
            try:
                records = _decode_frame(buf[p + _HEADER.size:end])
            except (ValueError, TypeError, KeyError) as exc:
                raise CorruptLogError(str(path), pos + p,
                                      f"a frame with a valid CRC is not a record list: {exc}") from None
            yield _Scanned(pos + p, pos + end, records, None)
            p = end
        if p == 0:  # a frame larger than the chunk: read it whole
            want = _HEADER.size + _HEADER.unpack_from(buf, 0)[0]
        pos += p


class FileRecordSink:
    """Group records in `directory/records.log`, compacted; open with `FileRecordSink.open(directory)`."""

    def __init__(self, directory: Path, fd: int, live: dict[Any, tuple[rec.Record, int]], file_bytes: int, *,
                 fsync: bool, min_cleanable_dirty_ratio: float, min_compaction_bytes: int,
                 what: str = "group records") -> None:
        self.directory = directory
        self.what = what  # what the store holds, for its messages ("transaction state" for DIR/transactions)
        self.path = directory / FILE_NAME
        self._fd = fd
        self._live = live  # key -> (latest record, its encoded size), in the order of those records
        self._live_lock = threading.Lock()  # the writer thread changes `_live`; `read_all` copies it
        self._file_bytes = file_bytes
        self._live_bytes = sum(size + _RECORD_FRAME_OVERHEAD for _record, size in live.values())
        self._fsync = fsync
        self.min_cleanable_dirty_ratio = min_cleanable_dirty_ratio
        self.min_compaction_bytes = min_compaction_bytes
        self._failed: str | None = None  # why the store refuses writes (until a restart)
        # One writer thread: appends and compactions run one at a time in submission order, even when
        # an awaiting caller is cancelled (a cancelled await never lets two writes overlap).
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="group-records")
        self._closed = False
        self.appends = 0
        self.compactions = 0

    @classmethod
    def open(cls, directory: str | os.PathLike, *, fsync: bool = True,
             min_cleanable_dirty_ratio: float = DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
             min_compaction_bytes: int = DEFAULT_MIN_COMPACTION_BYTES, what: str = "group records") -> "FileRecordSink":
        """Replay `directory/records.log` (created if missing): cut a torn tail off (WARNING), refuse a
        corrupt frame in the middle (CorruptLogError naming file and byte; nothing changed)."""
        if isinstance(min_cleanable_dirty_ratio, bool) or not 0 <= min_cleanable_dirty_ratio < 1:
            raise ValueError(f"min_cleanable_dirty_ratio must be in [0, 1), not {min_cleanable_dirty_ratio!r}")
        if isinstance(min_compaction_bytes, bool) or not isinstance(min_compaction_bytes, int) \
                or min_compaction_bytes < 0:
            raise ValueError(f"min_compaction_bytes must be an int >= 0, not {min_compaction_bytes!r}")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILE_NAME
        leftover = directory / COMPACTING_FILE_NAME
        if leftover.exists():  # a compaction a crash interrupted before its rename: records.log is whole
            log.warning("%s: removing %s left by an interrupted compaction", path, leftover.name)
            leftover.unlink()
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if created and fsync:
                _fsync_dir(str(directory))
            live, good = cls._replay(path, fd, fsync)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, fd, live, good, fsync=fsync, min_cleanable_dirty_ratio=min_cleanable_dirty_ratio,
                   min_compaction_bytes=min_compaction_bytes, what=what)

    @staticmethod
    def _replay(path: Path, fd: int, fsync: bool) -> tuple[dict[Any, tuple[rec.Record, int]], int]:
        live: dict[Any, tuple[rec.Record, int]] = {}
        good = 0
        for frame in _scan(path, fd):
            if frame.records is None:
                assert frame.fault is not None
                size = os.fstat(fd).st_size
                if size - good > _HEADER.size + _MAX_FRAME_BYTES or \
                        _valid_frames_follow(os.pread(fd, size - good, good)):
                    raise CorruptLogError(str(path), good, f"bad frame followed by valid data: {frame.fault.reason}")
                log.warning("%s: cutting off a torn tail at byte %d (%d bytes: %s), the end of an append a "
                            "crash interrupted", path, good, size - good, frame.fault.reason)
                os.ftruncate(fd, good)
                if fsync:
                    _fsync(fd)
                break
            for record, size in frame.records:
                _apply(live, record, size)
            good = frame.end
        return live, good

    # -- appending -----------------------------------------------------------------------------------

    async def append(self, records: Sequence[rec.Record]) -> None:
        """Write one frame with `records` and make it durable; none of them count if this raises
        (ShareError(KAFKA_STORAGE_ERROR) for a failed disk: the store refuses writes from then on)."""
        items = [_encode_record(r) for r in records]  # TypeError for what is not a record: nothing written
        frame = _frame(items)
        if len(frame) - _HEADER.size > _MAX_FRAME_BYTES:
            raise ShareError(Errors.RECORD_LIST_TOO_LARGE, f"{len(frame)} bytes of {self.what} in one append")
        if self._closed:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, f"{self.path}: the {self.what} store is closed")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._append, records, items, frame)

    def _append(self, records: Sequence[rec.Record], items: list[bytes], frame: bytes) -> None:
        """In the writer thread: write, fsync, then hold the records; compact when the file outgrew them."""
        self._check_usable()
        try:
            _write_at(self._fd, frame, self._file_bytes)
            if self._fsync:
                _fsync(self._fd)
        except OSError as exc:
            self._fail(f"appending {len(frame)} bytes at byte {self._file_bytes}", exc, cut_back=True)
        self._file_bytes += len(frame)
        with self._live_lock:
            for record, item in zip(records, items):
                self._live_bytes += _apply(self._live, record, len(item))
        self.appends += 1
        if self._should_compact():
            try:
                self._compact()
            except ShareError:
                pass  # the append is durable and acknowledged; the store refuses the next one

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR,
                             f"{self.path}: the {self.what} store failed ({self._failed}); it refuses writes "
                             f"until the broker restarts")

    def _fail(self, what: str, exc: OSError, *, cut_back: bool) -> None:
        """Take the store offline: log at ERROR, cut a refused frame back off, raise KAFKA_STORAGE_ERROR."""
        self._failed = f"{what} failed: {exc}"
        log.error("%s: %s failed: %s; the %s store refuses writes until the broker restarts",
                  self.path, what, exc, self.what)
        if cut_back:
            try:
                os.ftruncate(self._fd, self._file_bytes)
                if self._fsync:
                    _fsync(self._fd)
            except OSError as again:
                log.error("%s: cutting the refused append back to byte %d failed too: %s", self.path,
                          self._file_bytes, again)
        raise ShareError(Errors.KAFKA_STORAGE_ERROR, f"{self.path}: {self._failed}") from exc

    # -- compaction ----------------------------------------------------------------------------------

    @property
    def file_bytes(self) -> int:
        """The length of `records.log`: every acknowledged frame since the last compaction."""
        return self._file_bytes

    @property
    def live_bytes(self) -> int:
        """What the live records take in a compacted file (one frame each)."""
        return self._live_bytes

    def _should_compact(self) -> bool:
        if self._file_bytes < max(self.min_compaction_bytes, 1):
            return False
        dirty = self._file_bytes - self.live_bytes
        return dirty > 0 and dirty >= self.min_cleanable_dirty_ratio * self._file_bytes

    def _compact(self) -> None:
        """In the writer thread: the live records to `records.log.compacting`, fsync, rename over
        `records.log`, fsync the directory; then append to the new file. An I/O error takes the store
        offline (as Kafka's cleaner takes a log dir offline); `records.log` is whole either way."""
        tmp = self.directory / COMPACTING_FILE_NAME
        before = self._file_bytes
        fd = -1
        renamed = False
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            size = 0
            for frame in self._compacted_frames():
                _write_at(fd, frame, size)
                size += len(frame)
            if self._fsync:
                _fsync(fd)
            os.replace(tmp, self.path)
            renamed = True
            if self._fsync:
                _fsync_dir(str(self.directory))
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            if not renamed:
                try:
                    tmp.unlink(missing_ok=True)
                except OSError:
                    pass
            self._fail(f"compacting into {tmp.name}", exc, cut_back=False)
        old, self._fd, self._file_bytes = self._fd, fd, size
        os.close(old)
        self.compactions += 1
        log.info("%s: compacted %d bytes to %d (%d live records)", self.path, before, size, len(self._live))

    def _compacted_frames(self) -> Iterator[bytes]:
        """The live records, one frame each, joined into pieces of about 1 MiB to write."""
        piece: list[bytes] = []
        piece_bytes = 0
        for record, _size in self._live.values():
            frame = _frame([_encode_record(record)])
            piece.append(frame)
            piece_bytes += len(frame)
            if piece_bytes >= _COMPACTED_WRITE_BYTES:
                yield b"".join(piece)
                piece, piece_bytes = [], 0
        if piece:
            yield b"".join(piece)

    # -- reading -------------------------------------------------------------------------------------

    def read_all(self) -> list[rec.Record]:
        """The latest record of every key, in the order of those records, tombstones dropped (what
        `coordinator.records.compact` makes of every record appended)."""
        with self._live_lock:
            return [record for record, _size in self._live.values()]

    def __len__(self) -> int:
        return len(self._live)

    def close(self) -> None:
        """Wait for a running append or compaction, then close the file."""
        if self._closed:
            return
        self._closed = True
        self._writer.shutdown(wait=True)
        os.close(self._fd)


def _apply(live: dict[Any, tuple[rec.Record, int]], record: rec.Record, size: int) -> int:
    """Make `record` the latest of its key (a tombstone drops the key); returns the change of live bytes."""
    previous = live.pop(record.key, None)
    change = -(previous[1] + _RECORD_FRAME_OVERHEAD) if previous is not None else 0
    if record.value is not None:
        live[record.key] = (record, size)
        change += size + _RECORD_FRAME_OVERHEAD
    return change
