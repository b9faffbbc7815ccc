"""Share-state maintenance in `sharegroup serve`: Kafka's prune job and cold-partition snapshot job.

The share state log is not compacted: without maintenance it grows for ever, and so does the replay on
every start. Kafka's share coordinator bounds it with two periodic jobs, and serve runs the same two:

- the **prune job**, every `share.coordinator.state.topic.prune.interval.ms` (default 5 min): delete the
  log below the lowest offset any live key still needs (`ShareCoordinator.prune`; whole segment files of
  the local log, DeleteRecords on a Kafka state topic);
- the **cold-partition snapshot job**, every `share.coordinator.cold.partition.snapshot.interval.ms`
  (default 5 min): re-checkpoint every key whose latest checkpoint is that old
  (`ShareCoordinator.checkpoint_idle_keys`), so a share-partition nobody writes stops pinning old
  segments; the next prune can then let them go.

Each job is an asyncio task owned by the share services: started with them, cancelled by their `close`
(a run in progress finishes first, so no prune is cut between its start-offset file and its deletions).
A failing run is logged, counted, and the job runs again one interval later; it never stops the broker.
The next run is due one interval after the previous one ended, on the services' `Clock`, so a test drives
the jobs with a `ManualClock` (or calls `run_prune` / `run_cold_snapshots` directly).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from prometheus_client import CollectorRegistry

from persister.maintenance import PruneOutcome, prune_measured
from persister.share_coordinator import ShareCoordinator

from ..clock import Clock, SystemClock, call_at
from .share_state_metrics import ShareStateMetrics, share_state_metrics_for

__all__ = ["ShareStateMaintenance"]

log = logging.getLogger("sharegroup.server.maintenance")


class ShareStateMaintenance:
    """The prune and cold-snapshot jobs of one share coordinator; `start()`, then `await close()`.

    `prune_interval_ms` is the prune job's period; the cold job's period is the coordinator's
    `cold_checkpoint_interval_ms`, which is also how old a checkpoint must be to count as cold (Kafka uses
    one config for both). `prune_runs`, `prune_failures`, `cold_snapshot_runs`, `cold_snapshot_failures`
    and `last_prune` say what the jobs did.
    """

    def __init__(self, coordinator: ShareCoordinator, *, prune_interval_ms: int = 300_000,
                 clock: Clock | None = None, registry: CollectorRegistry | None = None) -> None:
        if isinstance(prune_interval_ms, bool) or not isinstance(prune_interval_ms, int) or prune_interval_ms < 1:
            raise ValueError(f"share.coordinator.state.topic.prune.interval.ms must be an int >= 1, "
                             f"not {prune_interval_ms!r}")
        self.coordinator = coordinator
        self.prune_interval_ms = prune_interval_ms
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.metrics: ShareStateMetrics = share_state_metrics_for(registry)
        self.prune_runs = 0
        self.prune_failures = 0
        self.cold_snapshot_runs = 0
        self.cold_snapshot_failures = 0
        self.last_prune: PruneOutcome | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def cold_snapshot_interval_ms(self) -> int:
        return self.coordinator.cold_checkpoint_interval_ms

    @property
    def running(self) -> bool:
        return any(not task.done() for task in self._tasks)

    def start(self) -> None:
        """Start both jobs on the running loop; each runs first one interval from now."""
        if self._tasks:
            raise RuntimeError("share-state maintenance is already started")
        self._tasks = [
            asyncio.create_task(self._every(lambda: self.prune_interval_ms, self.run_prune),
                                name="share-state prune"),
            asyncio.create_task(self._every(lambda: self.cold_snapshot_interval_ms, self.run_cold_snapshots),
                                name="share-state cold snapshots"),
        ]

    async def close(self) -> None:
        """Stop both jobs (a run in progress finishes first). Idempotent."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one run of each job ---------------------------------------------------------------------------

    async def run_prune(self) -> PruneOutcome | None:
        """One run of the prune job: delete the redundant prefix of the log; the outcome, or None when the
        run failed (logged and counted)."""
        started = time.perf_counter()
        m = self.metrics
        try:
            outcome = await prune_measured(self.coordinator)
        except Exception:
            self.prune_failures += 1
            m.failures.labels(job="prune").inc()
            log.exception("share-state prune failed (the next runs in %d ms)", self.prune_interval_ms)
            return None
        finally:
            m.duration_seconds.labels(job="prune").observe(time.perf_counter() - started)
        self.prune_runs += 1
        self.last_prune = outcome
        m.runs.labels(job="prune").inc()
        m.last_redundant_offset.set(outcome.last_redundant_offset)
        if outcome.records_deleted:
            m.pruned_records.inc(outcome.records_deleted)
            m.pruned_segments.inc(outcome.segments_deleted)
            m.pruned_bytes.inc(outcome.bytes_reclaimed)
            log.info("share-state log pruned below offset %d: %d records, %d segment files, %d bytes",
                     outcome.start_offset, outcome.records_deleted, outcome.segments_deleted,
                     outcome.bytes_reclaimed)
        return outcome

    async def run_cold_snapshots(self) -> int | None:
        """One run of the cold-partition snapshot job: a fresh checkpoint of every key whose latest one is
        `cold_snapshot_interval_ms` old; how many were written, or None when the run failed."""
        started = time.perf_counter()
        m = self.metrics
        try:
            written = await self.coordinator.checkpoint_idle_keys()
        except Exception:
            self.cold_snapshot_failures += 1
            m.failures.labels(job="cold_snapshot").inc()
            log.exception("share-state cold-partition snapshots failed (the next run in %d ms)",
                          self.cold_snapshot_interval_ms)
            return None
        finally:
            m.duration_seconds.labels(job="cold_snapshot").observe(time.perf_counter() - started)
        self.cold_snapshot_runs += 1
        m.runs.labels(job="cold_snapshot").inc()
        if written:
            m.cold_snapshots.inc(written)
            log.info("share-state cold-partition snapshots written: %d", written)
        return written

    # -- scheduling ------------------------------------------------------------------------------------

    async def _every(self, interval_ms: Callable[[], int], run: Callable[[], Awaitable[object]]) -> None:
        """Run `run` one interval after the previous run ended, until cancelled; a run in progress when
        the cancellation comes is let finish (it is shielded), then the cancellation goes on."""
        while True:
            await self._until(self.clock.now_ms() + interval_ms())
            running = asyncio.ensure_future(run())
            try:
                await asyncio.shield(running)
            except asyncio.CancelledError:
                while not running.done():
                    try:
                        await asyncio.shield(running)
                    except asyncio.CancelledError:
                        pass
                raise

    async def _until(self, when_ms: int) -> None:
        """Wait until the clock reads `when_ms` (a timer on the clock; re-armed if it fired early)."""
        loop = asyncio.get_running_loop()
        while self.clock.now_ms() < when_ms:
            due: asyncio.Future[None] = loop.create_future()
            timer = call_at(self.clock, when_ms, lambda: _wake(due))
            try:
                await due
            finally:
                timer.cancel()


def _wake(due: asyncio.Future[None]) -> None:
    if not due.done():
        due.set_result(None)
