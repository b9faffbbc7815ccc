"""`DemoRun`: one run of the demo's simulated cluster: the topic logs, the broker's
`SharePartitionManager`, the group coordinator, the producer, the lock timer and the consumers, all on
simulated time.

Layer 4 (an edge). The producer appends record batches to `InMemoryPartitionLogs` (each append wakes
the manager's waiting fetches); the consumers (`consumer.SimulatedConsumer`) join the share group
and fetch and acknowledge through the manager; the lock-timer task runs the manager's lock-timer passes
and ends the sessions of silent members. The `Ledger` accounts for every delivery and is checked against
the share-partition leaders as the run goes and at its end.
"""

from __future__ import annotations

import time
import uuid

from ...clock import ManualClock
from ...config import ShareGroupConfig
from ...coordinator import GroupConfig, GroupCoordinator, InMemoryTopics
from ...topics.memory_logs import InMemoryPartitionLogs
from ...metrics import SharePartitionMetrics
from ...manager.share_partition import SharePartition
from ...persistence import Persister
from ...types import RecordState
from ..checks import LeaderState
from ..progress_bar import ProgressBar
from .consumer import SimulatedConsumer
from .ledger import Ledger
from .manager import DemoGroupConfigs, LedgerObserver, SimulatedShareManager
from .simulation import Phase, VirtualTime
from .summary import DemoSummary
from .workload import (
    GROUP_ID,
    PRODUCE_INTERVAL_MS,
    PRODUCER_BATCH_MAX_RECORDS,
    RECORD_SIZE_BYTES,
    TICK_MS,
    TOPIC_NAME,
    Workload,
)

__all__ = ["DemoRun"]

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
        self.leader_metrics = [SharePartitionMetrics(GROUP_ID, TOPIC_NAME, p, registry=registry)
                               for p in range(partitions)]
        self.ledger = Ledger(partitions=partitions, workload=workload, summary=summary, metrics=self.leader_metrics,
                             delivery_count_limit=config.delivery_count_limit,
                             record_lock_duration_ms=config.record_lock_duration_ms)
        self.manager = SimulatedShareManager(
            virtual_time=self.virtual_time, persister=persister, logs=self.logs, clock=clock,
            coordinator=DemoGroupConfigs(config), observer=LedgerObserver(self.ledger, self.topic_id, clock),
        )
        self.consumers = [SimulatedConsumer(self, index) for index in range(consumers)]
        self.consumers_running = consumers
        self.producer_done = False
        self.stopping = False
        self.started_s = time.monotonic()

    def _log_grew(self, topic_id: uuid.UUID, partition: int, log_end_offset: int) -> None:
        """The producer appended: the group coordinator learns the new end offset (for its admin APIs)
        and the manager wakes the fetches waiting for records of this partition."""
        self.topics.set_latest_offset(topic_id, partition, log_end_offset)
        self.manager.on_append(topic_id, partition, log_end_offset)

    # -- the broker side --

    def leader(self, partition: int) -> SharePartition | None:
        """The manager's share-partition leader of one partition, once a fetch has loaded it."""
        return self.manager.share_partition(GROUP_ID, self.topic_id, partition)

    async def member_left(self, member_id: str) -> None:
        """A member left or its session ended: the manager releases what it still holds."""
        await self.manager.on_member_left(GROUP_ID, member_id)
        self.member_released(member_id)

    def member_released(self, member_id: str) -> None:
        """The manager released every record `member_id` held: account for them in the ledger."""
        for partition in range(self.partitions):
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
        """The timer service on simulated time: run the manager's lock-timer pass when the earliest
        acquisition lock falls due, and end the sessions of silent members."""
        next_session_check_ms = self.clock.now_ms() + TIMER_PERIOD_MS
        lock_timer = self.manager.lock_timer
        while True:
            next_lock_ms = lock_timer.next_deadline_ms
            if self.stopping and self.consumers_running == 0 and next_lock_ms < 0:
                return
            await self.virtual_time.sleep_until(min(next_session_check_ms, next_lock_ms)
                                                if next_lock_ms >= 0 else next_session_check_ms, Phase.IO)
            await self.manager.expire_due_locks()
            now_ms = self.clock.now_ms()
            if now_ms >= next_session_check_ms:
                next_session_check_ms = now_ms + TIMER_PERIOD_MS
                if self.consumers_running:
                    for member_id in await self.group.expire_members():
                        await self.member_left(member_id)

    def on_settled(self) -> None:
        """Every task waits: update the gauges and the progress bar, and decide whether to stop."""
        summary = self.summary
        for partition in range(self.partitions):
            leader = self.leader(partition)
            if leader is not None:
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
            self.manager._check()
            await self.manager.close()
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
            leader = self.leader(partition)
            log_end_offset = self.logs.log_end_offset(self.topic_id, partition)
            if leader is None:
                state = LeaderState(0, [], 0, log_end_offset, loaded=False)
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
