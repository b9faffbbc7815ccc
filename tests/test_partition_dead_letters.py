"""SharePartition with a dead-letter sink (KIP-1191) against the real coordinator rules (InMemoryPersister):
ARCHIVING is durable before the sink sees the records, ARCHIVED follows the sink whatever its outcome, the
gate is read per transition, and a new leader replays persisted ARCHIVING records."""

from __future__ import annotations

import asyncio
import uuid

from persister import InMemoryPersister
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import ManualClock, ShareGroupConfig
from sharegroup import FetchedBatch as FB
from sharegroup import StateBatch as SB
from sharegroup.manager import DeadLetterBatch, DeadLetterCause
from sharegroup.manager.share_partition import SharePartition

from .conftest import run

GROUP = "g1"
TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000a1")
ACCEPT, RELEASE, REJECT = 1, 2, 3
ARCHIVING, ARCHIVED = 3, 4
LOCK_MS = 30_000
REJECTED, EXCEEDED = DeadLetterCause.CLIENT_REJECT, DeadLetterCause.DELIVERY_COUNT_EXCEEDED


class Sink:
    """A DeadLetterSink that records what it is given, and what was durable at that moment."""

    def __init__(self, persister, enabled=True, fail=False):
        self.persister, self.on, self.fail = persister, enabled, fail
        self.written: list[DeadLetterBatch] = []
        self.durable_at_write: list = []
        self.gate = asyncio.Event()
        self.gate.set()

    def enabled(self, group_id):
        return self.on

    async def write(self, batches):
        self.durable_at_write.append(self.persister.state_of(GROUP, TOPIC, 0).state_batches)
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("sink bug")
        self.written += batches


async def started(limit=3, sink_kw=None, batches=(), start=0):
    clock = ManualClock(0)
    p = InMemoryPersister(clock=clock)
    p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=start, state_batches=list(batches))
    sink = Sink(p, **(sink_kw or {}))
    sp = SharePartition(GROUP, TOPIC, 0, persister=p, clock=clock, dead_letters=sink,
                        config=ShareGroupConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=limit))
    await sp.initialize()
    return clock, p, sink, sp


async def settle(sp):
    while sp.dead_letters_in_flight:
        await asyncio.sleep(0)


def test_reject_is_durable_archiving_before_the_sink_then_archived():
    async def main():
        clock, p, sink, sp = await started()
        sink.gate.clear()
        sp.acquire("A", [FB(0, 4)])
        await sp.acknowledge("A", [Ack(0, 4, (REJECT, ACCEPT, REJECT, REJECT, ACCEPT))])
        assert p.state_of(GROUP, TOPIC, 0).state_batches == [
            SB(0, 0, ARCHIVING, 1), SB(1, 1, 2, 1), SB(2, 3, ARCHIVING, 1), SB(4, 4, 2, 1)]
        assert sp.start_offset == 0 and sp.next_fetch_offset() == 5  # held, never fetchable
        await asyncio.sleep(0)
        assert sink.durable_at_write[0][0] == SB(0, 0, ARCHIVING, 1)
        sink.gate.set()
        await settle(sp)
        assert sink.written == [DeadLetterBatch(GROUP, TOPIC, 0, 0, 0, 1, REJECTED),
                                DeadLetterBatch(GROUP, TOPIC, 0, 2, 3, 1, REJECTED)]
        assert sp.start_offset == 5
        assert p.state_of(GROUP, TOPIC, 0).start_offset == 5
        sp._check()

    run(main())


