"""`LocalPersister`: the Persister protocol over an embedded ShareCoordinator over a SegmentLog.

The durable twin of InMemoryPersister: the same coordinator (every rule lives there), but its records
go to checksummed, fsync'd segment files in one directory and are replayed from them on open.
"""

from __future__ import annotations

import os
import time

from sharegroup.clock import Clock, SystemClock

from .coordinator_persister import CoordinatorPersister
from .share_coordinator import ShareCoordinator
from .state_log import SegmentLog
from .state_log_metrics import metrics_for

__all__ = ["LocalPersister"]


class LocalPersister(CoordinatorPersister):
    """A Persister whose state is durable in `log_dir`; build it with `await LocalPersister.open(...)`.

    Every call is answered by the embedded `coordinator` and only after its record is fsync'd (with the
    default `fsync=True`); concurrent calls for different share-partitions share group commits.
    """

    def __init__(self, coordinator: ShareCoordinator) -> None:
        if not isinstance(coordinator.log, SegmentLog):
            raise TypeError("a LocalPersister runs over a SegmentLog; use `await LocalPersister.open(log_dir)`")
        self.coordinator = coordinator
        self.replay_seconds = 0.0  # time the latest open spent replaying the log into the coordinator

    @classmethod
    async def open(
        cls,
        log_dir: str | os.PathLike,
        *,
        snapshot_update_records_per_snapshot: int = 500,
        cold_checkpoint_interval_ms: int = 300_000,
        clock: Clock = SystemClock(),
        **log_options,
    ) -> LocalPersister:
        """Open (creating if needed) the state log in `log_dir` and replay it; `log_options` go to
        `SegmentLog.open` (fsync, segment_bytes, max_pending_appends, max_group_bytes, metrics_registry).

        Raises CorruptLogError for a corrupt log (nothing changed) and LogLockedError when the directory
        is already open elsewhere.
        """
        started = time.perf_counter()
        coordinator = await ShareCoordinator.open(
            os.fspath(log_dir),
            snapshot_update_records_per_snapshot=snapshot_update_records_per_snapshot,
            cold_checkpoint_interval_ms=cold_checkpoint_interval_ms,
            clock=clock,
            **log_options,
        )
        log = coordinator.log
        assert isinstance(log, SegmentLog)
        replay_seconds = max(0.0, time.perf_counter() - started - log.recovery_seconds)
        metrics = metrics_for(log_options.get("metrics_registry"))
        metrics.recovery_seconds.labels(log=log.log_dir, stage="replay").observe(replay_seconds)
        persister = cls(coordinator)
        persister.replay_seconds = replay_seconds
        return persister

    @property
    def log(self) -> SegmentLog:
        return self.coordinator.log  # type: ignore[return-value]

    @property
    def log_dir(self) -> str:
        return self.log.log_dir

    async def close(self) -> None:
        """Let writes in flight finish, then close the coordinator and the log (releasing the directory)."""
        await self.coordinator.close()
