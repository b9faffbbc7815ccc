"""`SimulatedConsumer`: one of the demo's share consumers, on simulated time.

It behaves as a Kafka share consumer does on the wire: it joins the share group by heartbeat, opens a
share session with the broker (`SharePartitionManager`) by a ShareFetch at epoch 0 for its assigned
partitions, then polls with ShareFetch (one `max.poll.records` budget over all of them; the broker
long-polls when nothing is acquirable), spends simulated time processing, and acknowledges with
ShareAcknowledge; every request after the first carries the next session epoch. When the run ends it
closes the session (final epoch -1) and leaves the group. Sometimes it crashes instead: it just stops,
its records stay acquired until their locks expire, the group coordinator ends its membership after
the session timeout (the broker then drops its share session), and it comes back later as a new member.
What it decides comes from the run's `Workload`.

It sees the run that creates it (`run.DemoRun`) only through the `Cluster` protocol below: the run
imports this module, never the other way round.
"""

from __future__ import annotations

import logging
import uuid
from typing import NamedTuple, Protocol

from ...clock import ManualClock
from ...coordinator import GroupCoordinator
from ...errors import Errors, ShareError
from ...manager import next_epoch
from ...share_messages import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    AcknowledgePartition,
    AcknowledgeTopic,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from ...types import AcquiredRecords
from .ledger import Ledger
from .manager import SimulatedShareManager
from .simulation import Phase, VirtualTime
from .summary import DemoSummary
from .workload import (
    FETCH_MAX_WAIT_MS,
    GROUP_ID,
    MAX_POLL_RECORDS,
    POLL_OVERHEAD_MS,
    RECORD_PROCESSING_US,
    RECORD_SIZE_BYTES,
    RESTART_DELAY_MS,
    TOPIC_NAME,
    Workload,
)

__all__ = ["Cluster", "SimulatedConsumer"]

log = logging.getLogger(__name__)


class Cluster(Protocol):
    """What a consumer uses of the simulated cluster it runs in (`run.DemoRun`): the simulated time, the
    group coordinator and the broker it talks to, the workload and the ledger, and what it counts."""

    virtual_time: VirtualTime
    clock: ManualClock
    topic_id: uuid.UUID
    group: GroupCoordinator
    manager: SimulatedShareManager
    workload: Workload
    ledger: Ledger
    summary: DemoSummary
    stopping: bool  # the run is ending: stop consuming, close the share session and leave
    consumers_running: int  # a consumer takes itself off when it ends

    def member_released(self, member_id: str) -> None:
        """The broker released every record `member_id` held (its share session closed)."""

    async def member_left(self, member_id: str) -> None:
        """`member_id` left the group: the broker releases what it still holds."""


class Polled(NamedTuple):
    """What one share fetch acquired on one partition."""

    partition: int
    records: list[AcquiredRecords]
    acquired_at_ms: int


