"""`LogWriter`: the write path of one partition log: the queue of appends, group commit, storage faults.

`TopicLog` assigns each append its offsets and segment position and hands it over as a `PendingAppend`.
One writer task at a time takes everything queued and, in a worker thread, writes it and fsyncs once
(`SegmentWriter.write_group`: concurrent appends share the fsync); then the log publishes the group.
While more than `MAX_QUEUED_BYTES` wait for the disk, appends wait for room (backpressure). An append
placed and queued is answered through an `AppendWait` (awaited: its `AppendResult` once durable).

A storage fault (a write, fsync or file creation that fails) is handled as Kafka handles a failed log
dir: it is logged at ERROR naming the file and the error, and the store's `LogDir` goes offline, so
every later write to any log of the store is refused with KAFKA_STORAGE_ERROR until a restart. The
failed group is cut back (its new segments deleted, the active segment truncated to its published
size, fsync'd); if that fails too, a `failed-write` file records where the acknowledged data ends and
the next open cuts the rest (segment_files). Only then are the group's appends, and every append
queued behind it, answered with KAFKA_STORAGE_ERROR, and the log rolls back what it had assigned to
them (offsets, producer state). So nothing is acknowledged before it is durable, readers of the
running broker never see a refused batch (only published batches are read), and a refused batch does
not come back after a restart either, unless the disk refused the truncation and the `failed-write`
file alike (logged at ERROR: recovery may then find those batches whole and keep them, as it keeps any
whole batch a crash leaves behind).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import Any, Callable, Generator, NamedTuple

from sharegroup.errors import ShareError

from .io_threads import IoThreads
from .log_dir import LogDir, describe_error
from .producer_state import ProducerEntry
from .record_batch import BatchHeader
from .segment_files import FAILED_WRITE_FILE, FileFault, FsyncFn, Segment, SegmentWriter, write_failed_write

__all__ = ["AppendResult", "AppendWait", "LogWriter", "PendingAppend", "MAX_QUEUED_BYTES", "retrieve"]

_logger = logging.getLogger("sharegroup.topics")
MAX_QUEUED_BYTES = 64 * 2**20


class AppendResult(NamedTuple):
    """Answer to one append: the offsets the batches got (the original ones for a duplicate), the
    log-append time (-1: CreateTime topics), the log start offset, and whether it was a duplicate."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


class AppendWait:
    """An append begun (`TopicLog.begin_append`) whose answer may still wait for the disk: awaiting it
    gives the `AppendResult` once durable, or raises the ShareError that refused the append. `answer` is
    the result known already (acks=0, a duplicate); `on_its_way` the future of the write to wait for."""

    __slots__ = ("answer", "on_its_way", "log_append_time_ms")

    def __init__(self, answer: AppendResult | None, on_its_way: asyncio.Future | None = None,
                 log_append_time_ms: int = -1) -> None:
        assert answer is not None or on_its_way is not None
        self.answer = answer
        self.on_its_way = on_its_way
        self.log_append_time_ms = log_append_time_ms

    def __await__(self) -> Generator[Any, None, AppendResult]:
        if self.on_its_way is not None:  # shielded: a cancelled waiter never cancels the shared write
            written: AppendResult = yield from asyncio.shield(self.on_its_way).__await__()
            if self.answer is None:
                return written._replace(log_append_time_ms=self.log_append_time_ms)
        assert self.answer is not None
        return self.answer


class PendingAppend:
    """Batches of one append on their way to the disk, and the producer state they replaced (restored
    if they are refused: producer id -> its entry before, None when it had none)."""

    __slots__ = ("data", "segment_base", "position", "headers", "control_types", "new_segment", "future",
                 "producers_before")

    def __init__(self, data: bytearray, segment_base: int, position: int, headers: list[BatchHeader],
                 control_types: list[int | None], new_segment: bool, future: asyncio.Future,
                 producers_before: dict[int, ProducerEntry | None]) -> None:
        self.data = data
        self.segment_base = segment_base
        self.position = position
        self.headers = headers
        self.control_types = control_types
        self.new_segment = new_segment
        self.future = future
        self.producers_before = producers_before

    @property
    def last_offset(self) -> int:
        return self.headers[-1].last_offset


def retrieve(future: asyncio.Future) -> None:
    """Done callback for futures nobody awaits (acks=0): mark a failure as seen."""
    if not future.cancelled():
        future.exception()


Publish = Callable[[list[PendingAppend], list[Segment]], None]
Refuse = Callable[[list[PendingAppend]], None]


