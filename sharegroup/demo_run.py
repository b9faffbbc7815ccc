"""`DemoRun`: one run of the demo's simulated cluster: the topic logs, the share-partition leaders, the
group coordinator, the producer, the lock timer and the consumers, all on simulated time.

Layer 4 (an edge). The producer appends record batches to `InMemoryPartitionLogs`; the consumers
(`demo_consumer.SimulatedConsumer`) join the share group and acquire and acknowledge records; the lock
timer expires acquisition locks and ends the sessions of silent members. The `Ledger` accounts for
every delivery and is checked against the leaders as the run goes and at its end.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid

from .clock import ManualClock
from .config import ShareGroupConfig
from .coordinator import GroupConfig, GroupCoordinator, InMemoryTopics
from .demo_consumer import SimulatedConsumer
from .demo_ledger import Ledger
from .demo_summary import DemoSummary, LeaderState
from .demo_workload import (
    GROUP_ID,
    PRODUCE_INTERVAL_MS,
    PRODUCER_BATCH_MAX_RECORDS,
    RECORD_SIZE_BYTES,
    TICK_MS,
    TOPIC_NAME,
    Workload,
)
from .memory_logs import InMemoryPartitionLogs
from .metrics import SharePartitionMetrics
from .partition import SharePartition
from .persistence import Persister
from .progress_bar import ProgressBar
from .simulation import Phase, VirtualTime
from .types import RecordState

__all__ = ["DemoRun"]

log = logging.getLogger(__name__)

PRODUCER_ID_BASE = 1000  # the producer of partition p has producer id PRODUCER_ID_BASE + p
TIMER_PERIOD_MS = 1_000  # the timer service checks member sessions this often


class DemoRun:
    """One run: the topic, the leaders, the group, the producer, the consumers and the ledger."""

    def __init__(self, *, persister: Persister, partitions: int, consumers: int, records: int,
                 workload: Workload, config: ShareGroupConfig, clock: ManualClock, registry,
                 summary: DemoSummary, deadline_s: float, progress: ProgressBar) -> None:
        self.persister = persister
        self.partitions = partitions
        self.records = records
        self.workload = workload
        self.config = config
        self.clock = clock
        self.summary = summary
        self.deadline_s = deadline_s
        self.progress = progress
        self.virtual_time = VirtualTime(clock, tick_ms=TICK_MS)
        self.topic_id: uuid.UUID = summary.topic_id
        self.topics = InMemoryTopics()
        self.topics.create_topic(TOPIC_NAME, partitions, self.topic_id)
        self.logs = InMemoryPartitionLogs()
        for partition in range(partitions):
            self.logs.create_partition(self.topic_id, partition)
        self.logs.subscribe(self._log_grew)
        # Assignments are recomputed at once when members change (Kafka waits up to 1 s), so the members
        # that join together all get partitions on their first heartbeat.
        self.group = GroupCoordinator(persister=persister, topics=self.topics, clock=clock,
                                      config=GroupConfig(assignment_interval_ms=0))
        self.leaders: dict[int, SharePartition] = {}
        self.leader_metrics = [SharePartitionMetrics(GROUP_ID, TOPIC_NAME, p, registry=registry)
                               for p in range(partitions)]
        self.ledger = Ledger(partitions=partitions, workload=workload, summary=summary, metrics=self.leader_metrics,
                             delivery_count_limit=config.delivery_count_limit,
                             record_lock_duration_ms=config.record_lock_duration_ms)
        self.consumers = [SimulatedConsumer(self, index) for index in range(consumers)]
        self.consumers_running = consumers
        self.producer_done = False
        self.stopping = False
        self.started_s = time.monotonic()

    def _log_grew(self, topic_id: uuid.UUID, partition: int, log_end_offset: int) -> None:
        self.topics.set_latest_offset(topic_id, partition, log_end_offset)

    # -- the leaders (the SharePartitionManager's part) --

    async def leader(self, partition: int) -> SharePartition:
        """The initialized leader of a partition, created on first use (as a broker does on fetch)."""
        leader = self.leaders.get(partition)
        if leader is None:
            leader = self.leaders[partition] = SharePartition(
                GROUP_ID, self.topic_id, partition, persister=self.persister, config=self.config,
                clock=self.clock, offset_lookup=functools.partial(self.logs.offset_for, self.topic_id, partition),
            )
        await leader.initialize()
        return leader

    async def expire_due_locks(self) -> None:
        """Expire the acquisition locks due now on every leader; the ledger checks the counts."""
        now_ms = self.clock.now_ms()
        due = [(p, leader) for p, leader in self.leaders.items() if 0 <= leader.next_lock_deadline_ms() <= now_ms]
        counts = await asyncio.gather(*(leader.expire_locks() for _p, leader in due))
        for (partition, _leader), count in zip(due, counts):
            self.ledger.locks_expired(partition, now_ms, count)

    async def release_member(self, member_id: str) -> None:
        """A member left or its session ended: release what it still holds (SPEC §4.3)."""
        for partition, leader in sorted(self.leaders.items()):
            await leader.release_acquired_records(member_id)
            self.ledger.member_released(partition, member_id)

    # -- the tasks --

    async def produce(self) -> None:
        """One producer batch per partition every PRODUCE_INTERVAL_MS until `records` are produced."""
        batch_sizes = self.workload.producer_random()
        remaining = self.records
        while remaining > 0 and not self.stopping:
            now_ms = self.clock.now_ms()
            for partition in range(self.partitions):
                count = min(batch_sizes.randint(1, PRODUCER_BATCH_MAX_RECORDS), remaining)
                if count == 0:
                    break
                batch = self.logs.append(self.topic_id, partition, count, now_ms,
                                         producer_id=PRODUCER_ID_BASE + partition,
                                         size_bytes=count * RECORD_SIZE_BYTES)
                self.ledger.produced(partition, batch.base_offset, batch.last_offset)
                remaining -= count
            if remaining > 0:
                await self.virtual_time.sleep(PRODUCE_INTERVAL_MS, Phase.PRODUCE)
        self.producer_done = True

    async def lock_timer(self) -> None:
        """The timer service: expire locks when they fall due, end the sessions of silent members."""
        next_session_check_ms = self.clock.now_ms() + TIMER_PERIOD_MS
        while True:
            deadlines = [ms for ms in (leader.next_lock_deadline_ms() for leader in self.leaders.values()) if ms >= 0]
            if self.stopping and self.consumers_running == 0 and not deadlines:
                return
            await self.virtual_time.sleep_until(min([next_session_check_ms, *deadlines]), Phase.IO)
            await self.expire_due_locks()
            now_ms = self.clock.now_ms()
            if now_ms >= next_session_check_ms:
                next_session_check_ms = now_ms + TIMER_PERIOD_MS
                if self.consumers_running:
                    for member_id in await self.group.expire_members():
                        await self.release_member(member_id)

    def on_settled(self) -> None:
        """Every task waits: update the gauges and the progress bar, and decide whether to stop."""
        summary = self.summary
        for partition, leader in self.leaders.items():
            self.leader_metrics[partition].set_in_flight(leader.in_flight_count)
        if not self.stopping:
            if self.producer_done and summary.delivery_complete == summary.produced:
                self.stopping = True
            elif time.monotonic() - self.started_s >= self.deadline_s:
                self.stopping = True
                summary.stopped_early = True
        self.progress.update(summary.delivery_complete, self._progress_text)

    def _progress_text(self) -> str:
        summary = self.summary
        return (f"{summary.delivery_complete:,}/{self.records:,} done, {summary.redeliveries:,} redelivered, "
                f"{summary.archived:,} archived, {summary.crashes} crashes, "
                f"{self.virtual_time.elapsed_ms / 1000:.0f} s simulated in {time.monotonic() - self.started_s:.1f} s")

    async def run(self) -> None:
        """Run the producer, the lock timer and the consumers until done (or the deadline), then check."""
        self.started_s = time.monotonic()
        self.virtual_time.spawn(self.produce(), rank=0, name="producer")
        self.virtual_time.spawn(self.lock_timer(), rank=1, name="lock-timer")
        for index, consumer in enumerate(self.consumers):
            self.virtual_time.spawn(consumer.run(), rank=2 + index, name=f"consumer-{index}")
        try:
            await self.virtual_time.run(self.on_settled)
        finally:
            await self.virtual_time.cancel_all()
        summary = self.summary
        summary.wall_seconds = time.monotonic() - self.started_s
        summary.simulated_seconds = self.virtual_time.elapsed_ms / 1000
        self.progress.update(summary.delivery_complete, self._progress_text, force=True)
        self.progress.close()
        self._final_checks()

    def _final_checks(self) -> None:
        """The ledger must agree with the leaders: nothing acquired any more, and per partition the
        records not yet delivery-complete are exactly those the leader has not completed."""
        summary = self.summary
        self.ledger._check()
        for partition in range(self.partitions):
            leader = self.leaders.get(partition)
            log_end_offset = self.logs.log_end_offset(self.topic_id, partition)
            if leader is None:
                state = LeaderState(0, [], 0, log_end_offset)
            else:
                leader._check()
                batches = leader.state_batches()
                if any(b.delivery_state == RecordState.ACQUIRED for b in batches):
                    raise AssertionError(f"partition {partition}: records still acquired at the end: {batches}")
                state = LeaderState(leader.start_offset, batches, leader.delivery_complete_count, log_end_offset)
            summary.leader_states[partition] = state
            incomplete = log_end_offset - state.start_offset - state.delivery_complete_count
            ledger_incomplete = self.ledger.in_flight_count(partition)
            if incomplete != ledger_incomplete:
                raise AssertionError(f"partition {partition}: the leader has {incomplete} records not "
                                     f"delivery-complete, the ledger {ledger_incomplete}")
            summary.in_flight += incomplete
            summary.outcomes[partition] = bytes(self.ledger.outcomes[partition])
            summary.poison[partition] = self.ledger.poison_offsets(partition)
        expected = (summary.accepted + summary.released + summary.rejected + summary.lock_expired
                    + summary.released_on_leave)
        if summary.deliveries != expected:
            raise AssertionError(f"{summary.deliveries} deliveries but {expected} outcomes of deliveries")
