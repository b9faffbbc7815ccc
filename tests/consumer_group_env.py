"""A group coordinator with KIP-848 consumer groups over in-memory topics and a manual clock, for the
consumer-group tests (one place that knows how to build it and how a client heartbeats)."""

from __future__ import annotations

import uuid

from persister import InMemoryPersister
from sharegroup import ManualClock
from sharegroup.coordinator import ConsumerGroupConfig, GroupCoordinator, HeartbeatResult, InMemoryTopics, MemoryRecordSink

T1 = uuid.UUID(int=0x71)
T2 = uuid.UUID(int=0x72)
G = "cg"
REBALANCE_TIMEOUT_MS = 30_000


class ConsumerEnv:
    def __init__(self, config: ConsumerGroupConfig | None = None, **topics: int) -> None:
        self.clock = ManualClock(10_000)
        self.topics = InMemoryTopics()
        ids = {"t1": T1, "t2": T2}
        for name, n in (topics or {"t1": 6}).items():
            self.topics.create_topic(name, n, ids.get(name))
        self.sink = MemoryRecordSink()
        self.gc = GroupCoordinator(persister=InMemoryPersister(clock=self.clock), topics=self.topics,
                                   clock=self.clock, record_sink=self.sink,
                                   consumer_config=config or ConsumerGroupConfig())

    async def start(self) -> "ConsumerEnv":
        await self.gc.load()
        return self

    async def join(self, member_id: str, topics=("t1",), group: str = G, **kw) -> HeartbeatResult:
        kw.setdefault("rebalance_timeout_ms", REBALANCE_TIMEOUT_MS)
        kw.setdefault("owned_topic_partitions", {})
        if "subscribed_topic_regex" not in kw:
            kw.setdefault("subscribed_topic_names", list(topics))
        return await self.hb(member_id, 0, group=group, **kw)

    async def hb(self, member_id: str, epoch: int, group: str = G, **kw) -> HeartbeatResult:
        result = await self.gc.consumer_group_heartbeat(group, member_id, epoch, **kw)
        self.gc._check()
        return result

    def owned(self, member_id: str, group: str = G) -> dict[uuid.UUID, list[int]]:
        """What the coordinator says the member holds: assigned plus pending revocation."""
        for m in self.gc.consumer_group_describe(group).members:
            if m.member_id == member_id:
                return m.assignment
        raise KeyError(member_id)
