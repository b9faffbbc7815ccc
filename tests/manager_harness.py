"""Shared set-up of the SharePartitionManager tests: a ManualClock, the real coordinator rules in memory
(InMemoryPersister), in-memory topic logs and request builders. Nothing here sleeps: `until` only yields
to the event loop until a condition holds (bounded), and time moves only by `clock.advance`."""

from __future__ import annotations

import asyncio
import uuid
from typing import Iterable

from persister import InMemoryPersister
from sharegroup.clock import ManualClock
from sharegroup.config import BrokerConfig, ShareGroupConfig
from sharegroup.manager import SharePartitionManager
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.share_messages import (
    AcknowledgePartition,
    AcknowledgeTopic,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from sharegroup.types import AcknowledgementBatch

GROUP = "g1"
T1 = uuid.UUID("00000000-0000-0000-0000-0000000000a1")
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000a2")
LOCK_MS = 30_000
START_MS = 1_000_000
ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4


class Configs:
    """A group coordinator stand-in: one ShareGroupConfig per group (default for unknown groups)."""

    def __init__(self, default: ShareGroupConfig | None = None, **per_group: ShareGroupConfig) -> None:
        self.default = default or ShareGroupConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3)
        self.per_group = per_group

    def group_config(self, group_id: str) -> ShareGroupConfig:
        return self.per_group.get(group_id, self.default)


class Harness:
    def __init__(self, *, config: BrokerConfig | None = None, coordinator=None, observer=None) -> None:
        self.clock = ManualClock(START_MS)
        self.persister = InMemoryPersister(clock=self.clock)
        self.logs = InMemoryPartitionLogs()
        self.mgr = SharePartitionManager(
            persister=self.persister, logs=self.logs, coordinator=coordinator or Configs(),
            config=config, clock=self.clock, observer=observer,
        )
        self.logs.subscribe(self.mgr.on_append)
        self.epochs: dict[str, int] = {}

    def partition(self, topic: uuid.UUID, partition: int, *, batches: Iterable[int] = (), group: str = GROUP,
                  start_offset: int = 0, seed: bool = True) -> None:
        """Create a topic-partition log holding producer batches of the given sizes and seed the group's
        durable share-partition state at `start_offset` (as the group coordinator's initialization does)."""
        self.logs.create_partition(topic, partition)
        for size in batches:
            self.append(topic, partition, size)
        if seed:
            self.persister.seed(group, topic, partition, state_epoch=0, start_offset=start_offset, state_batches=[])

    def append(self, topic: uuid.UUID, partition: int, records: int) -> None:
        self.logs.append(topic, partition, records, self.clock.now_ms(), records=f"{topic.hex[-2:]}-{partition}")


def fetch_request(member: str, epoch: int, partitions: Iterable = (), *, group: str = GROUP,
                  forgotten: Iterable = (), **kw) -> ShareFetchRequest:
    """partitions: (topic, partition) or (topic, partition, [ack batches as (first, last, type)])."""
    by_topic: dict[uuid.UUID, list[FetchPartition]] = {}
    for item in partitions:
        topic, p = item[0], item[1]
        acks = tuple(AcknowledgementBatch(f, l, (t,) if isinstance(t, int) else tuple(t))
                     for f, l, t in (item[2] if len(item) > 2 else ()))
        by_topic.setdefault(topic, []).append(FetchPartition(p, acks))
    forgotten_by_topic: dict[uuid.UUID, list[int]] = {}
    for topic, p in forgotten:
        forgotten_by_topic.setdefault(topic, []).append(p)
    kw.setdefault("max_wait_ms", 0)
    return ShareFetchRequest(
        group, member, epoch,
        topics=tuple(FetchTopic(t, tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(ForgottenTopic(t, tuple(ps)) for t, ps in forgotten_by_topic.items()),
        **kw,
    )


def ack_request(member: str, epoch: int, partitions: Iterable, *, group: str = GROUP,
                is_renew_ack: bool = False) -> ShareAcknowledgeRequest:
    by_topic: dict[uuid.UUID, list[AcknowledgePartition]] = {}
    for topic, p, acks in partitions:
        batches = tuple(AcknowledgementBatch(f, l, (t,) if isinstance(t, int) else tuple(t)) for f, l, t in acks)
        by_topic.setdefault(topic, []).append(AcknowledgePartition(p, batches))
    return ShareAcknowledgeRequest(group, member, epoch, is_renew_ack=is_renew_ack,
                                   topics=tuple(AcknowledgeTopic(t, tuple(ps)) for t, ps in by_topic.items()))


def acquired(response, topic: uuid.UUID, partition: int) -> list[tuple[int, int, int]]:
    data = response.partition(topic, partition)
    return [] if data is None else [tuple(r) for r in data.acquired_records]


def listed(response) -> list[tuple[uuid.UUID, int]]:
    return [(t, d.partition_index) for t, d in response.partitions()]


async def until(condition, what: str = "condition", steps: int = 2000) -> None:
    """Yield to the event loop until `condition()` holds; fails after `steps` turns (never sleeps)."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} did not happen within {steps} event-loop turns")


async def answer(task: asyncio.Future, what: str = "the request to be answered", steps: int = 2000):
    """The result of a request task that must complete without time moving further (bounded turns)."""
    await until(task.done, what, steps)
    return task.result()
