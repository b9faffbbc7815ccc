"""`sharegroup demo`: the main job on an embedded default (SPEC §8), then the audit of its state log.

Layer 4 (an edge): it wires everything together. Producers append record batches to an in-memory
topic log of several partitions; one share group of simulated consumers, members of a
`GroupCoordinator`, acquires records from the `SharePartition` leaders and accepts most of them,
releases some (transient failures), rejects malformed ones, and keeps failing on "poison" records
until those reach the delivery count limit and are archived; now and then a consumer crashes, so its
acquisition locks expire and its records are redelivered to the others. Every share-partition's state
is durable in a `LocalPersister` (checksummed, fsync'd segment files with group commit) in
`data_dir`. At the end: a summary table, a check that the durable state, replayed from disk, equals
what every leader holds, and the Spark audit of the state log (`sharegroup.audit`).

Time is simulated: every task runs on one `ManualClock` and time jumps ahead whenever all of them
wait (see `VirtualTime`), so a run is fast, lock expiry costs no waiting, and a seed always produces
the same run: the same counts and the same outcome for every record (only wall-clock figures vary).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import enum
import fcntl
import heapq
import inspect
import logging
import os
import random
import shutil
import sys
import time
import uuid
from typing import Callable, Coroutine, NamedTuple, Sequence, TextIO

from .clock import ManualClock
from .config import ShareGroupConfig
from .coordinator import GroupConfig, GroupCoordinator, InMemoryTopics
from .errors import Errors, ShareError
from .metrics import SharePartitionMetrics, serve_metrics
from .types import AcknowledgeType, AcknowledgementBatch, AcquiredRecords, FetchedBatch, StateBatch

__all__ = [
    "ConsumerBehaviour",
    "DemoError",
    "DemoSummary",
    "LeaderState",
    "Outcome",
    "TopicLog",
    "VirtualTime",
    "check_durable_state",
    "run_demo",
]

log = logging.getLogger(__name__)

GROUP_ID = "demo-group"
TOPIC_NAME = "demo-orders"
DATA_DIR_MARKER = ".sharegroup-demo"  # written into a data directory the demo created or wiped

# The simulated workload, in simulated milliseconds. Wake-ups are rounded up to TICK_MS, so consumers
# that finish at about the same time acknowledge together and their writes share a group commit.
TICK_MS = 20
PRODUCE_INTERVAL_MS = 20
PRODUCER_BATCH_MAX_RECORDS = 16
MAX_POLL_RECORDS = 500  # the consumer's max.poll.records
POLL_OVERHEAD_MS = 4
RECORD_PROCESSING_US = 100
IDLE_POLL_MS = 20  # after a share fetch that found nothing; doubled while fetches keep finding nothing,
IDLE_POLL_MAX_MS = 500  # up to this (the consumer's fetch.max.wait.ms)
RESTART_DELAY_MS = 3_000  # a crashed consumer comes back as a new member after this
TIMER_PERIOD_MS = 1_000  # the timer service checks member sessions this often
SEGMENT_BYTES = 64 << 10  # small segments, so the audit reads a log of several files
RECORDS_PER_CHECKPOINT = 100  # share.coordinator.snapshot.update.records.per.snapshot (Kafka: 500)


@dataclasses.dataclass(frozen=True)
class ConsumerBehaviour:
    """How the simulated consumers treat records; decisions are a function of the seed and the record.

    - `release_rate`: a delivery fails transiently and the consumer releases the record (redelivered);
    - `malformed_rate`: records a consumer rejects at once (archived, reason "rejected");
    - `poison_rate`: records whose processing always fails: released on every delivery, so they reach
      the delivery count limit and are archived ("delivery_limit");
    - `poison_crash_rate`: the chance that a delivery of a poison record crashes the consumer instead
      (then the lock expires; on the last allowed delivery the record is archived, "lock_expiry");
    - `crash_rate`: the chance that a consumer crashes while it processes what a poll returned.
    """

    release_rate: float = 0.02
    malformed_rate: float = 0.002
    poison_rate: float = 0.001
    poison_crash_rate: float = 0.1
    crash_rate: float = 0.002

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{f.name} must be a number in [0, 1], got {value!r}")
        if self.malformed_rate + self.poison_rate > 1.0:
            raise ValueError("malformed_rate + poison_rate must not exceed 1")


class DemoError(Exception):
    """The demo cannot run as asked (a data directory it must not touch, a port in use, ...)."""


class Outcome(enum.IntEnum):
    """Where each produced record ended, as the demo's ledger records it."""

    IN_FLIGHT = 0  # not delivery-complete (yet)
    ACCEPTED = 1
    REJECTED = 2  # archived: a consumer rejected it
    DELIVERY_LIMIT = 3  # archived: released on its last allowed delivery
    LOCK_EXPIRY = 4  # archived: its lock expired on its last allowed delivery


_NORMAL, _POISON, _MALFORMED = 0, 1, 2


# -- the topic log -----------------------------------------------------------------------------------


