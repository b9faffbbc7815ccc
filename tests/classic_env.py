"""A group coordinator with classic groups on a ManualClock, for the classic-protocol unit tests.

Requests that park (JoinGroup, SyncGroup) run as tasks; `settle()` lets them reach their parking
point, `advance(ms)` moves the clock and runs the due deadlines, so a test decides exactly when a
rebalance or session timeout happens."""

from __future__ import annotations

import asyncio

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock
from sharegroup.coordinator import GroupCoordinator, InMemoryTopics, MemoryRecordSink
from sharegroup.coordinator.classic.config import ClassicGroupConfig
from sharegroup.coordinator.classic.responses import JoinGroupResult, SyncGroupResult
from sharegroup.coordinator.classic.consumer_protocol import encode_subscription

G = "cg"
SESSION_MS = 10_000
REBALANCE_MS = 20_000
DELAY_MS = 3_000
CONSUMER = "consumer"


def protocols(topics=("t",), names=("range",)) -> list[tuple[str, bytes]]:
    return [(name, encode_subscription(topics)) for name in names]


class ClassicEnv:
    def __init__(self, sink: MemoryRecordSink | None = None, clock: ManualClock | None = None, **config) -> None:
        self.clock = clock or ManualClock(1_000_000)
        self.topics = InMemoryTopics()
        self.topics.create_topic("t", 4)
        self.sink = sink if sink is not None else MemoryRecordSink()
        config.setdefault("initial_rebalance_delay_ms", DELAY_MS)
        self.config = ClassicGroupConfig(**config)
        self.gc = GroupCoordinator(persister=InMemoryPersister(clock=self.clock), topics=self.topics,
                                   clock=self.clock, record_sink=self.sink, classic_config=self.config)

    async def start(self) -> "ClassicEnv":
        await self.gc.load()
        return self

    async def settle(self) -> None:
        """Let started requests run to their parking point (the memory sink never waits)."""
        for _ in range(10):
            await asyncio.sleep(0)

    async def advance(self, ms: int) -> int:
        self.clock.advance(ms)
        fired = await self.gc.run_timers()
        await self.settle()
        self.gc._check(replay=True)
        return fired

    def join(self, member_id: str = "", group: str = G, instance: str | None = None, protos=None,
             session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS, protocol_type: str = CONSUMER,
             require_known: bool = True) -> asyncio.Task:
        return asyncio.ensure_future(self.gc.join_group(
            group, member_id, protocol_type, protos if protos is not None else protocols(), session_ms,
            rebalance_ms, group_instance_id=instance, client_id="client", client_host="/127.0.0.1",
            require_known_member_id=require_known))

    async def join_now(self, *args, **kw) -> JoinGroupResult:
        task = self.join(*args, **kw)
        await self.settle()
        assert task.done(), "the JoinGroup was expected to answer at once"
        return task.result()

    async def new_member(self, group: str = G, **kw) -> str:
        """A dynamic member's first JoinGroup: MEMBER_ID_REQUIRED with its member id."""
        result = await self.join_now("", group, **kw)
        assert result.error is Errors.MEMBER_ID_REQUIRED, result
        return result.member_id

    def sync(self, member_id: str, generation: int, assignments=None, group: str = G,
             instance: str | None = None) -> asyncio.Task:
        return asyncio.ensure_future(self.gc.sync_group(group, generation, member_id, assignments or {},
                                                        group_instance_id=instance))

    async def sync_now(self, *args, **kw) -> SyncGroupResult:
        task = self.sync(*args, **kw)
        await self.settle()
        assert task.done(), "the SyncGroup was expected to answer at once"
        return task.result()

    async def finish_join(self, *tasks: asyncio.Task) -> None:
        """Advance by the initial delay until the parked JoinGroups answered (the delay extends while
        members arrive, up to the rebalance timeout)."""
        await self.settle()
        for _ in range(REBALANCE_MS // DELAY_MS + 1):
            if all(t.done() for t in tasks):
                return
            await self.advance(DELAY_MS)
        assert all(t.done() for t in tasks)

    async def joined_pair(self, **kw) -> tuple[str, str]:
        """Two new members joined in generation 1: (leader, follower), neither synced yet."""
        a, b = await self.new_member(**kw), await self.new_member(**kw)
        ta, tb = self.join(a, **kw), self.join(b, **kw)
        await self.finish_join(ta, tb)
        leader = ta.result().leader
        return leader, (b if leader == a else a)

    def state(self, group: str = G) -> str:
        return self.gc.describe_groups([group])[0].state

    async def stable_group(self, *member_ids_wanted: int, instances=None) -> tuple[int, list[str]]:
        """A Stable group of n dynamic (or static) members; returns (generation, member ids, leader first)."""
        count = member_ids_wanted[0] if member_ids_wanted else 2
        tasks = []
        for i in range(count):
            instance = instances[i] if instances else None
            if instance is None:
                member_id = await self.new_member()
                tasks.append(self.join(member_id))
            else:
                tasks.append(self.join("", instance=instance))
        await self.settle()
        for _ in range(REBALANCE_MS // DELAY_MS + 1):  # the initial delay extends while members arrive
            if all(t.done() for t in tasks):
                break
            await self.advance(DELAY_MS)
        results = [t.result() for t in tasks]
        assert all(r.error is Errors.NONE for r in results), results
        generation = results[0].generation_id
        leader = results[0].leader
        ids = [r.member_id for r in results]
        syncs = [self.sync(m, generation, {m: m.encode() for m in ids} if m == leader else None) for m in ids]
        await self.settle()
        assert all(s.done() and s.result().error is Errors.NONE for s in syncs), [s for s in syncs]
        assert self.state() == "Stable"
        return generation, [leader] + [m for m in ids if m != leader]
