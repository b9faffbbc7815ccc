"""The transaction coordinator `sharegroup serve` embeds, wired over the topic store and the group
coordinator, its state durable under `DIR/transactions` (the role of `__transaction_state`).

- state: `group_records.FileRecordSink` in `DIR/transactions/records.log`: one record per transition,
  fsync'd before the coordinator answers, compacted so that the file follows the live transactional
  ids (an expired id leaves a tombstone that compaction drops);
- markers: COMMIT/ABORT control batches appended by the topic store (`StoreMarkers`), which keeps the
  last stable offset and the aborted-transaction index that Fetch, ListOffsets and the share-partition
  leader read;
- producer ids: the topic store's durable blocks, shared with idempotent producers;
- offsets: TxnOffsetCommit through the group coordinator of the share services (None: TxnOffsetCommit
  answers COORDINATOR_NOT_AVAILABLE);
- jobs: every `transaction.abort.timed.out.transaction.cleanup.interval.ms` the transactions past their
  timeout are aborted (and prepared ones whose markers failed are completed); every
  `transaction.remove.expired.transaction.cleanup.interval.ms` transactional ids idle for
  `transactional.id.expiration.ms` are removed.

    transactions = await TransactionServices.open(data_dir, config, store, share)  # loads, completes prepared
    await transactions.start(); ...; await transactions.close()
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..clock import Clock, SystemClock
from ..coordinator.transactions import TransactionCoordinator
from ..errors import Errors, ShareError
from .broker_config import ServeConfig
from .group_records import FileRecordSink

__all__ = ["TransactionServices", "StoreMarkers", "TRANSACTIONS_DIR"]

log = logging.getLogger("sharegroup.server")

TRANSACTIONS_DIR = "transactions"


class StoreMarkers:
    """The coordinator's `MarkerWriter` over the topic store: a partition that no longer exists (its
    topic deleted) is skipped, as Kafka drops a partition without a leader from the marker set."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           commit: bool) -> None:
        info = self.store.topic_by_name(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return
        await self.store.write_transaction_marker(info.topic_id, partition, producer_id, producer_epoch, commit=commit)


def _new_producer_id(store: Any) -> Callable[[], int]:
    def allocate() -> int:
        producer_id, _epoch = store.init_producer_id()
        return int(producer_id)
    return allocate


class TransactionServices:
    """The coordinator and its periodic jobs: `await TransactionServices.open(...)`, `await start()`,
    `await close()`."""

    def __init__(self, coordinator: TransactionCoordinator, sink: FileRecordSink, config: ServeConfig,
                 verification: bool) -> None:
        self.coordinator = coordinator
        self.sink = sink
        self.config = config
        self.verification = verification  # transaction.partition.verification.enable
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(cls, data_dir: Path | str, config: ServeConfig, store: Any, share: Any = None, *,
                   clock: Clock | None = None, fsync: bool = True) -> "TransactionServices":
        """Replay `DIR/transactions` and complete the transactions a crash left prepared."""
        sink = FileRecordSink.open(Path(data_dir) / TRANSACTIONS_DIR, fsync=fsync, what="transaction state")
        try:
            coordinator = TransactionCoordinator(
                sink, StoreMarkers(store), _new_producer_id(store), clock if clock is not None else SystemClock(),
                max_timeout_ms=config["transaction.max.timeout.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
                offsets_partitions=config["offsets.topic.num.partitions"],
                offsets=share.coordinator if share is not None else None)
            completed = await coordinator.load()
        except BaseException:
            sink.close()
            raise
        if completed:
            log.info("transactions: completed %d transactions a restart left prepared", completed)
        return cls(coordinator, sink, config, bool(config["transaction.partition.verification.enable"]))

    async def start(self) -> None:
        """Start the periodic jobs (on the running loop)."""
        config = self.config
        self._tasks = [
            asyncio.create_task(_every(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000,
                                       self.coordinator.abort_timed_out, "transaction timeouts"),
                                name="transaction timeouts"),
            asyncio.create_task(_every(config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000,
                                       self.coordinator.expire_transactional_ids, "transactional id expiry"),
                                name="transactional id expiry"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.sink.close()

    def verify_produce(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                       partition: int, produce_version: int) -> Errors:
        """KIP-890: the error a transactional produce to (topic, partition) gets when the partition is not
        in the producer's ongoing transaction, mapped as Kafka maps it for `produce_version` (v10 and
        older: INVALID_TXN_STATE for TRANSACTION_ABORTABLE, NOT_ENOUGH_REPLICAS for the retriable
        answers); NONE when it may be appended."""
        if not self.verification:
            return Errors.NONE
        error = self.coordinator.verify_partition(transactional_id, producer_id, producer_epoch, topic, partition)
        if produce_version <= 10:
            if error == Errors.TRANSACTION_ABORTABLE:
                return Errors.INVALID_TXN_STATE
            if error == Errors.CONCURRENT_TRANSACTIONS:
                return Errors.NOT_ENOUGH_REPLICAS
        elif error == Errors.CONCURRENT_TRANSACTIONS:
            return Errors.NOT_ENOUGH_REPLICAS
        return error


async def _every(interval_s: float, step: Callable[[], Awaitable[Any]], what: str) -> None:
    """Run `step` every `interval_s` seconds; a failing pass is logged and the next one runs anyway."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await step()
        except ShareError as exc:
            log.warning("%s: %s", what, exc)
        except Exception:
            log.exception("%s failed", what)
