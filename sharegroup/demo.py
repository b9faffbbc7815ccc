"""`sharegroup demo`: the main job on an embedded default, then the audit of its state log.

Layer 4 (an edge): it wires everything together. Producers append record batches to in-memory topic
logs of several partitions; one share group of simulated consumers, members of a `GroupCoordinator`,
talks to a `SharePartitionManager` as consumers talk to a broker: share sessions, ShareFetch (with long
polling) and ShareAcknowledge. They accept most records, release some (transient failures), reject
malformed ones, and keep failing on "poison" records until those reach the delivery count limit and
are archived; now and then a consumer crashes, so its acquisition locks expire and its records are
redelivered to the others. Every share-partition's state is durable in a `LocalPersister`
(checksummed, fsync'd segment files with group commit) in `data_dir`. At the end: a summary table, a
check that the durable state, replayed from disk, equals what every leader holds, and the Spark audit
of the state log (`sharegroup.audit`).

Time is simulated (`sharegroup.simulation.VirtualTime`), so a run is fast, lock expiry and long polls
cost no waiting, and a seed always produces the same run: the same counts and the same outcome for
every record (only wall-clock figures vary).

The parts: `demo_run` (the simulated cluster and its tasks), `demo_manager` (the manager on simulated
time), `demo_consumer` (a share consumer), `demo_workload` (what the clients decide, from the seed),
`demo_ledger` (the demo's own account of every record), `demo_summary` (what is counted and printed);
this module holds the entry point, the data directory, the durable-state check and the audit's wiring.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import time
import uuid
from typing import Any, Callable, Iterator, Sequence, TextIO

from .clock import ManualClock
from .config import ShareGroupConfig
from .coordinator import GroupConfig
from .demo_run import DemoRun
from .demo_summary import DemoSummary, LeaderState, Outcome
from .demo_workload import GROUP_ID, TOPIC_NAME, ConsumerBehaviour, Workload
from .metrics import serve_metrics
from .progress_bar import ProgressBar
from .types import RecordState, StateBatch

__all__ = [
    "ConsumerBehaviour",
    "DemoError",
    "DemoSummary",
    "LeaderState",
    "Outcome",
    "check_durable_state",
    "run_demo",
]

DATA_DIR_MARKER = ".sharegroup-demo"  # written into a data directory the demo created or wiped
SEGMENT_BYTES = 64 << 10  # small segments, so the audit reads a log of several files
RECORDS_PER_CHECKPOINT = 100  # share.coordinator.snapshot.update.records.per.snapshot (Kafka: 500)


class DemoError(Exception):
    """The demo cannot run as asked (a data directory it must not touch, a port in use, ...)."""


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
            demo = DemoRun(persister=persister, partitions=partitions, consumers=consumers, records=records,
                           workload=Workload(seed, behaviour), config=config, clock=clock, registry=registry,
                           summary=summary, deadline_s=float(duration_s), progress=ProgressBar(records, stream))
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
    extra: dict[str, Any] = {name: value for name, value in options.items() if name in accepted}
    try:
        result = run_audit(data_dir, master=master, out_dir=out_dir, spark=spark, print_fn=print_fn, **extra)
    except AuditEnvironmentError as exc:
        summary.audit_error = str(exc)
        print_fn(f"audit: cannot run: {exc}")
        return
    summary.audit = result  # run_audit printed its summary and verdict


# -- the durable-state check -------------------------------------------------------------------------


_TERMINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _normalized(start_offset: int, batches: Sequence[StateBatch]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """A share-partition state in the form a leader would load it in: runs below the start offset
    dropped, leading terminal runs folded into the start offset, never-delivered available runs
    (AVAILABLE with delivery count 0, the same as no state at all) dropped."""
    runs = sorted((first, last, state, count) for first, last, state, count in batches if last >= start_offset)
    runs = [(max(first, start_offset), last, state, count) for first, last, state, count in runs]
    while runs and runs[0][0] == start_offset and runs[0][2] in _TERMINAL_STATES:
        start_offset = runs.pop(0)[1] + 1
    return start_offset, [run for run in runs if not (run[2] == RecordState.AVAILABLE and run[3] == 0)]


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
                if leader.loaded:  # else no member ever fetched from it: nothing to be durable yet
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


# -- share state on a Kafka cluster (the live demo's --share-state) --------------------------------------


def check_share_state_url(url: str) -> None:
    """ValueError unless `url` is `kafka://host:port[,host:port...][/topic]` (what serve accepts)."""
    from persister.kafka_persister import parse_kafka_url

    parse_kafka_url(url)


def copy_share_state(url: str, copy_dir: str, print_fn: Callable[[str], None]) -> str:
    """Copy the state log in the Kafka topic of `url` (partition 0, the one shard serve writes) into
    the segment directory `copy_dir`, replacing an earlier copy; the topic is only read (its owner is
    not fenced). Returns `copy_dir`; DemoError when the topic cannot be read (the live demo reports
    that as a durable-state problem and skips the audit)."""
    import shutil

    from persister.kafka_state_log import DEFAULT_STATE_TOPIC, export_to_segment_dir
    from persister.kafka_persister import parse_kafka_url

    servers, topic = parse_kafka_url(url)
    if os.path.isdir(copy_dir):
        shutil.rmtree(copy_dir)
    try:
        copied = export_to_segment_dir(servers, topic or DEFAULT_STATE_TOPIC, 0, copy_dir,
                                       client_config={"log_level": 3})
    except Exception as exc:  # the cluster is gone, the topic is missing or unreadable
        raise DemoError(f"cannot read the share state back from {url}: {exc}") from exc
    print_fn(f"share state: {copied:,} state-log records copied from {url} into {copy_dir}")
    return copy_dir


# -- the data directory ----------------------------------------------------------------------------------


def _prepare_data_dir(data_dir: str, keep: bool) -> str:
    """Make `data_dir` ready; returns "new", "fresh" (an earlier demo's log wiped) or "kept".

    Only the state log's own files (segments, start offset) are ever deleted, and only in a directory
    that the demo created before (it holds the marker file): never someone else's log. Without `keep`,
    any other non-empty directory is refused too, so a mistyped --data does not fill a directory with
    segment files.
    """
    from persister.state_log import START_OFFSET_FILE, segment_file_name

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
    with _state_log_lock(data_dir):
        for name in state_files:
            os.unlink(os.path.join(data_dir, name))
    _write_marker(data_dir)
    return "fresh" if state_files else "new"


# what `sharegroup serve` keeps in its data directory, and the live demo's copy of a Kafka state topic
SERVE_SUBDIRS = ("topics", "share-state", "groups", "share-state-copy")
SERVE_FILES = ("meta.properties", "serve.log")  # serve's cluster id; the live demo's copy of serve's stderr


def prepare_serve_data_dir(data_dir: str, keep: bool) -> str:
    """Make `data_dir` ready for the live demo's `sharegroup serve`; returns "new", "fresh" or "kept".

    The same rules as for the simulated demo's state log: only a directory the demo created (it holds
    the marker file) is ever wiped, and then only what serve keeps there (its topic logs, share state,
    group records and cluster id), the demo's serve log and the files of an earlier simulated run; never
    while a broker holds its state log open. Without `keep`, any other non-empty directory is refused.
    """
    import shutil

    if os.path.isdir(data_dir) and not keep and DATA_DIR_MARKER in os.listdir(data_dir):
        wiped = False
        with _state_log_lock(os.path.join(data_dir, "share-state")):
            for name in SERVE_SUBDIRS:
                path = os.path.join(data_dir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                    wiped = True
            for name in SERVE_FILES:
                path = os.path.join(data_dir, name)
                if os.path.isfile(path):
                    os.unlink(path)
        how = _prepare_data_dir(data_dir, keep)  # also an earlier simulated run's state log files
        return "fresh" if wiped or how == "fresh" else how
    return _prepare_data_dir(data_dir, keep)


@contextlib.contextmanager
def _state_log_lock(data_dir: str) -> Iterator[None]:
    """Hold the state log's directory lock (the flock a `SegmentLog` holds while it has the directory
    open), so that a log another process has open is never wiped under it.

    Takes the persister's own lock (`lock_log_dir`) without creating a lock file where there is none
    (then no log was ever opened there).
    """
    from persister.state_log_files import LogLockedError, lock_log_dir

    try:
        fd = lock_log_dir(data_dir, create=False)
    except LogLockedError:
        raise DemoError(f"the state log in {data_dir} is open in another process") from None
    try:
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def _write_marker(data_dir: str) -> None:
    with open(os.path.join(data_dir, DATA_DIR_MARKER), "w") as f:
        f.write("This state log was written by `sharegroup demo`; the next demo run wipes it (unless --keep).\n")
