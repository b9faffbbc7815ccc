"""Group coordinator benchmarks (issue 4): heartbeat handling and assignment recomputation for one share
group of 200 members (group.share.max.size) over a topic of 1,000 partitions, all initialized.

Run with `.venv/bin/python -m pytest -q bench/bench_coordinator.py --benchmark-enable -s`. Each test
stores its headline number in `benchmark.extra_info` (us_per_heartbeat / ms_per_assignment) and prints
it. Heartbeat rounds send one heartbeat per member, so per-heartbeat figures are the round's median / 200
(no event-loop start-up in them). The coordinator is pure Python (no native twin), so there is one row
per case.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import ManualClock
from sharegroup.coordinator import GroupConfig, GroupCoordinator, InMemoryTopics, simple_assign

MEMBERS = 200
PARTITIONS = 1_000
G = "bench-group"
TOPIC = uuid.UUID(int=0x70)
MEMBER_IDS = [f"member-{i:03d}" for i in range(MEMBERS)]


class Group:
    """A coordinator with one stable group: every member joined and reconciled."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(1_000_000)
        topics = InMemoryTopics()
        topics.create_topic("orders", PARTITIONS, TOPIC)
        self.gc = GroupCoordinator(
            persister=InMemoryPersister(clock=self.clock),
            topics=topics,
            clock=self.clock,
            config=GroupConfig(assignment_interval_ms=0),
        )
        self.epochs: dict[str, int] = {}
        self.run(self._fill())

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    async def _fill(self) -> None:
        for m in MEMBER_IDS:
            self.epochs[m] = (await self.gc.share_group_heartbeat(G, m, 0, ["orders"], client_id="bench")).member_epoch
        for m in MEMBER_IDS:  # reconcile everyone to the final target
            self.epochs[m] = (await self.gc.share_group_heartbeat(G, m, self.epochs[m], client_id="bench")).member_epoch
        assert all(len(a[TOPIC]) == PARTITIONS // MEMBERS for a in self.gc._store.groups[G].target.values())

    async def round(self, full: bool) -> None:
        names = ["orders"] if full else None
        hb = self.gc.share_group_heartbeat
        for m in MEMBER_IDS:
            await hb(G, m, self.epochs[m], names, client_id="bench")

    def close(self) -> None:
        self.gc._check(replay=True)
        self.loop.close()


def report(benchmark, key: str, value: float, unit: str) -> None:
    if benchmark.stats is None:  # --benchmark-disable: ran once, untimed
        return
    benchmark.extra_info[key] = round(value, 3)
    print(f"\n{benchmark.name}: {value:.2f} {unit} (median)")


@pytest.fixture
def group():
    g = Group()
    yield g
    g.close()


@pytest.mark.benchmark(group="coordinator heartbeat, 200 members x 1,000 partitions")
def test_heartbeat_steady_state(benchmark, group):
    """A regular heartbeat with nothing to change: validation, lock, session, metadata check."""
    benchmark(lambda: group.run(group.round(full=False)))
    if benchmark.stats is not None:
        report(benchmark, "us_per_heartbeat", benchmark.stats.stats.median / MEMBERS * 1e6, "us per heartbeat")


@pytest.mark.benchmark(group="coordinator heartbeat, 200 members x 1,000 partitions")
def test_heartbeat_full_request(benchmark, group):
    """A heartbeat that resends the subscription (as after a client error): the assignment goes back."""
    benchmark(lambda: group.run(group.round(full=True)))
    if benchmark.stats is not None:
        report(benchmark, "us_per_heartbeat", benchmark.stats.stats.median / MEMBERS * 1e6, "us per heartbeat")


@pytest.mark.benchmark(group="coordinator assignment recompute, 200 members x 1,000 partitions")
def test_assignment_recompute_in_heartbeat(benchmark, group):
    """The heartbeat that recomputes the target assignment after a member left (199 members, sticky:
    the leaver's 5 partitions move), writes the changed records and reconciles the heartbeating member."""
    leaver, worker = MEMBER_IDS[0], MEMBER_IDS[1]
    state = {"joined": True}

    def setup():
        async def change():
            if not state["joined"]:
                r = await group.gc.share_group_heartbeat(G, leaver, 0, ["orders"], client_id="bench")
                group.epochs[leaver] = r.member_epoch
            await group.gc.share_group_heartbeat(G, leaver, -1)
            state["joined"] = False

        group.run(change())
        g = group.gc._store.groups[G]
        assert g.assignment_epoch < g.group_epoch

    def recompute():
        r = group.run(group.gc.share_group_heartbeat(G, worker, group.epochs[worker], client_id="bench"))
        group.epochs[worker] = r.member_epoch

    benchmark.pedantic(recompute, setup=setup, rounds=30, iterations=1, warmup_rounds=1)
    g = group.gc._store.groups[G]
    assert g.assignment_epoch == g.group_epoch and len(g.target) == MEMBERS - 1
    if benchmark.stats is not None:
        report(benchmark, "ms_per_assignment", benchmark.stats.stats.median * 1e3, "ms per assignment")


@pytest.mark.benchmark(group="coordinator assignment recompute, 200 members x 1,000 partitions")
def test_simple_assign_fresh(benchmark):
    """The assignor alone, from nothing."""
    members = {m: {TOPIC} for m in MEMBER_IDS}
    result = benchmark(simple_assign, members, {TOPIC: PARTITIONS})
    assert all(len(a[TOPIC]) == PARTITIONS // MEMBERS for a in result.values())
    if benchmark.stats is not None:
        report(benchmark, "ms_per_assignment", benchmark.stats.stats.median * 1e3, "ms per assignment")


@pytest.mark.benchmark(group="coordinator assignment recompute, 200 members x 1,000 partitions")
def test_simple_assign_sticky_after_leave(benchmark):
    """The assignor alone, from the previous assignment, after one member left."""
    members = {m: {TOPIC} for m in MEMBER_IDS}
    current = simple_assign(members, {TOPIC: PARTITIONS})
    del members[MEMBER_IDS[0]]
    result = benchmark(simple_assign, members, {TOPIC: PARTITIONS}, current)
    moved = sum(len(set(current[m][TOPIC]) ^ set(result[m][TOPIC])) for m in members)
    assert moved == PARTITIONS // MEMBERS, "only the leaver's partitions move"
    if benchmark.stats is not None:
        report(benchmark, "ms_per_assignment", benchmark.stats.stats.median * 1e3, "ms per assignment")
