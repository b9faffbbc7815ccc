"""Share-state maintenance (`sharegroup.server.share_state_maintenance`): the prune job deletes segments
and a restart after it recovers equal state; cold-partition snapshots let the segment of a key nobody
writes go; both jobs run on the clock at their own Kafka interval, survive a failing run and let a run in
progress finish on close; their metrics move; and `sharegroup serve` honours the three
`share.coordinator.*` settings (and DescribeConfigs shows them as used)."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid

import pytest
from prometheus_client import CollectorRegistry

from persister import LocalPersister, MemoryLog, ShareCoordinator, StateKey
from persister.state_log import segment_file_name
from sharegroup.clock import ManualClock
from sharegroup.metrics import REGISTRY
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.share_state_maintenance import ShareStateMaintenance
from sharegroup.types import StateBatch

from .conftest import run
from .server_harness import BrokerThread, RawClient

G = "group-maint"
T = uuid.UUID("00000000-0000-0000-0000-00000000a11e")
ACKNOWLEDGED = 2
PRUNE_MS, COLD_MS = 20_000, 50_000


async def open_persister(path, clock: ManualClock, *, per_snapshot: int = 3, cold_ms: int = COLD_MS) -> LocalPersister:
    return await LocalPersister.open(path, fsync=False, segment_bytes=1024, clock=clock,
                                     snapshot_update_records_per_snapshot=per_snapshot,
                                     cold_checkpoint_interval_ms=cold_ms)


async def write_round_robin(p, partitions, writes: int, first: int = 0) -> None:
    """`writes` writes spread over `partitions` (initialized first when new), each acknowledging 2 offsets."""
    for partition in partitions:
        if p.state_of(G, T, partition) is None:
            await p.initialize_state(G, T, partition, state_epoch=1, start_offset=0)
    for i in range(first, first + writes):
        partition = partitions[i % len(partitions)]
        await p.write_state(G, T, partition, state_epoch=1, leader_epoch=0, start_offset=i,
                            state_batches=[StateBatch(i, i + 1, ACKNOWLEDGED, 1)], delivery_complete_count=i)


def states_of(p) -> dict:
    """Everything a restart must give back, per live key: the state and the summary."""
    return {key: (p.state_of(*key), p.summary_of(*key)) for key in p.coordinator.keys()}


def segment_files(path) -> list[str]:
    return sorted(name for name in os.listdir(path) if name.endswith(".log"))


def sample(registry, name: str, **labels) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def settle(rounds: int = 20) -> None:
    """Let the loop run every ready callback a few times (MemoryLog work never leaves the loop)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def until(condition, rounds: int = 200) -> None:
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def armed(clock: ManualClock, jobs: int = 2) -> None:
    """Until every running job waits for its next run on the clock (so an advance is seen by all)."""
    await until(lambda: clock.pending_timers == jobs)


# -- one run of each job, on a LocalPersister -------------------------------------------------------------


def test_a_prune_run_deletes_segments_and_a_restart_recovers_equal_state(tmp_path):
    path = tmp_path / "state"
    registry = CollectorRegistry()

    async def go():
        clock = ManualClock(1_000)
        p = await open_persister(path, clock)
        await write_round_robin(p, [0, 1, 2, 3], 240)
        files_before = segment_files(path)
        sizes = {name: os.path.getsize(path / name) for name in files_before}
        held_before = len(p.log)
        m = ShareStateMaintenance(p.coordinator, prune_interval_ms=PRUNE_MS, clock=clock, registry=registry)
        outcome = await m.run_prune()
        assert outcome is not None and outcome.segments_deleted > 0
        files_after = segment_files(path)
        gone = set(files_before) - set(files_after)
        assert len(gone) == outcome.segments_deleted and not set(files_after) - set(files_before)
        assert outcome.bytes_reclaimed == sum(sizes[name] for name in gone)
        assert outcome.start_offset == p.log.start_offset == outcome.start_offset_before + outcome.records_deleted
        assert outcome.last_redundant_offset == p.coordinator.last_redundant_offset() >= outcome.start_offset
        # The metrics moved by exactly what the run did.
        assert sample(registry, "sharegroup_share_state_maintenance_runs_total", job="prune") == 1
        assert sample(registry, "sharegroup_share_state_pruned_segments_total") == outcome.segments_deleted
        assert sample(registry, "sharegroup_share_state_pruned_bytes_total") == outcome.bytes_reclaimed
        assert sample(registry, "sharegroup_share_state_pruned_records_total") == outcome.records_deleted > 0
        assert sample(registry, "sharegroup_share_state_last_redundant_offset") == outcome.last_redundant_offset
        assert sample(registry, "sharegroup_share_state_maintenance_duration_seconds_count", job="prune") == 1
        assert sample(registry, "sharegroup_share_state_maintenance_failures_total", job="prune") == 0
        before = states_of(p)
        await p.close()

        again = await open_persister(path, clock)
        assert states_of(again) == before and len(before) == 4
        assert again.log.start_offset == outcome.start_offset and len(again.log) < held_before
        again.coordinator._check()
        await again.close()

    run(go())