class LogWriter:
    """The queue and writer task of one partition log. `publish(group, new_segments)` is called on the
    loop once a group is durable; `refuse(appends)` once appends are refused (before they are answered),
    so that the log rolls back what it assigned to them. `last_segment()` is the last published segment."""

    def __init__(self, directory: str, fsync: FsyncFn | None, executor: Executor | None, log_dir: LogDir,
                 publish: Publish, refuse: Refuse, last_segment: Callable[[], Segment | None],
                 io: IoThreads | None = None) -> None:
        self.directory = directory
        self.files = SegmentWriter(directory, fsync)  # touched only by the writer's worker thread
        self._fsync = fsync
        self._executor = executor
        self._io = io  # the group commits' threads (None: `executor`'s, through run_in_executor)
        self._log_dir = log_dir
        self._publish = publish
        self._refuse = refuse
        self._last_segment = last_segment
        self.queue: list[PendingAppend] = []
        self.inflight: list[PendingAppend] = []
        self.queued_bytes = 0
        self.task: asyncio.Task | None = None
        self.group_commits = 0
        self.fsyncs = 0

    def submit(self, pending: PendingAppend) -> None:
        """Queue an append (its offsets and position already assigned) and make sure the writer runs."""
        self.queue.append(pending)
        self.queued_bytes += len(pending.data)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._write_loop())

    async def wait_for_room(self) -> None:
        """Wait while `MAX_QUEUED_BYTES` or more are on their way to the disk (backpressure)."""
        while self.queued_bytes >= MAX_QUEUED_BYTES and (self.queue or self.inflight):
            last = (self.queue or self.inflight)[-1]
            await asyncio.wait([last.future])

    def pending_future(self, offset: int) -> asyncio.Future | None:
        """The future of the append holding `offset` while it is on its way to the disk (None once it is
        answered): what a duplicate of it waits for."""
        for pending in (*self.inflight, *self.queue):
            if pending.last_offset >= offset:
                return pending.future
        return None

    async def drain(self) -> None:
        """Wait until everything queued has been written (or refused)."""
        while self.task is not None:
            await asyncio.wait([self.task])

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.queue:
                if self._log_dir.offline:  # another log of the store failed meanwhile
                    self.inflight, self.queue = self.queue, []
                    await self._fail(None)
                    return
                group, self.queue = self.queue, []
                self.inflight = group
                writes: list[tuple[bool, int, int, bytes | bytearray]] = [
                    (p.new_segment, p.segment_base, p.position, p.data) for p in group]
                try:
                    if self._io is not None:
                        new_segments, fsyncs = await self._io.run(self.files.write_group, writes)
                    else:
                        new_segments, fsyncs = await loop.run_in_executor(self._executor, self.files.write_group,
                                                                          writes)
                except BaseException as exc:  # noqa: BLE001 - every failure fails the appends, never the loop
                    await self._fail(exc)
                    return
                self.fsyncs += fsyncs
                self.group_commits += 1
                self.queued_bytes -= sum(len(p.data) for p in group)
                self._publish(group, new_segments)
        finally:
            self.inflight = []
            self.task = None

    async def _fail(self, exc: BaseException | None) -> None:
        """A group could not be written (`exc`), or the log dir went offline before it was (None): take
        the log dir offline, cut the written bytes back, then refuse the group and everything queued."""
        if exc is None:
            self._refuse_all(self._log_dir.offline_error())
            return
        if isinstance(exc, FileFault):
            error = self._log_dir.fault(exc.path, exc.operation, exc.cause)
        else:
            error = self._log_dir.fault(self.directory, "write", exc)
        if not isinstance(exc, asyncio.CancelledError):
            await self._cut_back()
        self._refuse_all(error)
        if isinstance(exc, asyncio.CancelledError):
            # The loop is shutting down: the worker thread may still be writing, so cutting bytes back
            # now could race it. Reopening treats whatever it left like a crash would.
            raise exc

    async def _cut_back(self) -> None:
        """Undo a failed group on disk, or else leave a `failed-write` file for the next open."""
        loop = asyncio.get_running_loop()
        published = self._last_segment()
        try:
            await loop.run_in_executor(self._executor, self.files.undo, published)
            return
        except Exception as exc:  # noqa: BLE001 - any failure: fall back to the failed-write file
            self._log_dir.fault(published.path if published else self.directory, "truncate", exc)
        if published is not None:
            base, size = published.base_offset, published.size_bytes
        else:
            base, size = self.inflight[0].segment_base, 0
        path = f"{self.directory}/{FAILED_WRITE_FILE}"
        try:
            await loop.run_in_executor(self._executor, write_failed_write, self.directory, base, size, self._fsync)
        except Exception as exc:  # noqa: BLE001
            self._log_dir.fault(path, "write", exc)
            _logger.error("%s: the refused batches could not be cut back nor marked (%s): a restart may find "
                          "them whole and keep them", self.directory, describe_error(exc))
        else:
            _logger.error("%s: wrote %s: the next open cuts everything after byte %d of segment %d (the "
                          "refused batches)", self.directory, path, size, base)

    def _refuse_all(self, error: ShareError) -> None:
        refused, self.queue = [*self.inflight, *self.queue], []
        self.queued_bytes = 0
        self._refuse(refused)
        for pending in refused:
            if not pending.future.done():
                pending.future.set_exception(error)