class TopicLog:
    """The log of one topic-partition, in memory: producer batch headers with offsets and timestamps.

    Offsets are dense from the log start offset. `fetch` answers like a Kafka fetch, with whole batches
    starting at the one that contains the offset; `offset_for` answers the look-ups a share-partition
    leader needs to resolve `share.auto.offset.reset`. Batch timestamps must not decrease (the demo
    stamps them with its clock), so a timestamp look-up is a binary search. Fetch and look-up are
    O(log batches) plus the batches returned.
    """

    def __init__(self, log_start_offset: int = 0) -> None:
        if isinstance(log_start_offset, bool) or not isinstance(log_start_offset, int) or log_start_offset < 0:
            raise ValueError(f"log_start_offset must be an int >= 0, got {log_start_offset!r}")
        self._bases: list[int] = []
        self._batches: list[FetchedBatch] = []
        self._timestamps: list[int] = []
        self._start = log_start_offset
        self._end = log_start_offset

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get (one past the last record)."""
        return self._end

    @property
    def batch_count(self) -> int:
        return len(self._batches)

    def append(self, record_count: int, timestamp_ms: int, *, producer_id: int = -1) -> FetchedBatch:
        """Append one producer batch of `record_count` records; returns its header."""
        if isinstance(record_count, bool) or not isinstance(record_count, int) or record_count < 1:
            raise ValueError(f"a batch holds at least one record, got {record_count!r}")
        if self._timestamps and timestamp_ms < self._timestamps[-1]:
            raise ValueError(f"batch timestamps must not decrease: {timestamp_ms} < {self._timestamps[-1]}")
        batch = FetchedBatch(self._end, self._end + record_count - 1, producer_id)
        self._bases.append(batch.base_offset)
        self._batches.append(batch)
        self._timestamps.append(timestamp_ms)
        self._end += record_count
        return batch

    def fetch(self, offset: int, max_records: int = MAX_POLL_RECORDS) -> list[FetchedBatch]:
        """Batch headers from the batch containing `offset` on, about `max_records` records' worth
        (always whole batches, at least one when there is any); [] at the log end.

        Raises ShareError(OFFSET_OUT_OF_RANGE) for an offset outside [log start, log end].
        """
        if offset < self._start or offset > self._end:
            raise ShareError(Errors.OFFSET_OUT_OF_RANGE,
                             f"fetch offset {offset} outside the log [{self._start}, {self._end}]")
        if offset == self._end:
            return []
        i = bisect.bisect_right(self._bases, offset) - 1
        out: list[FetchedBatch] = []
        taken = 0
        batches = self._batches
        while i < len(batches) and (not out or taken < max_records):
            batch = batches[i]
            out.append(batch)
            taken += batch.last_offset - max(batch.base_offset, offset) + 1
            i += 1
        return out

    def offset_for(self, spec: object) -> int:
        """"earliest" -> log start, "latest" -> log end, a timestamp in ms -> the first offset of the
        first batch stamped at or after it (the log end when there is none)."""
        if spec == "earliest":
            return self._start
        if spec == "latest":
            return self._end
        if isinstance(spec, bool) or not isinstance(spec, int):
            raise ValueError(f"an offset look-up takes 'earliest', 'latest' or a timestamp in ms, got {spec!r}")
        i = bisect.bisect_left(self._timestamps, spec)
        return self._bases[i] if i < len(self._bases) else self._end


# -- simulated time ----------------------------------------------------------------------------------


class Phase(enum.IntEnum):
    """What a task does when it wakes; at one instant the phases run in this order."""

    PRODUCE = 0
    IO = 1  # acknowledgements, heartbeats, lock expiry: everything that writes
    ACQUIRE = 2


class VirtualTime:
    """Runs cooperating asyncio tasks on a ManualClock: once every task waits, time jumps ahead.

    Tasks started with `spawn` wait with `sleep`/`sleep_until`; real awaits (a durable write) keep the
    clock still, so a write takes no simulated time. `run` wakes the tasks due next, by phase: at one
    instant all due tasks of the lowest phase wake together, in rank order, and the next phase wakes only
    once they all wait again. Acquisitions therefore never race a write in flight, which makes a run a
    function of its seed, while the writes of one phase still share group commits. Wake-ups are rounded
    up to `tick_ms` from the clock's start.
    """

    def __init__(self, clock: ManualClock, *, tick_ms: int = TICK_MS) -> None:
        if tick_ms < 1:
            raise ValueError("tick_ms must be >= 1")
        self.clock = clock
        self._origin_ms = clock.now_ms()
        self._tick_ms = tick_ms
        self._heap: list[tuple[int, int, int, int, asyncio.Future]] = []
        self._seq = 0
        self._ranks: dict[asyncio.Task, int] = {}
        self._live = 0
        self._waiting = 0
        self._settled = asyncio.Event()
        self._failure: BaseException | None = None

    @property
    def elapsed_ms(self) -> int:
        return self.clock.now_ms() - self._origin_ms

    def spawn(self, coro: Coroutine, *, rank: int, name: str) -> asyncio.Task:
        """Start a task that takes part in simulated time; `rank` orders it among tasks due together."""
        self._live += 1
        task = asyncio.get_running_loop().create_task(self._guard(coro), name=name)
        self._ranks[task] = rank
        return task

    async def _guard(self, coro: Coroutine) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # stop the run: `run` raises it
            if self._failure is None:
                self._failure = exc
            self._settled.set()
        finally:
            self._live -= 1
            self._ranks.pop(asyncio.current_task(), None)
            self._maybe_settled()

    async def sleep(self, ms: int, phase: Phase = Phase.IO) -> None:
        """Wait `ms` simulated milliseconds (0: the given phase of this instant)."""
        await self.sleep_until(self.clock.now_ms() + max(0, int(ms)), phase)

    async def sleep_until(self, wake_ms: int, phase: Phase = Phase.IO) -> None:
        now = self.clock.now_ms()
        ticks = -(-(max(wake_ms, now) - self._origin_ms) // self._tick_ms)
        wake_ms = max(now, self._origin_ms + ticks * self._tick_ms)
        task = asyncio.current_task()
        rank = self._ranks.get(task)
        if rank is None:
            raise RuntimeError("VirtualTime.sleep is only for tasks started with VirtualTime.spawn")
        future = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (wake_ms, int(phase), rank, self._seq, future))
        self._waiting += 1
        self._maybe_settled()
        try:
            await future
        finally:
            if not future.done():  # cancelled while asleep: it no longer waits
                future.cancel()
                self._waiting -= 1

    def _maybe_settled(self) -> None:
        if self._waiting >= self._live:
            self._settled.set()

    async def run(self, on_settled: Callable[[], None]) -> None:
        """Drive the spawned tasks until all have finished; `on_settled` runs whenever they all wait
        (before time moves on). Raises the first exception a task raised."""
        while True:
            await self._settled.wait()
            self._settled.clear()
            if self._failure is not None:
                raise self._failure
            if self._waiting < self._live:  # a stale wake-up: someone still runs
                continue
            on_settled()
            if self._live == 0:
                return
            self._wake_next()

    def _wake_next(self) -> None:
        heap = self._heap
        while heap and heap[0][4].done():
            heapq.heappop(heap)
        if not heap:
            raise RuntimeError("every task waits but none has a wake-up time")
        wake_ms, phase = heap[0][0], heap[0][1]
        now = self.clock.now_ms()
        if wake_ms > now:
            self.clock.advance(wake_ms - now)
        while heap and heap[0][0] == wake_ms and heap[0][1] == phase:
            future = heapq.heappop(heap)[4]
            if not future.done():
                future.set_result(None)
                self._waiting -= 1
        self._maybe_settled()

    async def cancel_all(self) -> None:
        tasks = [t for t in self._ranks if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- deterministic choices -----------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1
_SALT_KIND, _SALT_RELEASE, _SALT_POISON_CRASH, _SALT_CRASH, _SALT_MEMBER, _SALT_PRODUCER = range(1, 7)


def _mix64(*parts: int) -> int:
    """A 64-bit hash of small integers (splitmix64 steps): the demo's decisions depend only on it."""
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = ((h ^ (part & _MASK64)) * 0xBF58476D1CE4E5B9) & _MASK64
        h ^= h >> 31
        h = (h * 0x94D049BB133111EB) & _MASK64
        h ^= h >> 29
    return h


