"""`SegmentLog`: the durable RecordLog: segment files written by group commit, opened by recovery.

The state log is four modules: `persister.state_log_files` (the directory layout and every file operation),
`persister.state_log_recovery` (the scan that judges every frame on open, `read_log`),
`persister.state_log_writer` (laying out, writing and cutting back a group commit) and this one, the log
itself and its queue of appends.

Offsets are implicit: a record's offset is its segment's base offset plus its index in the segment, so
the file names plus one scan give every offset. A segment holds whole appends; the next append rolls a
new segment when it would take the active one past `segment_bytes` (a single append larger than that
gets a segment of its own size). The log start offset may lie inside the first segment (records below
it are skipped on read); `delete_below` moves it and deletes the whole segments below it.

Group commit: `append` encodes its records, queues them and waits. One writer task at a time takes
everything queued (up to `max_group_bytes`), writes it in a worker thread with as few `write` calls as
possible and fsyncs once, then resolves every waiting append with its offsets. While one group is being
fsync'd the next one accumulates, so under load one fsync carries many writes. At most
`max_pending_appends` appends may be queued or in flight; further appends wait for room (backpressure).
An append's future resolves only after its bytes (and, for a new segment, the directory entry) are
durable.

Storage faults, as Kafka handles a failed log dir: when a group fails (a write, fsync or segment
creation error), the error is logged at ERROR naming the file and the errno, the group is cut back
(segment truncated to where the group began, segments it created removed; or, if that fails too, a
`failed-write` file tells the next open what to cut), every append in it fails with LogWriteError, and
the log goes offline: it refuses every later append and prune with LogWriteError until it is reopened
(the broker restarts). The share coordinator answers such a write NOT_COORDINATOR, as Kafka's answers
KAFKA_STORAGE_ERROR from its state topic (persister.append_pipeline); reads of the coordinator's
in-memory state go on.

Files are only touched from worker threads (`run_in_executor`), except by `read_all` and `read_rows`,
which the coordinator calls synchronously while it replays on open (in a worker thread of its own when
it opened the log). `enqueue` is `append` without a coroutine for the coordinator's write path (the
`BulkRecordLog` protocol of `persister.state_log_api`): the frames come encoded and a callback, not a future,
hears the outcome, so a write costs no task and cannot be abandoned.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import time
import weakref
from typing import Iterator, Sequence

from prometheus_client import CollectorRegistry

from . import state_log_files
from .frame_rows import KeyTable
from .state_log_api import LogEntry, LogWriteError
from .state_log_files import LOCK_FILE, START_OFFSET_FILE, LogLockedError, SegmentInfo, segment_file_name
from . import state_log_recovery
from .state_log_recovery import open_and_recover, read_log
from .state_log_metrics import HistogramTally, metrics_for
from .state_log_writer import Pending, Plan, WriteFault, describe_error, plan_group, write_plan
from .state_records import ShareRecord, StateKey, encode_record

__all__ = [
    "SegmentLog",
    "SegmentInfo",
    "LogWriteError",
    "LogLockedError",
    "read_log",
    "segment_file_name",
    "SEGMENT_BYTES_MIN",
    "START_OFFSET_FILE",
    "LOCK_FILE",
]

_logger = logging.getLogger("persister.log")  # the state log's logger; its name predates this module's

SEGMENT_BYTES_MIN = 1024
DEFAULT_SEGMENT_BYTES = 100 * 2**20
DEFAULT_MAX_PENDING_APPENDS = 16_384
DEFAULT_MAX_GROUP_BYTES = 8 * 2**20


class SegmentLog:
    """A RecordLog in segment files in one directory, with group commit and crash recovery.

    Open it with `await SegmentLog.open(log_dir, ...)`:
    - `fsync` (default True): make every group commit durable before acknowledging it; False skips the
      fsyncs (tests, benchmarks of everything but the disk); a process crash still loses nothing
      acknowledged, a machine crash may.
    - `segment_bytes` (>= 1024, default 100 MiB): roll to a new segment when an append would pass it.
    - `max_pending_appends` (default 16384): appends queued or in flight before `append` waits.
    - `max_group_bytes` (default 8 MiB): bytes written by one group commit (at least one append).
    - `metrics_registry`: the prometheus CollectorRegistry for persister.state_log_metrics (default its REGISTRY).

    `fsync_count`, `group_commits`, `appended_records` and `appended_bytes` count what this log did.
    """

    def __init__(self, *, _token: object = None, **state) -> None:
        if _token is not _OPEN_TOKEN:
            raise TypeError("use `await SegmentLog.open(log_dir, ...)`")
        self._dir: str = state["log_dir"]
        self._fsync: bool = state["fsync"]
        self._segment_bytes: int = state["segment_bytes"]
        self._max_pending: int = state["max_pending_appends"]
        self._max_group_bytes: int = state["max_group_bytes"]
        self._handles: state_log_files.FileHandles = state["handles"]
        self._segments: list[SegmentInfo] = state["segments"]
        self._start_offset: int = state["start_offset"]
        self._finalizer = weakref.finalize(self, self._handles.close)
        self._queue: collections.deque[Pending] = collections.deque()
        self._pending = 0  # appends queued or in the group being written
        self._space_waiters: collections.deque[asyncio.Future] = collections.deque()
        self._writer: asyncio.Task | None = None
        self._prune_lock = asyncio.Lock()
        self._failure: str | None = None  # the storage fault that took the log offline
        self._closing = False
        self._closed = False
        self.fsync_count = 0
        self.group_commits = 0
        self.appended_records = 0
        self.appended_bytes = 0
        self.recovery_seconds: float = state["recovery_seconds"]
        label = {"log": self._dir}
        metrics = metrics_for(state["metrics_registry"])
        self._m_latency = HistogramTally(metrics.write_latency_seconds.labels(**label))
        self._m_group = metrics.group_commit_records.labels(**label)
        self._m_fsyncs = metrics.fsyncs.labels(**label)
        self._m_bytes = metrics.appended_bytes.labels(**label)
        self._m_failed = metrics.failed_group_commits.labels(**label)
        self._m_prune = metrics.prune_offset.labels(**label)
        metrics.recovery_seconds.labels(stage="scan", **label).observe(self.recovery_seconds)
        metrics.recovered_records.labels(**label).set(self.end_offset - self._start_offset)
        self._m_prune.set(self._start_offset)
        self._m_fsyncs.inc(state["recovery_fsyncs"])
        self.fsync_count += state["recovery_fsyncs"]

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        log_dir: str | os.PathLike,
        *,
        fsync: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_pending_appends: int = DEFAULT_MAX_PENDING_APPENDS,
        max_group_bytes: int = DEFAULT_MAX_GROUP_BYTES,
        metrics_registry: CollectorRegistry | None = None,
    ) -> SegmentLog:
        """Open (creating if needed) and recover the log in `log_dir`; the scan runs in a worker thread.

        Raises CorruptLogError for a corrupt record that is not a torn tail (nothing is changed then),
        LogLockedError when another SegmentLog has the directory open, ValueError for bad options.
        """
        if not isinstance(fsync, bool):
            raise ValueError(f"fsync must be a bool, not {fsync!r}")
        _check_int("segment_bytes", segment_bytes, SEGMENT_BYTES_MIN)
        _check_int("max_pending_appends", max_pending_appends, 1)
        _check_int("max_group_bytes", max_group_bytes, 1)
        if metrics_registry is not None and not isinstance(metrics_registry, CollectorRegistry):
            raise ValueError("metrics_registry must be a prometheus_client CollectorRegistry")
        loop = asyncio.get_running_loop()
        opening = loop.run_in_executor(None, functools.partial(open_and_recover, os.fspath(log_dir), fsync))
        try:
            state = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(lambda f: f.cancelled() or f.exception() or f.result()["handles"].close())
            raise
        return cls(
            _token=_OPEN_TOKEN,
            fsync=fsync,
            segment_bytes=segment_bytes,
            max_pending_appends=max_pending_appends,
            max_group_bytes=max_group_bytes,
            metrics_registry=metrics_registry,
            **state,
        )

    # -- properties --------------------------------------------------------------------------------

    @property
    def log_dir(self) -> str:
        return self._dir

    @property
    def fsync(self) -> bool:
        return self._fsync

    @property
    def segment_bytes(self) -> int:
        return self._segment_bytes

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """One past the last durable record: appends still queued or being written are not counted."""
        last = self._segments[-1]
        return last.base_offset + last.record_count

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def segments(self) -> list[SegmentInfo]:
        """The segment files held, in offset order (the last is the active one)."""
        return list(self._segments)

    def size_bytes(self) -> int:
        """Bytes of the segment files held (including records below the start offset in the first)."""
        return sum(segment.size_bytes for segment in self._segments)

    def __len__(self) -> int:
        """Records from the start offset to the end offset."""
        return self.end_offset - self._start_offset

    # -- appending (group commit) ------------------------------------------------------------------

    async def append(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Append the entries in order and return their offsets once they are durable.

        Every entry is encoded before anything is queued, so a bad one (ValueError, TypeError) appends
        nothing. The append then joins the next group commit; it fails with LogWriteError when that
        group fails (nothing of it stays in the log). After a crash, an append that was never
        acknowledged may be found whole, missing or, when it held several records, cut after any of them.
        """
        self._check_writable()
        frames = [encode_record(key, record) for key, record in entries]
        if not frames:
            return []
        if self._pending >= self._max_pending:
            await self.wait_for_room()
        future = asyncio.get_running_loop().create_future()
        self._queue_pending(Pending(frames, future))
        return await future

    append.enqueue_equivalent = True  # `enqueue` does what `append` does (the coordinator checks this)

    async def wait_for_room(self) -> None:
        """Wait until the bounded queue has room for one more append (backpressure)."""
        loop = asyncio.get_running_loop()
        while self._pending >= self._max_pending:
            waiter = loop.create_future()
            self._space_waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_space_waiter()  # pass the room this waiter was given on
                raise
            self._check_writable()

    def enqueue(self, entries: Sequence[tuple[StateKey, ShareRecord]], frames: list[bytes], callback) -> bool:
        """`append` without the coroutine, for the share coordinator's write path: queue `frames` (the
        encoded `entries`, at least one) and call `callback(first_offset, None)` once they are durable,
        or `callback(None, error)` once their group failed (nothing of it stays in the log). Exactly one
        call, always later, from the loop; it cannot be cancelled. Returns False, queueing nothing, when
        the queue is full (await `wait_for_room()` and try again); raises LogWriteError, queueing
        nothing, when the log does not accept appends."""
        if self._closing or self._failure is not None:
            self._check_writable()
        if self._pending >= self._max_pending:
            return False
        assert frames and len(frames) == len(entries)
        self._queue_pending(Pending(frames, None, callback))
        return True

    def _queue_pending(self, pending: Pending) -> None:
        self._pending += 1
        self._queue.append(pending)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(
                self._write_groups(), name=f"segment-log-writer {self._dir}"
            )

    def _check_writable(self) -> None:
        if self._closing:
            raise LogWriteError(f"the state log {self._dir} is closed")
        if self._failure is not None:
            raise self._offline_error()

    def _offline_error(self) -> LogWriteError:
        return LogWriteError(
            f"the state log {self._dir} is offline after a storage error ({self._failure}); it refuses "
            "writes until it is reopened (the broker restarts)"
        )

    def _storage_fault(self, path: str, operation: str, exc: BaseException) -> None:
        """Log a storage fault at ERROR with the file and the error, and take the log offline."""
        text = describe_error(exc)
        if self._failure is None:
            self._failure = f"{operation} of {path} failed: {text}"
            _logger.error("state log: %s of %s failed: %s; the state log %s is offline: it refuses writes until "
                          "the broker restarts", operation, path, text, self._dir)
        else:
            _logger.error("state log: %s of %s failed: %s (the state log %s is already offline)",
                          operation, path, text, self._dir)

    def _wake_space_waiter(self) -> None:
        while self._space_waiters:
            waiter = self._space_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _finish(self, pending: Pending) -> None:
        """An append left the queue (completed, failed or abandoned): make room for a waiting one."""
        self._pending -= 1
        if self._space_waiters:
            self._wake_space_waiter()

    async def _write_groups(self) -> None:
        """The writer task: write and fsync queued appends group by group until the queue is empty."""
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                group = self._take_group()
                if not group:
                    continue
                if self._failure is not None:
                    self._fail_group(group, self._offline_error(), count_failure=False)
                    continue
                plan = plan_group(group, self._segments[-1], self._segment_bytes)
                work = loop.run_in_executor(None, write_plan, self._dir, self._handles, plan, self._fsync)
                try:
                    await asyncio.shield(work)
                except asyncio.CancelledError:
                    # The thread keeps writing whatever happens here: wait for it so that the segment
                    # sizes stay in step with the files, then let the cancellation through.
                    while not work.done():
                        try:
                            await asyncio.shield(work)
                        except asyncio.CancelledError:
                            pass
                    self._complete(group, plan, work)
                    raise
                except BaseException:
                    pass  # looked at in _complete
                self._complete(group, plan, work)
        finally:
            self._writer = None
            while self._queue:  # only when cancelled: the callers are being cancelled too
                pending = self._queue.popleft()
                pending.fail(asyncio.CancelledError())
                self._finish(pending)

    def _take_group(self) -> list[Pending]:
        group: list[Pending] = []
        nbytes = 0
        queue, max_group_bytes = self._queue, self._max_group_bytes
        while queue:
            pending = queue[0]
            if pending.future is not None and pending.future.done():  # its caller was cancelled while it waited
                queue.popleft()
                self._finish(pending)
                continue
            if group and nbytes + pending.nbytes > max_group_bytes:
                break
            queue.popleft()
            group.append(pending)
            nbytes += pending.nbytes
        return group

    def _complete(self, group: list[Pending], plan: Plan, work: asyncio.Future) -> None:
        """Back on the loop: account for the group and resolve (or fail) every append in it."""
        error = work.exception() if not work.cancelled() else asyncio.CancelledError()
        if error is not None:
            if isinstance(error, WriteFault):
                self._storage_fault(error.path, error.operation, error.cause)
                if error.undo_error is not None:
                    self._undo_failed(error, plan)
                failure = LogWriteError(f"state log append failed: {error}")
                failure.__cause__ = error.cause
            else:  # cancelled before its thread ran, or a bug
                self._storage_fault(self._dir, "write", error)
                failure = LogWriteError(f"state log append failed: {error!r}")
                failure.__cause__ = error
            self._fail_group(group, failure)
            return
        new_fd, fsyncs = work.result()
        active = self._segments[-1]
        head = plan.chunks[0]
        self._segments[-1] = active._replace(
            size_bytes=active.size_bytes + sum(map(len, head.parts)), record_count=active.record_count + head.records
        )
        for chunk in plan.chunks[1:]:
            path = os.path.join(self._dir, segment_file_name(chunk.base_offset))
            self._segments.append(SegmentInfo(chunk.base_offset, path, sum(map(len, chunk.parts)), chunk.records))
        if new_fd >= 0:
            self._handles.active_fd = new_fd
        assert self.end_offset == plan.end_offset, (self.end_offset, plan.end_offset)
        self.fsync_count += fsyncs
        self.group_commits += 1
        self.appended_records += plan.records
        self.appended_bytes += plan.nbytes
        self._m_fsyncs.inc(fsyncs)
        self._m_group.observe(plan.records)
        self._m_bytes.inc(plan.nbytes)
        now = time.perf_counter()
        latency = self._m_latency
        add_latency = latency.add
        for pending, first in zip(group, plan.first_offsets):
            add_latency(now - pending.queued_at)
            pending.resolve(first)
            self._finish(pending)
        latency.flush()

    def _undo_failed(self, fault: WriteFault, plan: Plan) -> None:
        """The failed group could not be cut back: say so, and what the next open will do about it."""
        self._storage_fault(plan.active_path, "truncate", fault.undo_error)  # type: ignore[arg-type]
        path = os.path.join(self._dir, state_log_files.FAILED_WRITE_FILE)
        if fault.marked:
            _logger.error("state log %s: wrote %s: the next open cuts everything after byte %d of %s (the "
                          "refused records)", self._dir, path, plan.active_size_before, plan.active_path)
        else:
            self._storage_fault(path, "write", fault.marker_error)  # type: ignore[arg-type]
            _logger.error("state log %s: the refused records could not be cut back nor marked: a restart may find "
                          "them whole and keep them", self._dir)

    def _fail_group(self, group: list[Pending], error: LogWriteError, *, count_failure: bool = True) -> None:
        if count_failure:
            self._m_failed.inc()
        for pending in group:
            pending.fail(error)
            self._finish(pending)

    # -- reading -----------------------------------------------------------------------------------

    def read_all(self) -> Iterator[LogEntry]:
        """Every record from the start offset to the end offset as of the call, in offset order.

        Synchronous file reads (the coordinator replays on open); do not prune while iterating.
        """
        return state_log_recovery.read_entries(list(self._segments), self._start_offset)

    def read_rows(self, keys: KeyTable) -> Iterator[tuple[int, list]]:
        """`read_all` as batches of decoded rows (first offset, rows), for the coordinator's replay on
        open: the same records, decoded in bulk by the frame codec instead of one LogEntry each, their
        keys collected in `keys`. Files are read as the iterator advances; do not prune meanwhile."""
        return state_log_recovery.read_rows(list(self._segments), self._start_offset, keys)

    # -- pruning -----------------------------------------------------------------------------------

    async def delete_below(self, offset: int) -> int:
        """Move the start offset up to `offset` (clamped to the durable end) and delete every segment
        wholly below it (never the active one); return the new start offset.

        The start offset is made durable first (an atomically replaced file, fsync'd with its
        directory); only then are segments deleted, so a crash in between leaves files that the next
        open deletes.
        """
        self._check_writable()
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, not {offset!r}")
        async with self._prune_lock:
            self._check_writable()
            target = min(offset, self.end_offset)
            if target <= self._start_offset:
                return self._start_offset
            doomed = 0
            while doomed + 1 < len(self._segments) and self._segments[doomed + 1].base_offset <= target:
                doomed += 1
            loop = asyncio.get_running_loop()
            try:
                fsyncs = await loop.run_in_executor(
                    None, state_log_files.write_start_offset, self._dir, target, self._fsync
                )
            except OSError as exc:
                self._storage_fault(os.fsdecode(exc.filename or os.path.join(self._dir, START_OFFSET_FILE)), "write",
                                    exc)
                raise LogWriteError(f"pruning the state log {self._dir} failed: {describe_error(exc)}") from exc
            self.fsync_count += fsyncs
            self._m_fsyncs.inc(fsyncs)
            self._start_offset = target
            self._m_prune.set(target)
            paths = [segment.path for segment in self._segments[:doomed]]
            del self._segments[:doomed]
            if paths:
                try:
                    fsyncs = await loop.run_in_executor(
                        None, state_log_files.delete_files, self._dir, paths, self._fsync
                    )
                except OSError as exc:  # the start offset is durable: the next open deletes them
                    self._storage_fault(os.fsdecode(exc.filename or self._dir), "delete", exc)
                else:
                    self.fsync_count += fsyncs
                    self._m_fsyncs.inc(fsyncs)
            return target

    # -- closing -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Refuse new appends, let queued ones finish, and release the files and the directory lock."""
        if self._closed:
            return
        self._closing = True
        while self._space_waiters:
            waiter = self._space_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # it re-checks and sees the log closing
        if self._writer is not None:
            await asyncio.wait([self._writer])  # drains the queue; never raises
        async with self._prune_lock:
            self._closed = True
            self._finalizer()

    def _check(self) -> None:
        """Assert the invariants of the segment list (tests call it)."""
        assert self._segments, "there is always an active segment"
        for previous, segment in zip(self._segments, self._segments[1:]):
            assert segment.base_offset == previous.base_offset + previous.record_count, (previous, segment)
        first = self._segments[0]
        assert first.base_offset <= self._start_offset <= self.end_offset, (first, self._start_offset)
        assert len(self._segments) == 1 or self._segments[1].base_offset > self._start_offset
        assert self._pending >= len(self._queue) >= 0


_OPEN_TOKEN = object()


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")

