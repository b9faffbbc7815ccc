"""The state log's write path: queued appends, the layout of a group commit, writing it, storage faults.

`SegmentLog` (persister.state_log) queues appends as `Pending` and takes them a group at a time;
`plan_group` lays a group out over the active segment and the segments it rolls to, and
`write_plan`, in a worker thread, writes and fsyncs it: a segment is fsync'd before the next one gets
any bytes, so after a crash only the last segment can have a torn tail.

Storage faults. When a write, fsync or segment creation fails, `write_plan` cuts the group back (the
segments it created are removed, the active segment is truncated to where the group began, fsync'd)
and raises `WriteFault` naming the file, the operation and the error; the log then logs it at ERROR
and refuses every later append until it is reopened (as Kafka takes a failed log dir offline). When
the cut-back fails as well, a `failed-write` file records where the acknowledged records end, and the
next open cuts what lies after it (persister.state_log_recovery), so a refused record never reappears;
only when that file cannot be written either may recovery find the refused records whole and keep them.
Everything happens before the group's appends are answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import os
import time

from . import state_log_files
from .state_log_files import segment_file_name

__all__ = ["Pending", "Chunk", "Plan", "WriteFault", "plan_group", "write_plan", "describe_error"]

_logger = logging.getLogger("persister.log")  # one logger for the whole state log
_perf_counter = time.perf_counter


def describe_error(exc: BaseException) -> str:
    """An I/O error as an operator reads it: `ENOSPC (No space left on device)`; other errors as repr."""
    if not isinstance(exc, OSError) or not exc.errno:
        return repr(exc)
    name = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
    return f"{name} ({exc.strerror or os.strerror(exc.errno)})"


class Pending:
    """One queued append: its frames, its waiter (a future, or a callback from `enqueue`) and when it
    was queued. An append whose future is done was abandoned by its cancelled caller; one with a
    callback is never abandoned."""

    __slots__ = ("frames", "nbytes", "future", "callback", "queued_at")

    def __init__(self, frames: list[bytes], future: asyncio.Future | None, callback=None) -> None:
        self.frames = frames
        self.nbytes = len(frames[0]) if len(frames) == 1 else sum(map(len, frames))
        self.future = future
        self.callback = callback
        self.queued_at = _perf_counter()

    def resolve(self, first_offset: int) -> None:
        """Its records are durable from `first_offset` on: answer the waiter."""
        callback = self.callback
        if callback is not None:
            try:
                callback(first_offset, None)
            except Exception:  # a waiter's bug must not keep the rest of its group waiting
                _logger.exception("state log: an append callback failed")
        elif not self.future.done():  # type: ignore[union-attr]
            self.future.set_result(list(range(first_offset, first_offset + len(self.frames))))  # type: ignore[union-attr]

    def fail(self, error: BaseException) -> None:
        """Its group failed (nothing of it stays in the log): tell the waiter why."""
        if self.callback is not None:
            try:
                self.callback(None, error)
            except Exception:  # a waiter's bug must not keep the rest of its group waiting
                _logger.exception("state log: an append callback failed")
        elif not self.future.done():  # type: ignore[union-attr]
            if isinstance(error, asyncio.CancelledError):
                self.future.cancel()  # type: ignore[union-attr]
            else:
                self.future.set_exception(error)  # type: ignore[union-attr]


@dataclasses.dataclass(slots=True)
class Chunk:
    """Bytes of one group commit bound for one segment file."""

    base_offset: int  # of the segment
    parts: list[bytes]
    records: int
    is_new: bool  # the group creates this segment


@dataclasses.dataclass(slots=True)
class Plan:
    """A group commit laid out: its chunks, where the active segment ended before it (base offset,
    path, bytes), the first offset of each append, the end offset after it, records and bytes."""

    chunks: list[Chunk]
    active_base: int
    active_path: str
    active_size_before: int
    first_offsets: list[int]  # per pending append
    end_offset: int
    records: int
    nbytes: int


class WriteFault(Exception):
    """A group commit that failed: the file and operation ("write", "fsync", "create") that failed with
    `cause`; `undo_error` when cutting the group back failed too, then `marked` tells whether the
    `failed-write` file was written (else `marker_error` says why not)."""

    def __init__(self, path: str, operation: str, cause: BaseException) -> None:
        super().__init__(f"{operation} of {path} failed: {describe_error(cause)}")
        self.path = path
        self.operation = operation
        self.cause = cause
        self.undo_error: BaseException | None = None
        self.marked = False
        self.marker_error: BaseException | None = None


def plan_group(group: list[Pending], active: state_log_files.SegmentInfo, segment_bytes: int) -> Plan:
    """Lay the group out over the active segment and the new segments it rolls to (a new one when an
    append would take the current one past `segment_bytes`)."""
    chunks = [Chunk(active.base_offset, [], 0, False)]
    size = active.size_bytes
    start = offset = active.base_offset + active.record_count
    first_offsets = []
    nbytes = 0
    for pending in group:
        if size > 0 and size + pending.nbytes > segment_bytes:
            chunks.append(Chunk(offset, [], 0, True))
            size = 0
        chunk = chunks[-1]
        chunk.parts.extend(pending.frames)
        chunk.records += len(pending.frames)
        size += pending.nbytes
        nbytes += pending.nbytes
        first_offsets.append(offset)
        offset += len(pending.frames)
    return Plan(chunks, active.base_offset, active.path, active.size_bytes, first_offsets, offset, offset - start,
                nbytes)


def write_plan(log_dir: str, handles: state_log_files.FileHandles, plan: Plan, fsync: bool) -> tuple[int, int]:
    """In a worker thread: write the group and make it durable; return (the new active segment's fd
    or -1, fsyncs made). On failure, cut the group back (or leave a `failed-write` file) and raise
    WriteFault."""
    active_fd = handles.active_fd
    fd = active_fd
    path, operation = plan.active_path, "write"
    created: list[tuple[str, int]] = []
    dirty = False
    fsyncs = 0
    try:
        for chunk in plan.chunks:
            if chunk.is_new:
                if dirty and fsync:
                    operation = "fsync"
                    state_log_files.fsync_file(fd)
                    fsyncs += 1
                path, operation = os.path.join(log_dir, segment_file_name(chunk.base_offset)), "create"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
                created.append((path, fd))
                dirty = False
            if chunk.parts:
                operation = "write"
                state_log_files.write_all(fd, b"".join(chunk.parts))
                dirty = True
        if fsync:
            if dirty:
                operation = "fsync"
                state_log_files.fsync_file(fd)
                fsyncs += 1
            if created:
                path, operation = log_dir, "fsync"
                state_log_files.fsync_dir(log_dir)
                fsyncs += 1
    except BaseException as exc:
        fault = WriteFault(path, operation, exc)
        try:
            _undo(log_dir, active_fd, plan.active_size_before, created, fsync)
        except BaseException as undo_exc:
            fault.undo_error = undo_exc
            try:
                state_log_files.write_failed_write(log_dir, plan.active_base, plan.active_size_before, fsync)
                fault.marked = True
            except BaseException as marker_exc:
                fault.marker_error = marker_exc
        raise fault from exc
    for _path, created_fd in created[:-1]:
        os.close(created_fd)
    if created:
        os.close(active_fd)
        return created[-1][1], fsyncs
    return -1, fsyncs


def _undo(log_dir: str, active_fd: int, size: int, created: list[tuple[str, int]], fsync: bool) -> None:
    """Cut a failed group back: remove the segments it created, truncate the active one to `size`."""
    for path, created_fd in created:
        os.close(created_fd)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    os.ftruncate(active_fd, size)
    if fsync:
        state_log_files.fsync_file(active_fd)
        if created:
            state_log_files.fsync_dir(log_dir)
