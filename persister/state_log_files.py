"""The state log's file operations: names, the start offset file, the lock, durable writes and deletes.

Everything here touches the file system and nothing else; the recovery scan (`persister.state_log_recovery`)
and the group-commit writer (`persister.state_log_writer`) call these functions through this module (`state_log_files.X`,
looked up at call time), so tests can inject failures by replacing one of them.

Layout of a log directory::

    00000000000000000000.log    segment files, named by the offset of their first record (20 digits)
    00000000000000004711.log    ... each a plain sequence of record frames (persister.state_records)
    log-start-offset            the log start offset, once something was pruned (atomically replaced)
    failed-write                where the acknowledged records end, left when a failed group commit could
                                not be cut back; the next open cuts what follows and removes it
    .lock                       flock'd while a SegmentLog has the directory open
"""

from __future__ import annotations

import fcntl
import os
import re
from typing import NamedTuple

import crc32c

__all__ = [
    "SEGMENT_SUFFIX",
    "START_OFFSET_FILE",
    "FAILED_WRITE_FILE",
    "LOCK_FILE",
    "lock_log_dir",
    "SegmentInfo",
    "LogLockedError",
    "FileHandles",
    "segment_file_name",
    "parse_segment_file_name",
    "list_segments",
    "format_start_offset",
    "parse_start_offset",
    "read_start_offset",
    "write_start_offset",
    "read_failed_write",
    "write_failed_write",
    "write_all",
    "fsync_file",
    "fsync_dir",
    "delete_files",
]

SEGMENT_SUFFIX = ".log"
START_OFFSET_FILE = "log-start-offset"
FAILED_WRITE_FILE = "failed-write"
LOCK_FILE = ".lock"
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")
_START_OFFSET_LINE = re.compile(rb"sharegroup-log-start 1 (\d{1,19}) ([0-9a-f]{8})\n")
_FAILED_WRITE_LINE = re.compile(rb"sharegroup-failed-write 1 ((\d{1,19}) (\d{1,19})) ([0-9a-f]{8})\n")


def segment_file_name(base_offset: int) -> str:
    """The file name of the segment whose first record has `base_offset`."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    """The base offset of a segment file name (`00000000000000004711.log`), or None for any other name."""
    match = _SEGMENT_NAME.fullmatch(name)
    return None if match is None else int(match.group(1))


class SegmentInfo(NamedTuple):
    """One segment file as the log sees it: base offset, path, bytes and records held."""

    base_offset: int
    path: str
    size_bytes: int
    record_count: int


class LogLockedError(OSError):
    """The log directory is already open by another SegmentLog (in this or another process)."""


def lock_log_dir(log_dir: str, *, create: bool = True) -> int:
    """Take the exclusive flock a SegmentLog holds on its directory while open; return the descriptor
    that holds it (closing it releases the lock). LogLockedError when another holder has it. With
    `create=False` no lock file is created: -1 means there is none (no log was ever opened there)."""
    path = os.path.join(log_dir, LOCK_FILE)
    if not create and not os.path.exists(path):
        return -1
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLockedError(f"the state log {log_dir} is already open (by this or another process)") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


class FileHandles:
    """The file descriptors a log holds, closed by `close()` or, as a safety net, when the log is
    garbage collected without being closed."""

    __slots__ = ("active_fd", "lock_fd")

    def __init__(self, lock_fd: int) -> None:
        self.lock_fd = lock_fd
        self.active_fd = -1

    def close(self) -> None:
        for name in ("active_fd", "lock_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                try:
                    os.close(fd)
                except OSError:
                    pass


def list_segments(log_dir: str) -> list[tuple[int, str]]:
    """The segment files of `log_dir` as (base offset, path), in offset order."""
    found = []
    for name in os.listdir(log_dir):
        base_offset = parse_segment_file_name(name)
        if base_offset is not None:
            found.append((base_offset, os.path.join(log_dir, name)))
    found.sort()
    return found


def format_start_offset(offset: int) -> bytes:
    """The content of a start offset file holding `offset`: one line with the offset and its CRC32C."""
    digits = str(offset).encode()
    return b"sharegroup-log-start 1 %s %08x\n" % (digits, crc32c.crc32c(digits))


def parse_start_offset(content: bytes) -> int:
    """The offset held by a start offset file's content; ValueError when it is unreadable (bad format
    or checksum), which recovery and the audit treat as corruption."""
    match = _START_OFFSET_LINE.fullmatch(bytes(content))
    if match is None or crc32c.crc32c(match.group(1)) != int(match.group(2), 16):
        raise ValueError("the log start offset file is unreadable")
    return int(match.group(1))


def read_start_offset(log_dir: str) -> int | None:
    """The start offset stored in `log_dir`, None when there is no start offset file; ValueError when
    the file is unreadable."""
    path = os.path.join(log_dir, START_OFFSET_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(128)
    except FileNotFoundError:
        return None
    return parse_start_offset(data)


# -- durable writes (called from worker threads) ---------------------------------------------------


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_file(fd: int) -> None:
    """Make a file's data durable (fdatasync also flushes the size an append changed)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


def fsync_dir(path: str) -> None:
    """Make a directory's entries durable (a created, renamed or deleted file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_start_offset(log_dir: str, offset: int, fsync: bool) -> int:
    """Atomically replace the start offset file (write, fsync, rename, fsync the directory); return
    the number of fsyncs made."""
    return _replace_file(log_dir, START_OFFSET_FILE, format_start_offset(offset), fsync)


def _replace_file(log_dir: str, name: str, data: bytes, fsync: bool) -> int:
    """Atomically replace `log_dir/name` with `data`; an OSError names the file it failed on."""
    path = os.path.join(log_dir, name)
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            write_all(fd, data)
            if fsync:
                fsync_file(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if fsync:
            fsync_dir(log_dir)
            return 2
        return 0
    except OSError as exc:
        if exc.filename is None:
            exc.filename = tmp
        raise


def write_failed_write(log_dir: str, segment_base: int, size_bytes: int, fsync: bool) -> None:
    """Record where the acknowledged records end when a failed group commit could not be cut back:
    segment `segment_base` keeps `size_bytes` bytes, later segments go (one line with a CRC32C)."""
    fields = b"%d %d" % (segment_base, size_bytes)
    _replace_file(log_dir, FAILED_WRITE_FILE, b"sharegroup-failed-write 1 %s %08x\n" % (fields, crc32c.crc32c(fields)),
                  fsync)


def read_failed_write(log_dir: str) -> tuple[int, int] | None:
    """(segment base offset, bytes it keeps) from the failed-write file of `log_dir`, None when there is
    none; ValueError when it is unreadable."""
    try:
        with open(os.path.join(log_dir, FAILED_WRITE_FILE), "rb") as f:
            data = f.read(128)
    except FileNotFoundError:
        return None
    match = _FAILED_WRITE_LINE.fullmatch(data)
    if match is None or crc32c.crc32c(match.group(1)) != int(match.group(4), 16):
        raise ValueError("the failed-write file is unreadable")
    return int(match.group(2)), int(match.group(3))


def delete_files(log_dir: str, paths: list[str], fsync: bool) -> int:
    """Delete `paths` (already gone is fine), then fsync `log_dir`; return the number of fsyncs made."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if fsync:
        fsync_dir(log_dir)
        return 1
    return 0