def _threshold(rate: float) -> int:
    return min(int(rate * 2.0**64), 1 << 64)


# -- results ---------------------------------------------------------------------------------------------


class LeaderState(NamedTuple):
    """What one share-partition leader held at the end of the run."""

    start_offset: int
    state_batches: list[StateBatch]
    delivery_complete_count: int
    log_end_offset: int


@dataclasses.dataclass
class DemoSummary:
    """Everything the demo counted; `lines()` renders the closing table, `exit_code` the verdict."""

    data_dir: str
    group_id: str
    topic_id: uuid.UUID
    partitions: int
    consumers: int
    seed: int
    tracker: str
    delivery_count_limit: int
    produced: int = 0
    producer_batches: int = 0
    poison_records: int = 0
    malformed_records: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    lock_expired: int = 0
    released_on_leave: int = 0
    archived_delivery_limit: int = 0
    archived_lock_expiry: int = 0
    crashes: int = 0
    polls: int = 0
    acknowledgement_errors: int = 0
    in_flight: int = 0
    stopped_early: bool = False
    wall_seconds: float = 0.0
    simulated_seconds: float = 0.0
    durable_writes: int = 0
    group_commits: int = 0
    fsyncs: int = 0
    state_log_bytes: int = 0
    segments: int = 0
    durable_state_problems: list[str] = dataclasses.field(default_factory=list)
    leader_states: dict[int, LeaderState] = dataclasses.field(default_factory=dict)
    outcomes: dict[int, bytes] = dataclasses.field(default_factory=dict)
    poison: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    metrics_url: str | None = None
    audit: object | None = None  # sharegroup.audit.AuditResult when the audit ran
    audit_error: str | None = None

    @property
    def archived(self) -> int:
        return self.rejected + self.archived_delivery_limit + self.archived_lock_expiry

    @property
    def delivery_complete(self) -> int:
        return self.accepted + self.archived

    @property
    def throughput_records_per_s(self) -> float:
        """Deliveries (records handed to consumers, every attempt) per wall-clock second."""
        return self.deliveries / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def writes_per_fsync(self) -> float:
        return self.durable_writes / self.fsyncs if self.fsyncs else 0.0

    @property
    def exit_code(self) -> int:
        """0: all good; 1: the audit found violations, or the durable state disagrees with the leaders;
        2: the audit could not run (environment)."""
        if self.audit_error is not None:
            return 2
        if self.durable_state_problems:
            return 1
        if self.audit is not None and not getattr(self.audit, "ok", False):
            return 1
        return 0

    def lines(self) -> list[str]:
        n = "{:,}".format
        rows: list[tuple[str, str, str]] = [
            ("records produced", n(self.produced),
             f"{n(self.producer_batches)} producer batches on {self.partitions} partitions"),
            ("deliveries", n(self.deliveries), "records handed to consumers, every attempt counted"),
            ("  accepted", n(self.accepted), ""),
            ("  released", n(self.released), "transient failures and poison records, redelivered"),
            ("  rejected", n(self.rejected), "malformed records"),
            ("  lock expired", n(self.lock_expired), f"held by consumers that crashed ({n(self.crashes)} crashes)"),
        ]
        if self.released_on_leave:
            rows.append(("  released on leave", n(self.released_on_leave), "members whose session ended"))
        rows += [
            ("redeliveries", n(self.redeliveries), "deliveries with a delivery count above 1"),
            ("archived", n(self.archived), f"delivery count limit {self.delivery_count_limit}"),
            ("  rejected", n(self.rejected), ""),
            ("  delivery limit", n(self.archived_delivery_limit),
             f"released on the last delivery ({n(self.poison_records)} poison records produced)"),
            ("  lock expiry at limit", n(self.archived_lock_expiry), "crashed on the last delivery"),
            ("in flight at the end", n(self.in_flight),
             "stopped by --duration" if self.stopped_early else "every record accepted or archived"),
            ("throughput", f"{n(round(self.throughput_records_per_s))} records/s",
             f"{self.wall_seconds:.2f} s wall, {self.simulated_seconds:.1f} s simulated"),
            ("durable writes", n(self.durable_writes),
             f"state-log records in {n(self.segments)} segments, {self.state_log_bytes / 2**20:.1f} MiB"),
            ("fsyncs", n(self.fsyncs), f"{self.writes_per_fsync:.1f} durable writes per fsync (group commit)"),
            ("durable state", "ok" if not self.durable_state_problems else "MISMATCH",
             "replayed from disk, equals every share-partition leader" if not self.durable_state_problems
             else f"{len(self.durable_state_problems)} problems"),
        ]
        width = max(len(r[0]) for r in rows) + 2
        vwidth = max(len(r[1]) for r in rows)
        out = ["", "Summary"]
        out += [f"  {label:<{width}}{value:>{vwidth}}   {note}".rstrip() for label, value, note in rows]
        out += [f"    ! {p}" for p in self.durable_state_problems[:10]]
        return out


