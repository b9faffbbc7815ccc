"""`sharegroup demo --simulated`: the main job as an in-process simulation, then the audit of its state log.

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

Time is simulated (`simulated.simulation.VirtualTime`), so a run is fast, lock expiry and long polls
cost no waiting, and a seed always produces the same run: the same counts and the same outcome for
every record (only wall-clock figures vary).

The parts, in `sharegroup.demo.simulated`: `run` (the simulated cluster and its tasks), `manager` (the
manager on simulated time), `consumer` (a share consumer), `workload` (what the clients decide, from the
seed), `ledger` (the demo's own account of every record), `summary` (what is counted and printed);
this module holds the entry point. The data directory's rules (`demo.data_dir`) and the checks at the end
(`demo.checks`: the durable state, the audit) are the live demo's too.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Callable, TextIO

from ...clock import ManualClock
from ...config import ShareGroupConfig
from ...coordinator import GroupConfig
from ...metrics import serve_metrics
from ..checks import audit_state_log, check_durable_state
from ..data_dir import prepare_data_dir
from ..errors import DemoError
from ..progress_bar import ProgressBar
from .run import DemoRun
from .summary import DemoSummary, Outcome
from .workload import GROUP_ID, TOPIC_NAME, ConsumerBehaviour, Workload

__all__ = ["ConsumerBehaviour", "DemoSummary", "Outcome", "run_demo"]

SEGMENT_BYTES = 64 << 10  # small segments, so the audit reads a log of several files
RECORDS_PER_CHECKPOINT = 100  # share.coordinator.snapshot.update.records.per.snapshot (Kafka: 500)


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

    from ...tracker import NATIVE

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
    how = prepare_data_dir(data_dir, keep)
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
        audit_state_log(summary, data_dir, master=master, spark=spark, out_dir=audit_out_dir,
                        print_fn=print_fn, options={"delivery_count_limit": config.delivery_count_limit,
                                                    "snapshot_update_records_per_snapshot": RECORDS_PER_CHECKPOINT})
    return summary
