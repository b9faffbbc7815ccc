"""`TopicLog`: the durable log of one topic-partition (Kafka's UnifiedLog on a single replica).

Layout of a partition directory (`DIR/topics/<topic>-<partition>/`)::

    00000000000000000000.log    segment files named by base offset: RecordBatch v2 batches exactly as
    00000000000000004711.log    produced, base offsets assigned (segment_files)
    log-start-offset            the log start offset once DeleteRecords or retention moved it

Append path. `append` checks the batches (record_batch: framing, magic, CRC, Kafka's client-batch
rules) and the producer sequences (producer_state) and, with nothing awaited in between, assigns
offsets by rewriting each batch's base offset, picks the segment (a new one when the active one would
grow past `segment.bytes`), and queues the bytes. A refused append changes nothing. The writer
(log_writer) writes everything queued with `pwrite` and fsyncs once (group commit: concurrent appends
share the fsync); a segment is fsync'd before the next one gets bytes, and a new segment's directory
entry before anything in it is acknowledged. Only then are the batches *published*: indexed, counted
in the log end offset (the high watermark of this single replica), handed to readers and announced to
the listener. acks=-1/1 appends return after publication; acks=0 appends return once queued. While
more than `MAX_QUEUED_BYTES` wait for the disk, further appends wait for room (backpressure).

Storage faults (log_writer, log_dir): a failed write, fsync or read takes the store's log dir offline
(ERROR logged with the file and the error); the failed appends and every later write are refused with
KAFKA_STORAGE_ERROR until a restart, the refused bytes are cut back (or marked for the next open to
cut), and the offsets and producer state assigned to refused appends are rolled back. The published
log stays readable.

Reads are synchronous (the `PartitionLogs` protocol): whole published batches, found by binary search
in the batch index, read with one `pread` per segment touched, handed out as memoryviews of the stored
bytes (base offset included).

Runtime: append O(bytes) (CRC) + O(batches); read O(log batches + segments) to find the start, plus
the batches returned; offset look-up by timestamp O(log segments + log batches).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
from concurrent.futures import Executor
from typing import Callable, NoReturn

from sharegroup.errors import Errors, ShareError
from sharegroup.logs import LogBatch, LogRead

from .io_threads import IoThreads
from .log_config import LogConfig
from .log_dir import LogDir
from .log_writer import MAX_QUEUED_BYTES, AppendResult, AppendWait, LogWriter, PendingAppend, retrieve
from .producer_state import ProducerEntry, ProducerStateManager, TransactionIndex
from .record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    build_control_batch,
    check_timestamps,
    parse_header,
    set_base_offset,
    stamp_log_append_time,
    validate_produce_batches,
)
from .segment_files import (
    CorruptLogError,
    FsyncFn,
    Segment,
    cut_failed_write,
    fsync_dir,
    list_segment_bases,
    read_offset_file,
    scan_segment,
    segment_file_name,
    write_file_atomically,
)

__all__ = ["TopicLog", "AppendResult", "AppendWait", "LOG_START_FILE", "MAX_QUEUED_BYTES"]

_logger = logging.getLogger(__name__)
LOG_START_FILE = "log-start-offset"
PARTITION_LEADER_EPOCH = 0  # the one leader epoch of this single node's partitions


class TopicLog:
    """The durable log of one topic-partition. Open with `TopicLog.open` (blocking: call it from a
    worker thread); use `append`, `write_transaction_marker`, `delete_records`, `enforce_retention` and
    `close` from the event loop, and `read`, `offset_for` and the offset properties from anywhere on it."""

    def __init__(self, directory: str, config: LogConfig, fsync: FsyncFn | None,
                 on_publish: Callable[[int], None] | None = None, executor: Executor | None = None,
                 log_dir: LogDir | None = None, io: IoThreads | None = None) -> None:
        self.directory = directory
        self._executor = executor  # the worker threads for file I/O (None: the loop's default)
        # Online or offline: shared by every log of a store (a storage fault in one stops them all).
        self.log_dir = log_dir if log_dir is not None else LogDir(directory)
        self.config = config
        self._fsync = fsync
        self.on_publish = on_publish
        self._segments: list[Segment] = []
        self._segment_bases: list[int] = []
        self._start = 0
        self._end = 0
        self._producers = ProducerStateManager()
        self._txns = TransactionIndex()
        # Assignment state: where the next append goes (ahead of the published state while writes wait).
        self._next_offset = 0
        self._assign_base: int | None = None  # None: the next append starts a new segment
        self._assign_size = 0
        self._writer = LogWriter(directory, fsync, executor, self.log_dir, self._publish, self._refused,
                                 lambda: self._segments[-1] if self._segments else None, io)
        self._start_lock = asyncio.Lock()
        self._closed = False
        self.truncated_bytes = 0
        self.expired_producers = 0
        self.appended_batches = 0
        self.appended_bytes = 0

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str, config: LogConfig, *, fsync: FsyncFn | None,
             on_publish: Callable[[int], None] | None = None, executor: Executor | None = None,
             log_dir: LogDir | None = None, io: IoThreads | None = None) -> TopicLog:
        """Open (creating if needed) the log in `directory`: cut what a `failed-write` file says was
        refused, read the log start, delete segments wholly below it, scan every other segment (index,
        producer state, transactions), truncate a torn tail. Raises CorruptLogError for a bad batch that
        is not a torn tail. Blocking."""
        os.makedirs(directory, exist_ok=True)
        log = cls(directory, config, fsync, on_publish, executor, log_dir, io)
        try:
            log._recover()
        except BaseException:
            log._close_files()
            raise
        log._check()
        return log

    def _recover(self) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(".tmp"):
                os.unlink(os.path.join(self.directory, name))
        refused = cut_failed_write(self.directory, self._fsync)
        if refused is not None:
            self.truncated_bytes += refused
            _logger.warning("%s: cut %d bytes of writes refused before the restart (a failed-write file was left "
                            "when they could not be cut back)", self.directory, refused)
        bases = list_segment_bases(self.directory)
        start = read_offset_file(os.path.join(self.directory, LOG_START_FILE))
        if start is None:
            start = bases[0] if bases else 0
        elif bases and bases[0] > start:
            start = bases[0]
        while len(bases) > 1 and bases[1] <= start:  # wholly below the start: a deletion cut short
            os.unlink(os.path.join(self.directory, segment_file_name(bases.pop(0))))
        expected: int | None = None
        for i, base in enumerate(bases):
            if expected is not None and base != expected:
                raise CorruptLogError(os.path.join(self.directory, segment_file_name(base)), 0,
                                      f"segment starts at offset {base}, the previous one ends at {expected}")
            file_size = os.path.getsize(os.path.join(self.directory, segment_file_name(base)))
            result = scan_segment(self.directory, base, is_last=i == len(bases) - 1, on_batch=self._replay)
            segment = result.segment
            self._segments.append(segment)
            self._segment_bases.append(base)
            if result.truncated_at is not None:
                cut = file_size - result.truncated_at
                self.truncated_bytes += cut
                _logger.warning("%s: cut a torn tail of %d bytes at byte %d (a write that was never acknowledged)",
                                segment.path, cut, result.truncated_at)
                if self._fsync is not None:
                    self._fsync(segment.fd)
            expected = segment.next_offset
        end = expected if expected is not None else start
        if start > end:
            raise CorruptLogError(os.path.join(self.directory, LOG_START_FILE), 0,
                                  f"log start offset {start} is past the end of the log {end}")
        self._start = start
        self._end = self._next_offset = end
        self._producers.truncate_head(start)
        self._txns.truncate_head(start)
        if self._segments:
            last = self._segments[-1]
            self._assign_base, self._assign_size = last.base_offset, last.size_bytes
            self._writer.files.segment = last

    def _replay(self, header: BatchHeader, control_type: int | None) -> None:
        self._producers.replay(header)
        self._txns.on_batch(header, control_type)

    # -- offsets -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        """One past the last published (durable) offset: Kafka's high watermark on a single replica."""
        return self._end

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest open transaction (never below the log start), else the log end."""
        first = self._txns.first_unstable_offset()
        return self._end if first is None else min(self._end, max(first, self._start))

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def closed(self) -> bool:
        """Closed: queued appends were written and the files closed (no append is taken any more)."""
        return self._closed and self._writer.task is None and all(s.fd < 0 for s in self._segments)

    def active_producers(self) -> list[tuple[int, ProducerEntry, int]]:
        """(producer id, its entry, the first offset of its open transaction or -1) of every producer."""
        open_txns = self._txns.open_transactions()
        return [(pid, entry, open_txns.get(pid, -1)) for pid, entry in self._producers.items()]

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.entry(producer_id)

    def stats(self) -> dict[str, int]:
        """Counters and sizes of this log (for metrics): what it appended, group commits and fsyncs
        made, bytes cut on open (torn tails, refused writes), segments, bytes held, producers tracked."""
        writer = self._writer
        return {"appended_batches": self.appended_batches, "appended_bytes": self.appended_bytes,
                "group_commits": writer.group_commits, "fsyncs": writer.fsyncs, "truncated_bytes": self.truncated_bytes,
                "segments": len(self._segments), "size_bytes": self.size_bytes, "producers": len(self._producers),
                "expired_producers": self.expired_producers,
                "queued_bytes": writer.queued_bytes}

    @property
    def group_commits(self) -> int:
        return self._writer.group_commits

    @property
    def fsyncs(self) -> int:
        return self._writer.fsyncs

    # -- appending -----------------------------------------------------------------------------

    async def append(self, records: bytes | bytearray | memoryview, *, now_ms: int, acks: int = -1,
                     max_batches: int | None = 1) -> AppendResult:
        """`begin_append`, then wait for its answer (durable, for acks -1 and 1)."""
        return await (await self.begin_append(records, now_ms=now_ms, acks=acks, max_batches=max_batches))

    async def begin_append(self, records: bytes | bytearray | memoryview, *, now_ms: int, acks: int = -1,
                           max_batches: int | None = 1) -> AppendWait:
        """The ordered part of an append: check the batches, assign their offsets and queue them for the
        disk; returns the `AppendWait` to await for the answer (durable, for acks -1 and 1). An append
        begun after this one is placed after it, whether or not this one's answer was awaited (a
        connection pipelining its Produce requests relies on that).

        Append a Produce request's records for this partition: one RecordBatch v2, as Kafka's Produce
        carries (`max_batches`: how many the caller allows; None for any number). `now_ms` is the broker's
        clock, which the record timestamps must lie near (the topic's `message.timestamp.before.max.ms` /
        `.after.max.ms`; else RecordValidationError, INVALID_TIMESTAMP); on a LogAppendTime topic it is
        instead stamped on each batch (`stamp_log_append_time`) and answered as `log_append_time_ms`.

        Raises ShareError with Kafka's code, changing nothing, for bad batches (record_batch), a request
        larger than `segment.bytes` (RECORD_LIST_TOO_LARGE), producer epoch/sequence faults
        (producer_state), a non-transactional batch of a producer with a transaction open here
        (INVALID_TXN_STATE) or a failed disk (KAFKA_STORAGE_ERROR). A duplicate of one of a producer's last
        five batches appends nothing and answers with the original offsets (`duplicate=True`)."""
        await self._writer.wait_for_room()
        self._check_writable()
        headers = validate_produce_batches(records, max_message_bytes=self.config.max_message_bytes,
                                           max_batches=max_batches)
        log_append_time = self.config.log_append_time  # read once: an alter may change it meanwhile
        if log_append_time:  # the broker's time replaces the producer's: Kafka checks no bounds then
            headers = [h._replace(attributes=h.attributes | TIMESTAMP_TYPE_BIT, max_timestamp=now_ms) for h in headers]
        else:
            check_timestamps(records, headers, now_ms=now_ms,
                             before_max_ms=self.config.message_timestamp_before_max_ms,
                             after_max_ms=self.config.message_timestamp_after_max_ms)
        size = len(records)
        if size > self.config.segment_bytes:
            raise ShareError(Errors.RECORD_LIST_TOO_LARGE,
                             f"{size} bytes of records is more than segment.bytes {self.config.segment_bytes}")
        bases = []
        offset = self._next_offset
        for h in headers:
            bases.append(offset)
            offset += h.last_offset_delta + 1
        for h in headers:  # Kafka's rule: a producer with an open transaction here writes only transactionally
            if h.producer_id >= 0 and not h.is_transactional and self._txns.is_open(h.producer_id):
                raise ShareError(Errors.INVALID_TXN_STATE, f"producer {h.producer_id} has an open transaction in "
                                 "this partition: a non-transactional batch is refused")
        duplicate, updates = self._producers.check(headers, bases)
        if duplicate is not None:
            answer = AppendResult(duplicate.first_offset, duplicate.last_offset, -1, self._start, True)
            on_its_way = None if acks == 0 or duplicate.last_offset < self._end else \
                self._writer.pending_future(duplicate.last_offset)
            return AppendWait(answer, on_its_way)
        data = bytearray(records)
        pos = 0
        assigned = []
        for h, base in zip(headers, bases):
            set_base_offset(data, pos, base, PARTITION_LEADER_EPOCH)
            h = h._replace(base_offset=base, partition_leader_epoch=PARTITION_LEADER_EPOCH)
            assigned.append(stamp_log_append_time(data, pos, h, now_ms) if log_append_time else h)
            pos += h.size_bytes
        append_time_ms = now_ms if log_append_time else -1
        before = {pid: self._producers.entry(pid) for pid in updates}
        pending = self._enqueue(data, assigned, [None] * len(assigned), before)
        self._producers.apply(updates)
        pending.future.add_done_callback(retrieve)  # a refusal nobody awaits (acks=0, a closed connection) is seen
        if acks == 0:
            return AppendWait(AppendResult(bases[0], assigned[-1].last_offset, append_time_ms, self._start))
        return AppendWait(None, pending.future, append_time_ms)

    async def write_transaction_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                                       coordinator_epoch: int = 0, timestamp_ms: int = 0) -> AppendResult:
        """Write a commit or abort marker (a control batch) ending `producer_id`'s transaction, as the
        transaction coordinator's WriteTxnMarkers does. An epoch older than the producer's current one
        is refused with INVALID_PRODUCER_EPOCH."""
        await self._writer.wait_for_room()
        self._check_writable()
        current = self._producers.entry(producer_id)
        if current is not None and producer_epoch < current.epoch:
            raise ShareError(Errors.INVALID_PRODUCER_EPOCH,
                             f"marker epoch {producer_epoch} is older than producer {producer_id}'s {current.epoch}")
        marker_type = CONTROL_COMMIT if commit else CONTROL_ABORT
        data = bytearray(build_control_batch(marker_type, producer_id=producer_id, producer_epoch=producer_epoch,
                                             coordinator_epoch=coordinator_epoch, timestamp_ms=timestamp_ms))
        base = self._next_offset
        set_base_offset(data, 0, base, PARTITION_LEADER_EPOCH)
        header = parse_header(data)
        before = {producer_id: current.copy() if current is not None else None}
        pending = self._enqueue(data, [header], [marker_type], before)
        self._producers.replay(header)
        return await asyncio.shield(pending.future)

    def _check_writable(self) -> None:
        if self._closed:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, f"{self.directory}: the log is closed")
        self.log_dir.check_writable()

    def _enqueue(self, data: bytearray, headers: list[BatchHeader], control_types: list[int | None],
                 producers_before: dict[int, ProducerEntry | None]) -> PendingAppend:
        """Place assigned batches in a segment and queue them for the writer. No await: offsets,
        segment positions and queue order are decided together."""
        size = len(data)
        new_segment = self._assign_base is None or (
            self._assign_size > 0 and self._assign_size + size > self.config.segment_bytes)
        if new_segment:
            self._assign_base = self._next_offset
            self._assign_size = 0
        assert self._assign_base is not None
        pending = PendingAppend(data, self._assign_base, self._assign_size, headers, control_types, new_segment,
                                asyncio.get_running_loop().create_future(), producers_before)
        self._assign_size += size
        self._next_offset = headers[-1].last_offset + 1
        self._writer.submit(pending)
        return pending

    def _publish(self, group: list[PendingAppend], new_segments: list[Segment]) -> None:
        """Event loop: make a durable group visible, answer its appends, tell the listener."""
        for segment in new_segments:
            self._segments.append(segment)
            self._segment_bases.append(segment.base_offset)
        for pending in group:
            i = bisect.bisect_right(self._segment_bases, pending.segment_base) - 1
            segment = self._segments[i]
            pos = pending.position
            for header, ctype in zip(pending.headers, pending.control_types):
                segment.index.add(header, pos)
                self._txns.on_batch(header, ctype)
                pos += header.size_bytes
            segment.size_bytes = pos
            self._end = pending.last_offset + 1
            self.appended_batches += len(pending.headers)
            self.appended_bytes += len(pending.data)
            if not pending.future.done():
                pending.future.set_result(AppendResult(pending.headers[0].base_offset, pending.last_offset, -1,
                                                       self._start))
            pending.data = bytearray()  # the bytes are on disk now
        if self.on_publish is not None:
            self.on_publish(self._end)

    def _refused(self, refused: list[PendingAppend]) -> None:
        """Appends the writer refused (in queue order): roll back what they were assigned, so that
        nothing of them stays: the next offset and segment position, the producer state."""
        for pending in reversed(refused):
            for producer_id, entry in pending.producers_before.items():
                self._producers.restore(producer_id, entry)
        self._next_offset = self._end
        if self._segments:
            last = self._segments[-1]
            self._assign_base, self._assign_size = last.base_offset, last.size_bytes
        else:
            self._assign_base, self._assign_size = None, 0

    def _storage_fault(self, path: str, operation: str, exc: OSError) -> NoReturn:
        raise self.log_dir.fault(path, operation, exc) from exc

    # -- reading -------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, *, read_committed: bool = False) -> LogRead:
        """Whole published batches from the one holding `fetch_offset`, up to about `max_bytes` (at least
        one batch when there is any), stopping at the last stable offset for read_committed."""
        if fetch_offset < self._start or fetch_offset > self._end:
            raise ShareError(Errors.OFFSET_OUT_OF_RANGE,
                             f"fetch offset {fetch_offset} outside the log [{self._start}, {self._end}]")
        lso = self.last_stable_offset
        limit = lso if read_committed else self._end
        out: list[LogBatch] = []
        if fetch_offset < limit and self._segments:
            taken = 0
            si = max(0, bisect.bisect_right(self._segment_bases, fetch_offset) - 1)
            first_segment = True
            while si < len(self._segments):
                idx = self._segments[si].index
                i = idx.find(fetch_offset) if first_segment else 0
                first_segment = False
                j = i
                n = len(idx)
                stop = False
                chosen = -1  # the first batch taken from this segment
                while j < n:
                    if idx.bases[j] >= limit:
                        stop = True
                        break
                    if idx.lasts[j] >= fetch_offset:
                        if (out or chosen >= 0) and taken >= max_bytes:
                            stop = True
                            break
                        if chosen < 0:
                            chosen = j
                        taken += idx.sizes[j]
                    j += 1
                if chosen >= 0:
                    i = chosen
                    try:
                        data = self._segments[si].read_range(i, j)
                    except OSError as exc:
                        self._storage_fault(self._segments[si].path, "read", exc)
                    base_pos = idx.positions[i]
                    for k in range(i, j):
                        p = idx.positions[k] - base_pos
                        out.append(idx.log_batch(k, data[p : p + idx.sizes[k]]))
                if stop:
                    break
                si += 1
        aborted = ()
        if read_committed and out:
            aborted = self._txns.aborted_between(fetch_offset, out[-1].last_offset)
        return LogRead(tuple(out), aborted, self._start, self._end, lso)

    def offset_for(self, spec: object) -> int:
        """'earliest' → log start, 'latest' → log end, a timestamp in ms → the base offset of the first
        batch whose max timestamp is at or after it (never below the log start), or the log end."""
        if spec == "earliest":
            return self._start
        if spec == "latest":
            return self._end
        if isinstance(spec, bool) or not isinstance(spec, int):
            raise ValueError(f"an offset look-up takes 'earliest', 'latest' or a timestamp in ms, got {spec!r}")
        for k, segment in enumerate(self._segments):
            idx = segment.index
            if not len(idx) or idx.running_max_ts[-1] < spec:
                continue
            lo = idx.find(self._start) if k == 0 else 0
            if lo and idx.running_max_ts[lo - 1] >= spec:
                # Batches below the log start reach the timestamp: their running maximum says nothing
                # about the batches from the start on, so look at those one by one (rare).
                hits = (i for i in range(lo, len(idx)) if idx.max_ts[i] >= spec)
                i = next(hits, -1)
                if i < 0:
                    continue
            else:
                i = bisect.bisect_left(idx.running_max_ts, spec, lo)
            return max(idx.bases[i], self._start)
        return self._end

    # -- moving the log start ------------------------------------------------------------------

    async def delete_records(self, before_offset: int) -> int:
        """Kafka's DeleteRecords: move the log start up to `before_offset` (-1: the high watermark) and
        delete the segments wholly below it. Returns the new log start offset."""
        self._check_writable()
        if before_offset == -1:
            before_offset = self._end
        if isinstance(before_offset, bool) or not isinstance(before_offset, int) or not 0 <= before_offset <= self._end:
            raise ShareError(Errors.OFFSET_OUT_OF_RANGE,
                             f"offset {before_offset} outside the log [{self._start}, {self._end}]")
        async with self._start_lock:
            if before_offset > self._start:
                keep = len(self._segments) - 1
                drop = 0
                while drop < keep and self._segment_bases[drop + 1] <= before_offset:
                    drop += 1
                await self._move_start(before_offset, drop)
        return self._start

    async def enforce_retention(self, now_ms: int) -> int | None:
        """Delete the oldest whole segments past `retention.ms` (by their largest timestamp) or beyond
        `retention.bytes`, as Kafka's retention does, and move the log start to the first kept offset.
        The active segment goes too when it is expired and nothing is on its way to it; the next
        append then starts a new segment. Producers idle for `producer.id.expiration.ms` are forgotten
        on the way. Returns the new log start, or None when nothing moved (or the log dir is offline)."""
        if self.log_dir.offline:
            return None
        cfg = self.config
        self.expired_producers += self._producers.remove_expired(now_ms, cfg.producer_id_expiration_ms,
                                                                 self._txns.open_transactions())
        async with self._start_lock:
            segs = self._segments
            count = len(segs)
            # The last segment may go only when it holds data and nothing is queued or being written.
            if count and (not len(segs[-1].index) or self._next_offset != self._end):
                count -= 1
            drop = 0
            if cfg.retention_ms >= 0:
                while drop < count and now_ms - segs[drop].max_timestamp > cfg.retention_ms:
                    drop += 1
            if cfg.retention_bytes >= 0:
                excess = self.size_bytes - cfg.retention_bytes
                by_size = 0
                while by_size < count and excess - segs[by_size].size_bytes >= 0:
                    excess -= segs[by_size].size_bytes
                    by_size += 1
                drop = max(drop, by_size)
            if not drop:
                return None
            if drop < len(segs):
                new_start = self._segment_bases[drop]
            else:  # the active segment goes too: later appends (even during the awaits below) start afresh
                new_start = self._end
                self._assign_base = None
                self._assign_size = 0
            new_start = max(new_start, self._start)
            await self._move_start(new_start, drop)
            return self._start

    async def _move_start(self, new_start: int, drop: int) -> None:
        """Persist the new log start, then drop the first `drop` segments (crash in between: reopening
        deletes the segments wholly below the persisted start)."""
        loop = asyncio.get_running_loop()
        path = os.path.join(self.directory, LOG_START_FILE)
        self._check_writable()
        try:
            await loop.run_in_executor(self._executor, write_file_atomically, path, b"%d\n" % new_start, self._fsync)
        except OSError as exc:
            self._storage_fault(path, "write", exc)
        self._start = max(self._start, new_start)
        self._producers.truncate_head(self._start)
        self._txns.truncate_head(self._start)
        gone = self._segments[:drop]
        if not gone:
            return
        del self._segments[:drop], self._segment_bases[:drop]

        def remove() -> None:
            for segment in gone:
                segment.close()
                os.unlink(segment.path)
            if self._fsync is not None:
                fsync_dir(self.directory, self._fsync)

        try:
            await loop.run_in_executor(self._executor, remove)
        except OSError as exc:  # the new start is durable: the next open deletes what is left below it
            self._storage_fault(self.directory, "delete", exc)
        self._check()

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for queued appends to be written, then close the files."""
        self._closed = True
        await self._writer.drain()
        self._close_files()

    def _close_files(self) -> None:
        for segment in self._segments:
            segment.close()
        self._writer.files.close()

    def _check(self, deep: bool = False) -> None:
        """Invariants of the published state: O(segments), or O(batches) with `deep` (tests)."""
        assert 0 <= self._start <= self.last_stable_offset <= self._end <= self._next_offset, (
            self._start, self.last_stable_offset, self._end, self._next_offset)
        assert self._segment_bases == [s.base_offset for s in self._segments]
        for prev, seg in zip(self._segments, self._segments[1:]):
            assert prev.next_offset == seg.base_offset, (prev.path, prev.next_offset, seg.base_offset)
        if self._segments:
            assert self._segments[0].base_offset <= self._start, (self._segments[0].base_offset, self._start)
            assert self._segments[-1].next_offset == self._end or self._next_offset > self._end
        if not deep:
            return
        for seg in self._segments:
            seg.check()