class SimulatedConsumer:
    """A simulated share consumer: joins the group, fetches from the broker, processes, acknowledges."""

    def __init__(self, demo: Cluster, index: int) -> None:
        self.demo = demo
        self.index = index
        self.incarnation = 0  # +1 at every restart: a new member id
        self.member_id = ""
        self.member_epoch = 0
        self.assignment: list[int] = []
        self.next_heartbeat_ms = 0
        self.polls = 0
        self.session_epoch = INITIAL_EPOCH  # the share session epoch of the next request
        self.session_partitions: list[int] = []  # what the share session fetches

    async def run(self) -> None:
        """Consume (restarting after each crash) until the run stops, then leave the group."""
        demo = self.demo
        try:
            await demo.virtual_time.sleep(0)  # join in rank order
            while not demo.stopping:
                self.member_id = demo.workload.member_id(self.index, self.incarnation)
                self.session_epoch, self.session_partitions = INITIAL_EPOCH, []
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

    # -- the group coordinator --

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
        """Close the share session (final epoch: the broker releases what it still holds), then leave."""
        demo = self.demo
        if self.session_epoch != INITIAL_EPOCH:
            response = await demo.manager.share_acknowledge(
                ShareAcknowledgeRequest(GROUP_ID, self.member_id, FINAL_EPOCH))
            if response.error_code is not Errors.NONE:
                log.warning("consumer %d: closing the share session: %s", self.index, response.error_code.name)
            demo.member_released(self.member_id)
        await demo.group.share_group_heartbeat(GROUP_ID, self.member_id, -1)
        await demo.member_left(self.member_id)

    # -- the broker --

    def _next_epoch(self) -> int:
        epoch = self.session_epoch
        self.session_epoch = next_epoch(epoch)
        return epoch

    async def _update_session(self) -> None:
        """Open the share session, or change its partitions to the assignment, with a ShareFetch that
        acquires nothing (MaxRecords 0): the broker loads the share-partitions now, in the I/O phase, so
        that fetches in the acquisition phase never wait for a durable read."""
        demo = self.demo
        added = [p for p in self.assignment if p not in self.session_partitions]
        removed = [p for p in self.session_partitions if p not in self.assignment]
        if not added and not removed and (self.session_epoch != INITIAL_EPOCH or not self.assignment):
            return
        request = ShareFetchRequest(
            GROUP_ID, self.member_id, self._next_epoch(), max_wait_ms=0, max_records=0,
            topics=(FetchTopic(demo.topic_id, tuple(FetchPartition(p) for p in added)),) if added else (),
            forgotten_topics_data=(ForgottenTopic(demo.topic_id, tuple(removed)),) if removed else (),
        )
        response = await demo.manager.share_fetch(request)
        if not self._session_ok(response.error_code):
            return
        self.session_partitions = list(self.assignment)

    def _session_ok(self, error: Errors) -> bool:
        """False when the broker refused the request at the session level: the next request opens a new
        share session (as a consumer does after SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH)."""
        if error is Errors.NONE:
            return True
        log.info("consumer %d: share session refused (%s); opening a new one", self.index, error.name)
        self.demo.summary.fetch_errors += 1
        self.session_epoch, self.session_partitions = INITIAL_EPOCH, []
        return False

    async def _consume(self) -> bool:
        """Poll until the run stops (returns False) or this consumer crashes (returns True)."""
        demo = self.demo
        while not demo.stopping:
            if demo.clock.now_ms() >= self.next_heartbeat_ms:
                await self._heartbeat()
            await self._update_session()
            if not self.session_partitions:  # nothing assigned (yet): ask the coordinator again later
                await demo.virtual_time.sleep(FETCH_MAX_WAIT_MS)
                continue
            await demo.virtual_time.sleep(0, Phase.ACQUIRE)
            polled = await self._poll()
            if not polled:
                continue  # the broker waited (long polling) before it answered with nothing
            records = sum(last - first + 1 for got in polled for first, last, _count in got.records)
            await demo.virtual_time.sleep(POLL_OVERHEAD_MS + records * RECORD_PROCESSING_US // 1000)
            if self._crashes(polled):
                for got in polled:
                    demo.ledger.hold(got.partition, self.member_id, got.records, got.acquired_at_ms)
                return True
            await self._acknowledge(polled)
        return False

    async def _poll(self) -> list[Polled]:
        """One ShareFetch over the session's partitions; the broker may hold it up to FETCH_MAX_WAIT_MS."""
        demo = self.demo
        self.polls += 1
        demo.summary.polls += 1
        request = ShareFetchRequest(
            GROUP_ID, self.member_id, self._next_epoch(), max_wait_ms=FETCH_MAX_WAIT_MS,
            max_records=MAX_POLL_RECORDS, batch_size=MAX_POLL_RECORDS,
            max_bytes=len(self.session_partitions) * MAX_POLL_RECORDS * RECORD_SIZE_BYTES,
        )
        response = await demo.manager.share_fetch(request)
        if not self._session_ok(response.error_code):
            return []
        now_ms = demo.clock.now_ms()
        polled = []
        for _topic_id, data in response.partitions():
            if data.error_code is not Errors.NONE:
                log.warning("consumer %d: fetch from partition %d: %s", self.index, data.partition_index,
                            data.error_code.name)
                demo.summary.fetch_errors += 1
            if data.acquired_records:
                records = list(data.acquired_records)
                demo.ledger.acquired(data.partition_index, records)
                polled.append(Polled(data.partition_index, records, now_ms))
        return polled

    def _crashes(self, polled: list[Polled]) -> bool:
        demo = self.demo
        if demo.workload.consumer_crashes(self.index, self.incarnation, self.polls):
            return True
        return any(demo.ledger.crashes_processing(got.partition, got.records) for got in polled)

    async def _acknowledge(self, polled: list[Polled]) -> None:
        """One ShareAcknowledge for everything the poll returned (the partitions' writes share commits)."""
        demo = self.demo
        batches = {got.partition: demo.ledger.acknowledgements(got.partition, got.records) for got in polled}
        request = ShareAcknowledgeRequest(
            GROUP_ID, self.member_id, self._next_epoch(),
            topics=(AcknowledgeTopic(demo.topic_id, tuple(AcknowledgePartition(p, tuple(batches[p]))
                                                           for p in sorted(batches))),),
        )
        response = await demo.manager.share_acknowledge(request)
        for got in polled:
            data = response.partition(demo.topic_id, got.partition)
            error = response.error_code if data is None else data.error_code
            if error is Errors.NONE:
                demo.ledger.acknowledged(got.partition, got.records, batches[got.partition])
                continue
            # Nothing changed: the records stay acquired until their locks expire.
            log.warning("consumer %d: acknowledgement on partition %d failed: %s", self.index, got.partition,
                        error.name)
            demo.summary.acknowledgement_errors += 1
            demo.ledger.hold(got.partition, self.member_id, got.records, got.acquired_at_ms)
