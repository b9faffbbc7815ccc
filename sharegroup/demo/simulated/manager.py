"""The demo's `SharePartitionManager` on simulated time, and what the demo listens to from it.

Layer 4 (an edge). The consumers of the demo talk to the manager as a broker's network edge would,
with ShareFetch and ShareAcknowledge requests. Two things tie the manager to the demo's `VirtualTime`:

- its clock is the demo's `ManualClock`, so long-poll deadlines fire when simulated time reaches them,
  and the demo's lock-timer task runs the manager's lock-timer passes (`expire_due_locks`) when the
  earliest acquisition-lock deadline falls due (the manager's own timer task is not started: a pass
  that writes while simulated time moves on would make runs depend on the machine's speed);
- a fetch that waits for records (long polling) counts as waiting in simulated time, and once woken it
  acquires in the acquisition phase of that instant, as every other fetch does, never while writes of
  the same instant are still in flight. That is the one method `SimulatedShareManager` overrides (`wait_for_records`, the manager's documented
  extension point).
"""

from __future__ import annotations

import uuid

from ...clock import Clock
from ...config import ShareGroupConfig
from ...manager import ManagerObserver, SharePartitionManager, WaitOutcome
from ...share_messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse
from .ledger import Ledger
from .simulation import Phase, VirtualTime

__all__ = ["DemoGroupConfigs", "LedgerObserver", "SimulatedShareManager"]


class DemoGroupConfigs:
    """The share-group configuration the demo runs its group with (a `GroupConfigSource`)."""

    def __init__(self, config: ShareGroupConfig) -> None:
        self.config = config

    def group_config(self, group_id: str) -> ShareGroupConfig:
        return self.config


class LedgerObserver(ManagerObserver):
    """Tells the ledger what only the broker sees (the acquisition locks its lock timer expired) and
    counts the requests it answered into the summary."""

    def __init__(self, ledger: Ledger, topic_id: uuid.UUID, clock: Clock) -> None:
        self.ledger = ledger
        self.topic_id = topic_id
        self.clock = clock

    def share_fetch_done(self, request: ShareFetchRequest, response: ShareFetchResponse, latency_ms: int) -> None:
        summary = self.ledger.summary
        summary.share_fetches += 1
        if latency_ms > 0:
            summary.share_fetches_held += 1

    def share_acknowledge_done(self, request: ShareAcknowledgeRequest, response: ShareAcknowledgeResponse,
                               latency_ms: int) -> None:
        self.ledger.summary.share_acknowledges += 1

    def locks_expired(self, group_id: str, topic_id: uuid.UUID, partition: int, records: int) -> None:
        if topic_id == self.topic_id:
            self.ledger.locks_expired(partition, self.clock.now_ms(), records)


class SimulatedShareManager(SharePartitionManager):
    """A SharePartitionManager whose long-polling fetches wait in simulated time (see the module doc)."""

    def __init__(self, *, virtual_time: VirtualTime, **kwargs) -> None:
        super().__init__(**kwargs)
        self.virtual_time = virtual_time

    async def wait_for_records(self, group_id: str, keys, deadline_ms: int) -> WaitOutcome:
        with self.virtual_time.waiting_elsewhere(deadline_ms, Phase.ACQUIRE):
            outcome = await super().wait_for_records(group_id, keys, deadline_ms)
        await self.virtual_time.sleep(0, Phase.ACQUIRE)
        return outcome