def test_release_at_the_limit_and_lock_expiry_are_exceeded_and_a_failing_sink_still_archives():
    async def main():
        clock, p, sink, sp = await started(limit=2, sink_kw={"fail": True})
        sp.acquire("A", [FB(0, 1)])
        await sp.acknowledge("A", [Ack(0, 1, (RELEASE,))])
        sp.acquire("A", [FB(0, 1)], max_records=1)  # delivery 2 of 2: one record (last attempt)
        await sp.acknowledge("A", [Ack(0, 0, (RELEASE,))])
        sp.acquire("A", [FB(1, 1)])
        clock.advance(LOCK_MS)
        assert await sp.expire_locks() == 1
        await settle(sp)
        assert sink.written == []  # it failed: archived anyway
        assert p.state_of(GROUP, TOPIC, 0).start_offset == 2 and sp.start_offset == 2
        sink.fail = False
        sp.acquire("A", [FB(2, 2)])
        await sp.acknowledge("A", [Ack(2, 2, (RELEASE,))])
        sp.acquire("A", [FB(2, 2)])
        await sp.release_acquired_records("A")  # the member leaves at the limit
        await settle(sp)
        assert sink.written == [DeadLetterBatch(GROUP, TOPIC, 0, 2, 2, 2, EXCEEDED)]
        sp._check()

    run(main())


def test_the_gate_is_read_per_transition_and_off_means_archived():
    async def main():
        clock, p, sink, sp = await started(sink_kw={"enabled": False})
        sp.acquire("A", [FB(0, 1)])
        await sp.acknowledge("A", [Ack(0, 0, (REJECT,))])
        assert p.state_of(GROUP, TOPIC, 0).start_offset == 1  # straight to ARCHIVED
        sink.on = True
        await sp.acknowledge("A", [Ack(1, 1, (REJECT,))])
        await settle(sp)
        assert [b.first_offset for b in sink.written] == [1]

    run(main())


def test_a_new_leader_replays_persisted_archiving_records():
    async def main():
        persisted = [SB(10, 11, ARCHIVING, 1), SB(12, 12, 0, 1), SB(13, 13, ARCHIVING, 3)]
        clock, p, sink, sp = await started(limit=3, sink_kw={"enabled": False}, batches=persisted, start=10)
        await settle(sp)
        assert sink.written == [DeadLetterBatch(GROUP, TOPIC, 0, 10, 11, 1, REJECTED),
                                DeadLetterBatch(GROUP, TOPIC, 0, 13, 13, 3, EXCEEDED)]
        assert p.state_of(GROUP, TOPIC, 0).state_batches == [SB(12, 12, 0, 1), SB(13, 13, ARCHIVED, 3)]
        assert sp.start_offset == 12

    run(main())


def test_without_a_sink_loaded_archiving_records_are_archived():
    async def main():
        clock = ManualClock(0)
        p = InMemoryPersister(clock=clock)
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[SB(0, 1, ARCHIVING, 1)])
        sp = SharePartition(GROUP, TOPIC, 0, persister=p, clock=clock)
        await sp.initialize()
        await settle(sp)
        assert sp.start_offset == 2 and p.state_of(GROUP, TOPIC, 0).start_offset == 2

    run(main())


def test_one_request_mixing_reject_and_release_at_the_limit_names_each_cause():
    async def main():
        clock, p, sink, sp = await started(limit=2)
        sp.acquire("A", [FB(0, 3)])
        await sp.acknowledge("A", [Ack(0, 3, (RELEASE,))])
        sp.acquire("A", [FB(0, 3)])  # delivery 2 of 2
        sp.acquire("A", [FB(1, 3)])
        sp.acquire("A", [FB(2, 3)])
        sp.acquire("A", [FB(3, 3)])
        await sp.acknowledge("A", [Ack(0, 3, (REJECT, RELEASE, RELEASE, REJECT))])
        await settle(sp)
        assert sink.written == [DeadLetterBatch(GROUP, TOPIC, 0, 0, 0, 2, REJECTED),
                                DeadLetterBatch(GROUP, TOPIC, 0, 1, 2, 2, EXCEEDED),
                                DeadLetterBatch(GROUP, TOPIC, 0, 3, 3, 2, REJECTED)]
        assert sp.start_offset == 4

    run(main())