# -- the durable-state check -------------------------------------------------------------------------


def _normalized(start_offset: int, batches: Sequence[StateBatch]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """A share-partition state in the form a leader would load it in: runs below the start offset
    dropped, leading terminal runs folded into the start offset, never-delivered available runs
    (state 0, count 0, the same as no state at all) dropped."""
    runs = sorted((b[0], b[1], b[2], b[3]) for b in batches if b[1] >= start_offset)
    runs = [(max(f, start_offset), l, s, c) for f, l, s, c in runs]
    while runs and runs[0][0] == start_offset and runs[0][2] in (2, 4):
        start_offset = runs.pop(0)[1] + 1
    return start_offset, [r for r in runs if not (r[2] == 0 and r[3] == 0)]


async def check_durable_state(data_dir: str | os.PathLike, group_id: str, topic_id: uuid.UUID,
                              leaders: dict[int, LeaderState]) -> list[str]:
    """Open the state log in `data_dir` afresh (the persister's own recovery: scan and replay) and
    compare each share-partition's durable state with what its leader held; returns the differences.

    Equality is up to representation: the persisted start offset may trail the leader's over terminal
    records, and runs of never-delivered records may or may not be persisted.
    """
    from persister import LocalPersister
    from prometheus_client import CollectorRegistry

    problems: list[str] = []
    persister = await LocalPersister.open(data_dir, fsync=False, metrics_registry=CollectorRegistry())
    try:
        for partition, leader in sorted(leaders.items()):
            state = persister.state_of(group_id, topic_id, partition)
            if state is None:
                problems.append(f"partition {partition}: no durable state")
                continue
            durable = _normalized(state.start_offset, state.state_batches)
            held = _normalized(leader.start_offset, leader.state_batches)
            if durable != held:
                problems.append(f"partition {partition}: durable start {durable[0]} runs {durable[1][:4]}... "
                                f"!= leader start {held[0]} runs {held[1][:4]}...")
    finally:
        await persister.close()
    return problems


# -- the data directory ----------------------------------------------------------------------------------


def _prepare_data_dir(data_dir: str, keep: bool) -> str:
    """Make `data_dir` ready; returns "new", "fresh" (an earlier demo's log wiped) or "kept".

    Only the state log's own files (segments, start offset) are ever deleted, and only in a directory
    that the demo created before (it holds the marker file): never someone else's log. Without `keep`,
    any other non-empty directory is refused too, so a mistyped --data does not fill a directory with
    segment files.
    """
    from persister.log import LOCK_FILE, START_OFFSET_FILE, segment_file_name

    if not os.path.exists(data_dir):
        os.makedirs(data_dir)
        _write_marker(data_dir)
        return "new"
    if not os.path.isdir(data_dir):
        raise DemoError(f"--data {data_dir} is not a directory")
    names = os.listdir(data_dir)
    segment_len = len(segment_file_name(0))
    state_files = [name for name in names if (name.endswith(".log") and len(name) == segment_len
                                              and name[:-4].isdigit()) or name == START_OFFSET_FILE]
    if keep:
        return "kept"
    if state_files and DATA_DIR_MARKER not in names:
        raise DemoError(f"{data_dir} holds a state log that the demo did not create; pass --keep to add to it, "
                        "or choose another --data directory")
    if names and DATA_DIR_MARKER not in names:
        raise DemoError(f"{data_dir} is not empty and was not created by the demo; choose another --data directory "
                        "(or pass --keep to write the state log there anyway)")
    lock_path = os.path.join(data_dir, LOCK_FILE)
    if os.path.exists(lock_path):
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DemoError(f"the state log in {data_dir} is open in another process") from None
            for name in state_files:
                os.unlink(os.path.join(data_dir, name))
        finally:
            os.close(fd)
    else:
        for name in state_files:
            os.unlink(os.path.join(data_dir, name))
    _write_marker(data_dir)
    return "fresh" if state_files else "new"


def _write_marker(data_dir: str) -> None:
    with open(os.path.join(data_dir, DATA_DIR_MARKER), "w") as f:
        f.write("This state log was written by `sharegroup demo`; the next demo run wipes it (unless --keep).\n")


# -- progress --------------------------------------------------------------------------------------------


class _Progress:
    """A one-line bar redrawn with \\r on a terminal; a line every few seconds otherwise."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self._total = max(1, total)
        self._stream = stream
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._interval_s = 0.1 if self._tty else 2.0
        self._next_s = 0.0
        self._drawn = False

    def update(self, done: int, text: Callable[[], str], *, force: bool = False) -> None:
        """Redraw when due (or `force`); `text` builds the rest of the line only then."""
        if self._stream is None:
            return
        now = time.monotonic()
        if not force and now < self._next_s:
            return
        self._next_s = now + self._interval_s
        fraction = min(1.0, done / self._total)
        bar = "#" * int(fraction * 20)
        line = f"[{bar:<20}] {fraction:4.0%}  {text()}"
        sys.stdout.flush()  # keep the bar after whatever the demo printed before it
        if self._tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self._stream.write("\r" + line[:width].ljust(width))
            self._drawn = True
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not None and self._tty and self._drawn:
            self._stream.write("\n")
            self._stream.flush()


# -- the share-partition leaders ---------------------------------------------------------------------


class _Held(NamedTuple):
    """Records a member holds without acknowledging them: until their lock expires or it leaves."""

    deadline_ms: int
    member_id: str
    records: list[AcquiredRecords]


class _Demo:
    """One run: the topic, the leaders, the group, the consumers and the ledger."""

    def __init__(self, *, persister, partitions: int, consumers: int, records: int, seed: int,
                 behaviour: ConsumerBehaviour, config: ShareGroupConfig, clock: ManualClock,
                 registry, summary: DemoSummary, deadline_s: float, progress: _Progress) -> None:
        self.persister = persister
        self.partitions = partitions
        self.records = records
        self.seed = seed
        self.behaviour = behaviour
        self.config = config
        self.limit = config.delivery_count_limit
        self.clock = clock
        self.summary = summary
        self.deadline_s = deadline_s
        self.progress = progress
        self.vt = VirtualTime(clock)
        self.topic_id = summary.topic_id
        self.topics = InMemoryTopics()
        self.topics.create_topic(TOPIC_NAME, partitions, self.topic_id)
        self.logs = [TopicLog() for _ in range(partitions)]
        self.kinds = [bytearray() for _ in range(partitions)]
        self.outcomes = [bytearray() for _ in range(partitions)]
        # Assignments are recomputed at once when members change (Kafka waits up to 1 s), so the members
        # that join together all get partitions on their first heartbeat.
        self.group = GroupCoordinator(persister=persister, topics=self.topics, clock=clock,
                                      config=GroupConfig(assignment_interval_ms=0))
        self.leaders: dict[int, object] = {}
        self.leader_metrics = [SharePartitionMetrics(GROUP_ID, TOPIC_NAME, p, registry=registry)
                               for p in range(partitions)]
        self.held: list[list[_Held]] = [[] for _ in range(partitions)]
        self.consumers = [_Consumer(self, i) for i in range(consumers)]
        self.consumers_running = consumers
        self.producer_done = False
        self.stopping = False
        self._release_threshold = _threshold(behaviour.release_rate)
        self._poison_crash_threshold = _threshold(behaviour.poison_crash_rate)
        self.crash_threshold = _threshold(behaviour.crash_rate)

    # -- leaders (the SharePartitionManager's part) --

    async def leader(self, partition: int):
        """The initialized leader of a partition, created on first use (as a broker does on fetch)."""
        from .partition import SharePartition

        sp = self.leaders.get(partition)
        if sp is None:
            log_ = self.logs[partition]
            sp = self.leaders[partition] = SharePartition(
                GROUP_ID, self.topic_id, partition, persister=self.persister, config=self.config,
                clock=self.clock, offset_lookup=log_.offset_for,
            )
        await sp.initialize()
        return sp

    def hold(self, partition: int, member_id: str, records: list[AcquiredRecords], acquired_at_ms: int) -> None:
        """Remember records a member will not acknowledge, to account for them when their locks expire."""
        self.held[partition].append(_Held(acquired_at_ms + self.config.record_lock_duration_ms, member_id, records))

    async def expire_due_locks(self) -> None:
        now = self.clock.now_ms()
        due = [(p, sp) for p, sp in self.leaders.items() if 0 <= sp.next_lock_deadline_ms() <= now]
        results = await asyncio.gather(*(sp.expire_locks() for _p, sp in due))
        for (p, sp), count in zip(due, results):
            keep: list[_Held] = []
            expired = archived = 0
            for held in self.held[p]:
                if held.deadline_ms > now:
                    keep.append(held)
                    continue
                for first, last, dc in held.records:
                    expired += last - first + 1
                    if dc >= self.limit:
                        archived += last - first + 1
                        self._settle(p, first, last, Outcome.LOCK_EXPIRY)
            self.held[p] = keep
            if expired != count:
                raise AssertionError(f"partition {p}: {count} locks expired at {now}, the ledger expected {expired}")
            self.summary.lock_expired += expired
            self.summary.archived_lock_expiry += archived
            self.leader_metrics[p].lock_expired(expired)
            self.leader_metrics[p].archived("lock_expiry", archived)

    async def release_member(self, member_id: str) -> None:
        """A member left or its session ended: release what it still holds (SPEC §4.3)."""
        for p, sp in sorted(self.leaders.items()):
            mine = [h for h in self.held[p] if h.member_id == member_id]
            await sp.release_acquired_records(member_id)
            if not mine:
                continue
            self.held[p] = [h for h in self.held[p] if h.member_id != member_id]
            released = archived = 0
            for held in mine:
                for first, last, dc in held.records:
                    released += last - first + 1
                    if dc >= self.limit:
                        archived += last - first + 1
                        self._settle(p, first, last, Outcome.DELIVERY_LIMIT)
            self.summary.released_on_leave += released
            self.summary.archived_delivery_limit += archived
            self.leader_metrics[p].archived("delivery_limit", archived)

    def _settle(self, partition: int, first: int, last: int, outcome: Outcome) -> None:
        outcomes = self.outcomes[partition]
        for offset in range(first, last + 1):
            if outcomes[offset] != Outcome.IN_FLIGHT:
                raise AssertionError(f"partition {partition} offset {offset}: {Outcome(outcomes[offset]).name} "
                                     f"and then {outcome.name}")
            outcomes[offset] = outcome

    # -- decisions --

    def decide(self, partition: int, offset: int, delivery_count: int) -> int:
        kind = self.kinds[partition][offset]
        if kind == _POISON:
            return AcknowledgeType.RELEASE
        if kind == _MALFORMED:
            return AcknowledgeType.REJECT
        if _mix64(self.seed, _SALT_RELEASE, partition, offset, delivery_count) < self._release_threshold:
            return AcknowledgeType.RELEASE
        return AcknowledgeType.ACCEPT

    def poison_crashes(self, partition: int, records: list[AcquiredRecords]) -> bool:
        kinds = self.kinds[partition]
        for first, last, dc in records:
            for offset in range(first, last + 1):
                if kinds[offset] == _POISON and (
                    _mix64(self.seed, _SALT_POISON_CRASH, partition, offset, dc) < self._poison_crash_threshold
                ):
                    return True
        return False

    def account_acknowledged(self, partition: int, records: list[AcquiredRecords],
                             batches: list[AcknowledgementBatch]) -> None:
        s = self.summary
        counts = self.leader_metrics[partition].acknowledged(batches)
        s.accepted += counts.get(AcknowledgeType.ACCEPT, 0)
        s.released += counts.get(AcknowledgeType.RELEASE, 0)
        s.rejected += counts.get(AcknowledgeType.REJECT, 0)
        self.leader_metrics[partition].archived("rejected", counts.get(AcknowledgeType.REJECT, 0))
        at_limit = 0
        for (first, last, dc), (_f, _l, types) in zip(records, batches):
            for k in range(last - first + 1):
                t = types[0] if len(types) == 1 else types[k]
                if t == AcknowledgeType.ACCEPT:
                    self._settle(partition, first + k, first + k, Outcome.ACCEPTED)
                elif t == AcknowledgeType.REJECT:
                    self._settle(partition, first + k, first + k, Outcome.REJECTED)
                elif t == AcknowledgeType.RELEASE and dc >= self.limit:
                    at_limit += 1
                    self._settle(partition, first + k, first + k, Outcome.DELIVERY_LIMIT)
        s.archived_delivery_limit += at_limit
        self.leader_metrics[partition].archived("delivery_limit", at_limit)

    # -- tasks --

    async def produce(self) -> None:
        rng = random.Random(_mix64(self.seed, _SALT_PRODUCER))
        poison = _threshold(self.behaviour.poison_rate)
        malformed = poison + _threshold(self.behaviour.malformed_rate)
        s = self.summary
        remaining = self.records
        while remaining > 0 and not self.stopping:
            now = self.clock.now_ms()
            for p in range(self.partitions):
                count = min(rng.randint(1, PRODUCER_BATCH_MAX_RECORDS), remaining)
                if count == 0:
                    break
                batch = self.logs[p].append(count, now, producer_id=1000 + p)
                kinds = self.kinds[p]
                for offset in range(batch.base_offset, batch.last_offset + 1):
                    h = _mix64(self.seed, _SALT_KIND, p, offset)
                    kind = _POISON if h < poison else _MALFORMED if h < malformed else _NORMAL
                    kinds.append(kind)
                    if kind == _POISON:
                        s.poison_records += 1
                    elif kind == _MALFORMED:
                        s.malformed_records += 1
                self.outcomes[p].extend(bytes(count))
                self.topics.set_latest_offset(self.topic_id, p, self.logs[p].log_end_offset)
                remaining -= count
                s.produced += count
                s.producer_batches += 1
            if remaining > 0:
                await self.vt.sleep(PRODUCE_INTERVAL_MS, Phase.PRODUCE)
        self.producer_done = True

    async def lock_timer(self) -> None:
        """The timer service: expire locks when they fall due, end the sessions of silent members."""
        next_session_check = self.clock.now_ms() + TIMER_PERIOD_MS
        while True:
            deadlines = [d for d in (sp.next_lock_deadline_ms() for sp in self.leaders.values()) if d >= 0]
            if self.stopping and self.consumers_running == 0 and not deadlines:
                return
            wake = min([next_session_check, *deadlines])
            await self.vt.sleep_until(wake, Phase.IO)
            await self.expire_due_locks()
            now = self.clock.now_ms()
            if now >= next_session_check:
                next_session_check = now + TIMER_PERIOD_MS
                if self.consumers_running:
                    for member_id in await self.group.expire_members():
                        await self.release_member(member_id)

    def on_settled(self) -> None:
        s = self.summary
        for p, sp in self.leaders.items():
            self.leader_metrics[p].set_in_flight(sp.in_flight_count)
        wall_s = time.monotonic() - self.started_s
        if not self.stopping:
            if self.producer_done and s.delivery_complete == s.produced:
                self.stopping = True
            elif wall_s >= self.deadline_s:
                self.stopping = True
                s.stopped_early = True
        self.progress.update(s.delivery_complete, self._progress_text)

    def _progress_text(self) -> str:
        s = self.summary
        return (f"{s.delivery_complete:,}/{self.records:,} done, {s.redeliveries:,} redelivered, "
                f"{s.archived:,} archived, {s.crashes} crashes, {self.vt.elapsed_ms / 1000:.0f} s simulated "
                f"in {time.monotonic() - self.started_s:.1f} s")

    async def run(self) -> None:
        self.started_s = time.monotonic()
        self.vt.spawn(self.produce(), rank=0, name="producer")
        self.vt.spawn(self.lock_timer(), rank=1, name="lock-timer")
        for i, consumer in enumerate(self.consumers):
            self.vt.spawn(consumer.run(), rank=2 + i, name=f"consumer-{i}")
        try:
            await self.vt.run(self.on_settled)
        finally:
            await self.vt.cancel_all()
        s = self.summary
        s.wall_seconds = time.monotonic() - self.started_s
        s.simulated_seconds = self.vt.elapsed_ms / 1000
        self.progress.update(s.delivery_complete, self._progress_text, force=True)
        self.progress.close()
        self._final_checks()

    def _final_checks(self) -> None:
        """The ledger must agree with the leaders: nothing acquired any more, and per partition the
        records not yet delivery-complete are exactly those the leader has not completed."""
        s = self.summary
        for p in range(self.partitions):
            sp = self.leaders.get(p)
            log_end = self.logs[p].log_end_offset
            if sp is None:
                state = LeaderState(0, [], 0, log_end)
            else:
                sp._check()
                batches = sp.state_batches()
                if any(b.delivery_state == 1 for b in batches):
                    raise AssertionError(f"partition {p}: records still acquired at the end: {batches}")
                state = LeaderState(sp.start_offset, batches, sp.delivery_complete_count, log_end)
            s.leader_states[p] = state
            incomplete = log_end - state.start_offset - state.delivery_complete_count
            ledger_incomplete = self.outcomes[p].count(Outcome.IN_FLIGHT)
            if incomplete != ledger_incomplete:
                raise AssertionError(f"partition {p}: the leader has {incomplete} records not delivery-complete, "
                                     f"the ledger {ledger_incomplete}")
            s.in_flight += incomplete
            s.outcomes[p] = bytes(self.outcomes[p])
            s.poison[p] = [o for o, kind in enumerate(self.kinds[p]) if kind == _POISON]
        expected = s.accepted + s.released + s.rejected + s.lock_expired + s.released_on_leave
        if s.deliveries != expected:
            raise AssertionError(f"{s.deliveries} deliveries but {expected} outcomes of deliveries")


class _Consumer:
    """A simulated share consumer: joins the group, polls its assigned partitions, processes, acknowledges."""

    def __init__(self, demo: _Demo, index: int) -> None:
        self.demo = demo
        self.index = index
        self.incarnation = 0
        self.member_id = ""
        self.member_epoch = 0
        self.assignment: list[int] = []
        self.next_heartbeat_ms = 0
        self.polls = 0
        self._rotation = index

    def _new_member_id(self) -> str:
        bits = _mix64(self.demo.seed, _SALT_MEMBER, self.index, self.incarnation) << 64
        bits |= _mix64(self.demo.seed, _SALT_MEMBER, self.index, self.incarnation, 1)
        return str(uuid.UUID(int=bits, version=4))

    async def run(self) -> None:
        d = self.demo
        try:
            await d.vt.sleep(0)  # join in rank order
            while not d.stopping:
                self.member_id = self._new_member_id()
                try:
                    await self._heartbeat(join=True)
                except ShareError as exc:
                    if exc.error is not Errors.GROUP_MAX_SIZE_REACHED:
                        raise
                    # The sessions of crashed members have not ended yet: try again a little later.
                    self.incarnation += 1
                    await d.vt.sleep(RESTART_DELAY_MS)
                    continue
                if not await self._consume():
                    await self._leave()
                    return
                d.summary.crashes += 1
                self.incarnation += 1
                await d.vt.sleep(RESTART_DELAY_MS)
        finally:
            d.consumers_running -= 1

    async def _heartbeat(self, join: bool = False) -> None:
        d = self.demo
        epoch = 0 if join else self.member_epoch
        try:
            result = await d.group.share_group_heartbeat(
                GROUP_ID, self.member_id, epoch, [TOPIC_NAME] if epoch == 0 else None,
                client_id=f"demo-consumer-{self.index}", client_host="127.0.0.1",
            )
        except ShareError as exc:
            if join or exc.error not in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH):
                raise
            log.info("consumer %d: %s; rejoining", self.index, exc.error.name)
            await self._heartbeat(join=True)
            return
        self.member_epoch = result.member_epoch
        if result.assignment is not None:
            self.assignment = sorted(result.assignment.get(d.topic_id, []))
        self.next_heartbeat_ms = d.clock.now_ms() + result.heartbeat_interval_ms

    async def _leave(self) -> None:
        d = self.demo
        await d.group.share_group_heartbeat(GROUP_ID, self.member_id, -1)
        await d.release_member(self.member_id)

    async def _consume(self) -> bool:
        """Poll until the demo stops (returns False) or this consumer crashes (returns True)."""
        d = self.demo
        idle_ms = IDLE_POLL_MS
        while not d.stopping:
            if d.clock.now_ms() >= self.next_heartbeat_ms:
                await self._heartbeat()
            for p in self.assignment:
                await d.leader(p)  # I/O only the first time: read the durable state
            await d.vt.sleep(0, Phase.ACQUIRE)
            polled = self._poll()
            if not polled:
                await d.vt.sleep(idle_ms)
                idle_ms = min(2 * idle_ms, IDLE_POLL_MAX_MS)
                continue
            idle_ms = IDLE_POLL_MS
            records = sum(last - first + 1 for _p, got, _t in polled for first, last, _dc in got)
            await d.vt.sleep(POLL_OVERHEAD_MS + records * RECORD_PROCESSING_US // 1000)
            if self._crashes(polled):
                for p, got, acquired_at in polled:
                    d.hold(p, self.member_id, got, acquired_at)
                return True
            await asyncio.gather(*(self._acknowledge(p, got, acquired_at) for p, got, acquired_at in polled))
        return False

    def _poll(self) -> list[tuple[int, list[AcquiredRecords], int]]:
        """One share fetch over the assigned partitions (synchronous: it never waits)."""
        d = self.demo
        self.polls += 1
        d.summary.polls += 1
        parts = self.assignment
        if not parts:
            return []
        self._rotation = (self._rotation + 1) % len(parts)
        budget = MAX_POLL_RECORDS
        now = d.clock.now_ms()
        polled = []
        for p in parts[self._rotation:] + parts[:self._rotation]:
            if budget <= 0:
                break
            sp = d.leaders[p]
            fetched = d.logs[p].fetch(sp.next_fetch_offset(), max_records=budget)
            if not fetched:
                continue
            got = sp.acquire(self.member_id, fetched, max_records=budget)
            n = d.leader_metrics[p].acquired(got)
            if n:
                d.summary.deliveries += n
                d.summary.redeliveries += sum(last - first + 1 for first, last, dc in got if dc > 1)
                polled.append((p, got, now))
                budget -= n
        return polled

    def _crashes(self, polled) -> bool:
        d = self.demo
        if _mix64(d.seed, _SALT_CRASH, self.index, self.incarnation, self.polls) < d.crash_threshold:
            return True
        return any(d.poison_crashes(p, got) for p, got, _t in polled)

    async def _acknowledge(self, partition: int, got: list[AcquiredRecords], acquired_at_ms: int) -> None:
        d = self.demo
        batches = []
        for first, last, dc in got:
            types = tuple(d.decide(partition, offset, dc) for offset in range(first, last + 1))
            if all(t == types[0] for t in types):
                types = types[:1]
            batches.append(AcknowledgementBatch(first, last, types))
        try:
            await d.leaders[partition].acknowledge(self.member_id, batches)
        except ShareError as exc:  # nothing changed: the records stay acquired until their locks expire
            log.warning("consumer %d: acknowledgement on partition %d failed: %s", self.index, partition, exc)
            d.summary.acknowledgement_errors += 1
            d.hold(partition, self.member_id, got, acquired_at_ms)
            return
        d.account_acknowledged(partition, got, batches)


# -- the entry point -----------------------------------------------------------------------------------


async def run_demo(
    *,
    data_dir: str | os.PathLike = "./sharegroup-data",
    partitions: int = 3,
    consumers: int = 4,
    records: int = 100_000,
    duration_s: float = 30.0,
    seed: int = 932,
    metrics_port: int | None = None,
    keep: bool = False,
    audit: bool = True,
    master: str = "local[2]",
    spark=None,
    audit_out_dir: str | os.PathLike | None = None,
    behaviour: ConsumerBehaviour = ConsumerBehaviour(),
    config: ShareGroupConfig | None = None,
    fsync: bool = True,
    print_fn: Callable[[str], None] = print,
    progress: bool | TextIO = True,
) -> DemoSummary:
    """Run the demo and (unless `audit=False`) the audit of the state log it wrote; see the module doc.

    `records` are produced over the run by the producers; `duration_s` bounds the wall-clock time of
    the run (the consumers then stop and whatever is not delivery-complete stays in flight).
    `metrics_port` (0: any free port) serves the Prometheus metrics on 127.0.0.1 while the demo runs.
    `progress`: True draws the progress bar on stderr, False none, a stream draws it there.
    Raises DemoError when it cannot start (data directory, port); the summary's `exit_code` tells the
    outcome (audit violations 1, an audit that could not run 2).
    """
    from persister import LocalPersister
    from prometheus_client import CollectorRegistry

    from .tracker import NATIVE

    limits = (("partitions", partitions, 1, 1000), ("consumers", consumers, 1, GroupConfig().max_size),
              ("records", records, 1, 10**9))
    for name, value, lo, hi in limits:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) or not duration_s > 0:
        raise ValueError(f"duration_s must be a number > 0, got {duration_s!r}")
    if config is None:
        # "earliest": the group sees the records produced before its first member joined.
        config = ShareGroupConfig(record_lock_duration_ms=10_000, auto_offset_reset="earliest")

    stream = sys.stderr if progress is True else None if progress is False else progress
    data_dir = os.fspath(data_dir)
    how = _prepare_data_dir(data_dir, keep)
    summary = DemoSummary(
        data_dir=data_dir, group_id=GROUP_ID, topic_id=uuid.uuid4(), partitions=partitions, consumers=consumers,
        seed=seed, tracker="native Cython" if NATIVE else "pure Python",
        delivery_count_limit=config.delivery_count_limit,
    )
    print_fn(f"sharegroup demo: {records:,} records on {partitions} partitions of topic {TOPIC_NAME}, "
             f"share group {GROUP_ID} of {consumers} consumers, seed {seed}, tracker {summary.tracker}")
    how_text = {"new": "new", "fresh": "wiped, starting fresh", "kept": "kept (--keep)"}[how]
    print_fn(f"state log: {data_dir} ({how_text})")

    registry = CollectorRegistry(auto_describe=True)
    server = None
    if metrics_port is not None:
        try:
            server = serve_metrics(metrics_port, registry)
        except OSError as exc:
            raise DemoError(f"cannot serve metrics on 127.0.0.1:{metrics_port}: {exc.strerror or exc}") from None
        summary.metrics_url = server.url
        print_fn(f"metrics: {server.url}")
    try:
        # The persister keeps the wall clock (its records' timestamps); the leaders, the group and the
        # workload run on the simulated clock, which starts at the wall clock's now.
        clock = ManualClock(time.time_ns() // 1_000_000)
        persister = await LocalPersister.open(data_dir, fsync=fsync, segment_bytes=SEGMENT_BYTES,
                                              snapshot_update_records_per_snapshot=RECORDS_PER_CHECKPOINT,
                                              metrics_registry=registry)
        try:
            demo = _Demo(persister=persister, partitions=partitions, consumers=consumers, records=records,
                         seed=seed, behaviour=behaviour, config=config, clock=clock, registry=registry,
                         summary=summary, deadline_s=float(duration_s), progress=_Progress(records, stream))
            await demo.run()
            state_log = persister.log
            summary.durable_writes = state_log.appended_records
            summary.group_commits = state_log.group_commits
            summary.fsyncs = state_log.fsync_count
        finally:
            await persister.close()
        summary.segments = len(state_log.segments)
        summary.state_log_bytes = state_log.size_bytes()
        summary.durable_state_problems = await check_durable_state(data_dir, GROUP_ID, summary.topic_id,
                                                                   summary.leader_states)
        for line in summary.lines():
            print_fn(line)
    finally:
        if server is not None:
            server.close()

    if audit:
        _audit(summary, data_dir, master=master, spark=spark, out_dir=audit_out_dir, print_fn=print_fn,
               options={"delivery_count_limit": config.delivery_count_limit,
                        "snapshot_update_records_per_snapshot": RECORDS_PER_CHECKPOINT})
    return summary


def _audit(summary: DemoSummary, data_dir: str, *, master: str, spark, out_dir, print_fn,
           options: dict[str, int]) -> None:
    print_fn("")
    print_fn(f"Audit of the state log in {data_dir} (Spark, master {master})")
    try:
        from .audit import AuditEnvironmentError, run_audit
    except ImportError as exc:
        summary.audit_error = (f"the audit cannot run: {exc}. It needs PySpark (`pip install pyspark`) and a Java "
                               "runtime 17+ (e.g. `apt-get install openjdk-17-jre-headless`); "
                               "or run the demo with --no-audit")
        print_fn(f"audit: {summary.audit_error}")
        return
    # Audit with the settings the log was written with, where the audit takes them.
    accepted = inspect.signature(run_audit).parameters
    extra = {name: value for name, value in options.items() if name in accepted}
    try:
        result = run_audit(data_dir, master=master, out_dir=out_dir, spark=spark, print_fn=print_fn, **extra)
    except AuditEnvironmentError as exc:
        summary.audit_error = str(exc)
        print_fn(f"audit: cannot run: {exc}")
        return
    summary.audit = result  # run_audit printed its summary and verdict