def test_cold_snapshots_let_the_segment_of_a_never_written_key_go(tmp_path):
    """A key written once at t=0 pins the log at its checkpoint: no prune passes it. Once it is a cold
    interval old, the cold-snapshot run re-checkpoints it (and only it: the hot keys checkpointed since),
    and the next prune deletes the segment that held its old records; the restart agrees."""
    path = tmp_path / "state"
    registry = CollectorRegistry()

    async def go():
        clock = ManualClock(0)
        p = await open_persister(path, clock)
        m = ShareStateMaintenance(p.coordinator, prune_interval_ms=PRUNE_MS, clock=clock, registry=registry)
        await write_round_robin(p, [99], 1)  # the cold key: its checkpoint at offset 0, a delta after it
        clock.advance(COLD_MS // 2)
        await write_round_robin(p, [0, 1, 2], 150, first=1)  # hot keys, checkpointed every 3 deltas
        first_segment = segment_file_name(0)
        blocked = await m.run_prune()
        assert blocked is not None and blocked.start_offset == 0 and blocked.segments_deleted == 0
        assert first_segment in segment_files(path)

        clock.advance(COLD_MS // 2)
        assert await m.run_cold_snapshots() == 1
        cold = p.coordinator.state(StateKey(G, T, 99))
        assert (cold.checkpoint_epoch, cold.create_timestamp_ms, cold.write_timestamp_ms) == (1, 0, COLD_MS)
        assert sample(registry, "sharegroup_share_state_cold_snapshots_total") == 1
        assert sample(registry, "sharegroup_share_state_maintenance_runs_total", job="cold_snapshot") == 1

        freed = await m.run_prune()
        assert freed is not None and freed.segments_deleted >= 1 and freed.start_offset > 1
        assert first_segment not in segment_files(path)
        before = states_of(p)
        await p.close()
        again = await open_persister(path, clock)
        assert states_of(again) == before and before[StateKey(G, T, 99)][0].state_batches
        await again.close()

    run(go())


# -- scheduling, failures and shutdown (a MemoryLog: nothing leaves the loop) -----------------------------


class ControlledLog(MemoryLog):
    """A MemoryLog whose `delete_below` can fail (`failures` times) or wait for `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.gate: asyncio.Event | None = None
        self.entered = 0

    async def delete_below(self, offset: int) -> int:
        self.entered += 1
        if self.failures:
            self.failures -= 1
            raise OSError("injected: the disk refused the prune")
        if self.gate is not None:
            await self.gate.wait()
        return await super().delete_below(offset)


async def prunable_coordinator(clock: ManualClock) -> ShareCoordinator:
    """A coordinator whose log can be pruned below offset 1 (a key initialized twice)."""
    coordinator = ShareCoordinator(ControlledLog(), clock=clock, cold_checkpoint_interval_ms=COLD_MS)
    for _ in range(2):
        await coordinator.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
    return coordinator


def test_the_jobs_run_on_the_clock_each_at_its_own_interval():
    async def go():
        clock = ManualClock(0)
        coordinator = await prunable_coordinator(clock)
        m = ShareStateMaintenance(coordinator, prune_interval_ms=PRUNE_MS, clock=clock, registry=CollectorRegistry())
        assert m.cold_snapshot_interval_ms == COLD_MS
        m.start()
        await armed(clock)
        clock.advance(PRUNE_MS - 1)
        await settle()
        assert (m.prune_runs, m.cold_snapshot_runs, coordinator.log.start_offset) == (0, 0, 0)
        clock.advance(1)
        await until(lambda: m.prune_runs == 1)
        assert coordinator.log.start_offset == 1 and m.cold_snapshot_runs == 0
        await armed(clock)
        clock.advance(PRUNE_MS)  # t = 40 s: the second prune, one interval after the first ended
        await until(lambda: m.prune_runs == 2)
        await armed(clock)
        clock.advance(COLD_MS - 2 * PRUNE_MS)  # t = 50 s: the first cold round
        await until(lambda: m.cold_snapshot_runs == 1)
        assert m.prune_runs == 2 and coordinator.state(StateKey(G, T, 0)).write_timestamp_ms == COLD_MS
        await armed(clock)
        await m.close()
        assert not m.running and clock.pending_timers == 0
        clock.advance(10 * COLD_MS)
        await settle()
        assert (m.prune_runs, m.cold_snapshot_runs) == (2, 1)

    run(go())


def test_a_failing_run_is_logged_counted_and_retried_next_interval(caplog):
    registry = CollectorRegistry()

    async def go():
        clock = ManualClock(0)
        coordinator = await prunable_coordinator(clock)
        coordinator.log.failures = 1
        m = ShareStateMaintenance(coordinator, prune_interval_ms=PRUNE_MS, clock=clock, registry=registry)
        m.start()
        await armed(clock)
        clock.advance(PRUNE_MS)
        await until(lambda: m.prune_failures == 1)
        assert m.running and m.prune_runs == 0 and coordinator.log.start_offset == 0
        assert sample(registry, "sharegroup_share_state_maintenance_failures_total", job="prune") == 1
        assert sample(registry, "sharegroup_share_state_maintenance_duration_seconds_count", job="prune") == 1
        await armed(clock)
        clock.advance(PRUNE_MS)
        await until(lambda: m.prune_runs == 1)
        assert coordinator.log.start_offset == 1 and m.prune_failures == 1
        await m.close()

    with caplog.at_level(logging.ERROR, logger="sharegroup.server.maintenance"):
        run(go())
    (record,) = [r for r in caplog.records if r.name == "sharegroup.server.maintenance"]
    assert "share-state prune failed" in record.getMessage() and "injected" in record.exc_text


def test_close_lets_a_run_in_progress_finish_and_stops_the_jobs():
    async def go():
        clock = ManualClock(0)
        coordinator = await prunable_coordinator(clock)
        coordinator.log.gate = asyncio.Event()
        m = ShareStateMaintenance(coordinator, prune_interval_ms=PRUNE_MS, clock=clock, registry=CollectorRegistry())
        m.start()
        await armed(clock)
        clock.advance(PRUNE_MS)
        await until(lambda: coordinator.log.entered == 1)
        closing = asyncio.create_task(m.close())
        await settle()
        assert not closing.done() and m.prune_runs == 0  # the prune in progress is not cut short
        coordinator.log.gate.set()
        await asyncio.wait_for(closing, 5)
        assert m.prune_runs == 1 and coordinator.log.start_offset == 1 and not m.running

    run(go())


def test_a_prune_interval_below_one_ms_is_refused():
    with pytest.raises(ValueError, match="prune.interval.ms"):
        ShareStateMaintenance(ShareCoordinator(MemoryLog()), prune_interval_ms=0)


# -- the broker configs ---------------------------------------------------------------------------------

KEYS = {
    "share.coordinator.state.topic.prune.interval.ms": 300_000,
    "share.coordinator.cold.partition.snapshot.interval.ms": 300_000,
    "share.coordinator.state.topic.segment.bytes": 104_857_600,
}


def test_maintenance_configs_have_kafkas_defaults_and_bounds():
    config = ServeConfig.build({}, [], [])
    assert {key: config[key] for key in KEYS} == KEYS
    assert config.warnings == ()
    for key, low in (("share.coordinator.state.topic.prune.interval.ms", "0"),
                     ("share.coordinator.cold.partition.snapshot.interval.ms", "0"),
                     ("share.coordinator.state.topic.segment.bytes", "1023"),
                     ("share.coordinator.state.topic.prune.interval.ms", str(2**31))):
        with pytest.raises(ValueError, match=key):
            ServeConfig.build({}, [(key, low)], [])
    # Accepted without the "not used by serve" warning they used to get.
    given = ServeConfig.build({key: "1000" if key.endswith("ms") else "2048" for key in KEYS}, [], [])
    assert given.warnings == () and given["share.coordinator.state.topic.segment.bytes"] == 2048


def test_serve_honours_the_maintenance_configs(tmp_path):
    """A broker with short maintenance intervals (on a ManualClock) and 1 KiB state segments: the state
    log rolls at 1 KiB, moving the clock one prune interval makes the broker prune (segment files go,
    the engine's metrics move), DescribeConfigs shows the keys as used, given at start-up, and a restart
    recovers equal state."""
    clock = ManualClock(1_000_000)
    overrides = {"share.coordinator.state.topic.prune.interval.ms": "60000",
                 "share.coordinator.cold.partition.snapshot.interval.ms": "120000",
                 "share.coordinator.state.topic.segment.bytes": "1024",
                 "share.coordinator.snapshot.update.records.per.snapshot": "2"}
    state_dir = tmp_path / "share-state"
    runs_before = sample(REGISTRY, "sharegroup_share_state_maintenance_runs_total", job="prune")
    segments_before = sample(REGISTRY, "sharegroup_share_state_pruned_segments_total")

    async def advance(ms):  # on the broker's loop: the clock's timers wake tasks of that loop
        clock.advance(ms)

    async def wait_for(condition, timeout_s: float = 10.0):  # the prune's file work runs in threads
        async def poll():
            while not condition():
                await asyncio.sleep(0.01)
        await asyncio.wait_for(poll(), timeout_s)

    b = BrokerThread(tmp_path, share=True, overrides=overrides, clock=clock)
    try:
        share = b.share
        p, m = share.persister, share.maintenance
        assert p.log.segment_bytes == 1024 and p.coordinator.snapshot_update_records_per_snapshot == 2
        assert (m.prune_interval_ms, m.cold_snapshot_interval_ms) == (60_000, 120_000) and m.running
        b.call(write_round_robin(p, [0, 1, 2], 150))
        files = segment_files(state_dir)
        assert len(files) > 3
        b.call(wait_for(lambda: clock.pending_timers == 2))  # both jobs wait on the broker's clock
        b.call(advance(59_999))
        assert m.prune_runs == 0 and segment_files(state_dir) == files
        b.call(advance(1))
        b.call(wait_for(lambda: m.prune_runs == 1))
        pruned = m.last_prune
        assert pruned is not None and pruned.segments_deleted > 0
        assert len(segment_files(state_dir)) == len(files) - pruned.segments_deleted
        assert sample(REGISTRY, "sharegroup_share_state_maintenance_runs_total", job="prune") == runs_before + 1
        assert sample(REGISTRY, "sharegroup_share_state_pruned_segments_total") == (
            segments_before + pruned.segments_deleted)
        client = RawClient(b.broker.port)
        try:
            from tests.test_server_admin_configs import BROKER, STATIC_BROKER_CONFIG, describe

            described = {c.name: (c.value, c.config_source) for c in describe(client, BROKER, "1").configs}
        finally:
            client.close()
        for key, value in overrides.items():
            assert described[key] == (value, STATIC_BROKER_CONFIG)
        before = states_of(p)
    finally:
        b.stop()
    assert not m.running  # stopping the broker cancelled the jobs

    again = BrokerThread(tmp_path, share=True, overrides=overrides, clock=clock)
    try:
        assert states_of(again.share.persister) == before and len(before) == 3
        assert again.share.persister.log.start_offset == pruned.start_offset
    finally:
        again.stop()
