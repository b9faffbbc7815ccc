"""`SimulatedConsumer`: one of the demo's share consumers, on simulated time.

It joins the share group by heartbeat, polls its assigned partitions (one share fetch over all of
them, `max.poll.records` at most, starting from a rotating partition), spends simulated time
processing, and acknowledges what it processed, or crashes (its records stay acquired until their
locks expire) and comes back later as a new member. What it decides comes from the run's `Workload`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, NamedTuple

from .demo_workload import (
    GROUP_ID,
    IDLE_POLL_MAX_MS,
    IDLE_POLL_MS,
    MAX_POLL_RECORDS,
    POLL_OVERHEAD_MS,
    RECORD_PROCESSING_US,
    RECORD_SIZE_BYTES,
    RESTART_DELAY_MS,
    TOPIC_NAME,
)
from .errors import Errors, ShareError
from .simulation import Phase
from .types import AcquiredRecords

if TYPE_CHECKING:
    from .demo_run import DemoRun

__all__ = ["SimulatedConsumer"]

log = logging.getLogger(__name__)


class Polled(NamedTuple):
    """What one share fetch acquired on one partition."""

    partition: int
    records: list[AcquiredRecords]
    acquired_at_ms: int


class SimulatedConsumer:
    """A simulated share consumer: joins the group, polls its assigned partitions, processes, acknowledges."""

    def __init__(self, demo: DemoRun, index: int) -> None:
        self.demo = demo
        self.index = index
        self.incarnation = 0  # +1 at every restart: a new member id
        self.member_id = ""
        self.member_epoch = 0
        self.assignment: list[int] = []
        self.next_heartbeat_ms = 0
        self.polls = 0
        self._first_partition = index  # share fetches start from a rotating partition

    async def run(self) -> None:
        """Consume (restarting after each crash) until the run stops, then leave the group."""
        demo = self.demo
        try:
            await demo.virtual_time.sleep(0)  # join in rank order
            while not demo.stopping:
                self.member_id = demo.workload.member_id(self.index, self.incarnation)
                try:
                    await self._heartbeat(join=True)
                except ShareError as exc:
                    if exc.error is not Errors.GROUP_MAX_SIZE_REACHED:
                        raise
                    # The sessions of crashed members have not ended yet: try again a little later.
                    self.incarnation += 1
                    await demo.virtual_time.sleep(RESTART_DELAY_MS)
                    continue
                if not await self._consume():
                    await self._leave()
                    return
                demo.summary.crashes += 1
                self.incarnation += 1
                await demo.virtual_time.sleep(RESTART_DELAY_MS)
        finally:
            demo.consumers_running -= 1

    async def _heartbeat(self, join: bool = False) -> None:
        demo = self.demo
        epoch = 0 if join else self.member_epoch
        try:
            result = await demo.group.share_group_heartbeat(
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
            self.assignment = sorted(result.assignment.get(demo.topic_id, []))
        self.next_heartbeat_ms = demo.clock.now_ms() + result.heartbeat_interval_ms

    async def _leave(self) -> None:
        await self.demo.group.share_group_heartbeat(GROUP_ID, self.member_id, -1)
        await self.demo.release_member(self.member_id)

    async def _consume(self) -> bool:
        """Poll until the run stops (returns False) or this consumer crashes (returns True)."""
        demo = self.demo
        idle_ms = IDLE_POLL_MS
        while not demo.stopping:
            if demo.clock.now_ms() >= self.next_heartbeat_ms:
                await self._heartbeat()
            for partition in self.assignment:
                await demo.leader(partition)  # I/O only the first time: read the durable state
            await demo.virtual_time.sleep(0, Phase.ACQUIRE)
            polled = self._poll()
            if not polled:
                await demo.virtual_time.sleep(idle_ms)
                idle_ms = min(2 * idle_ms, IDLE_POLL_MAX_MS)
                continue
            idle_ms = IDLE_POLL_MS
            records = sum(last - first + 1 for got in polled for first, last, _count in got.records)
            await demo.virtual_time.sleep(POLL_OVERHEAD_MS + records * RECORD_PROCESSING_US // 1000)
            if self._crashes(polled):
                for got in polled:
                    demo.ledger.hold(got.partition, self.member_id, got.records, got.acquired_at_ms)
                return True
            await asyncio.gather(*(self._acknowledge(got) for got in polled))
        return False

    def _poll(self) -> list[Polled]:
        """One share fetch over the assigned partitions (synchronous: it never waits)."""
        demo = self.demo
        self.polls += 1
        demo.summary.polls += 1
        partitions = self.assignment
        if not partitions:
            return []
        self._first_partition = (self._first_partition + 1) % len(partitions)
        budget = MAX_POLL_RECORDS
        now_ms = demo.clock.now_ms()
        polled = []
        for partition in partitions[self._first_partition:] + partitions[:self._first_partition]:
            if budget <= 0:
                break
            leader = demo.leaders[partition]
            read = demo.logs.read(demo.topic_id, partition, leader.next_fetch_offset(), budget * RECORD_SIZE_BYTES)
            if not read.batches:
                continue
            records = leader.acquire(self.member_id, [batch.header for batch in read.batches], max_records=budget)
            count = demo.ledger.acquired(partition, records)
            if count:
                polled.append(Polled(partition, records, now_ms))
                budget -= count
        return polled

    def _crashes(self, polled: list[Polled]) -> bool:
        demo = self.demo
        if demo.workload.consumer_crashes(self.index, self.incarnation, self.polls):
            return True
        return any(demo.ledger.crashes_processing(got.partition, got.records) for got in polled)

    async def _acknowledge(self, got: Polled) -> None:
        demo = self.demo
        batches = demo.ledger.acknowledgements(got.partition, got.records)
        try:
            await demo.leaders[got.partition].acknowledge(self.member_id, batches)
        except ShareError as exc:  # nothing changed: the records stay acquired until their locks expire
            log.warning("consumer %d: acknowledgement on partition %d failed: %s", self.index, got.partition, exc)
            demo.summary.acknowledgement_errors += 1
            demo.ledger.hold(got.partition, self.member_id, got.records, got.acquired_at_ms)
            return
        demo.ledger.acknowledged(got.partition, got.records, batches)
