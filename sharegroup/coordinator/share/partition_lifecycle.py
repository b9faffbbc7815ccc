"""The share-partition state lifecycle of a share group: two-stage initialization and deletion.

A share-partition's durable state (in the share coordinator, reached only through the `Persister`
protocol) is created and removed in two stages, each stage a committed record, so a crash or a failed
call between them leaves a state the next attempt can finish:

- initialization: the partitions become *initializing* (record), `persister.initialize_state` runs
  with state epoch = group epoch, and they become *initialized* or leave *initializing* to be retried
  (record). Only initialized partitions are ever assigned.
- deletion: the partitions become *deleting* (record), `persister.delete_state` runs, and the ones
  whose state is gone leave *deleting* (record); the others stay, and the next call retries them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Awaitable, Callable, TypeVar

from ...errors import Errors, ShareError
from ...persistence import Persister
from ..group_store import GroupStore
from ..records import Record
from ..topics import TopicInfo
from .group import ShareGroup, TopicEntry, add_partitions, all_partitions_of, remove_partitions
from .record_helpers import group_epoch_record, partition_metadata_record

__all__ = ["PERSISTER_ATTEMPTS", "PartitionStateLifecycle"]

log = logging.getLogger(__name__)

# Attempts per persister call when it fails with a retriable error (Kafka's persister client retries
# likewise before giving up). What still fails is retried by the next heartbeat (initialization) or the
# next admin call (deletion).
PERSISTER_ATTEMPTS = 3

T = TypeVar("T")

# (topic id, partition, start offset) of one share-partition to initialize.
InitializeItem = tuple[uuid.UUID, int, int]


class PartitionStateLifecycle:
    """Drives share-partition state through initializing / initialized / deleting for the coordinator."""

    def __init__(self, store: GroupStore, persister: Persister) -> None:
        self.store = store
        self.persister = persister

    # -- initialization on heartbeat -------------------------------------------------------------------

    async def initialize_subscribed(self, group: ShareGroup, image: dict[str, TopicInfo]) -> None:
        """Two-stage initialization of every partition of a subscribed topic that is not initialized.

        A partition still *initializing* here was left so by a crash or a failed append between the
        stages (under the group lock nothing else is in flight), so it is driven again. New partitions
        of a topic the group already consumes start at offset 0; a topic new to the group at -1 (the
        share-partition leader resolves it with `share.auto.offset.reset`). A partition whose
        initialization failed is retried with the start offset it was meant to get, even if its
        siblings made the topic "already consumed" meanwhile.
        """
        group.initialize_check_needed = False
        to_initialize: dict[uuid.UUID, tuple[str, set[int], int]] = {}
        for name in sorted(group.subscription_counts):
            info = image.get(name)
            if info is None or info.num_partitions == 0:
                continue
            known = group.initialized.get(info.topic_id)
            missing = set(range(info.num_partitions))
            if known is not None:
                missing -= known.partitions
            if missing:
                to_initialize[info.topic_id] = (name, missing, 0 if known is not None else -1)
        if not to_initialize:
            group.retry_start_offsets.clear()
            return
        group_id = group.group_id
        try:
            # Stage 1.
            initializing = dict(group.initializing)
            deleting = dict(group.deleting)
            for topic_id, (name, partitions, _start) in to_initialize.items():
                add_partitions(initializing, topic_id, name, partitions)
                if remove_partitions(deleting, topic_id, partitions):
                    log.warning("share group %s: topic %s was being deleted; initializing it again", group_id, name)
            await self.store.commit([partition_metadata_record(group_id, initializing, group.initialized, deleting)])
            retry = group.retry_start_offsets
            items = [
                (topic_id, partition, retry.get((topic_id, partition), start))
                for topic_id, (_name, partitions, start) in to_initialize.items()
                for partition in sorted(partitions)
            ]
            errors = await self._initialize_state(group_id, group.group_epoch, items)
            # Stage 2: every attempted partition leaves initializing, initialized or not (then retried).
            initialized = dict(group.initialized)
            initializing = dict(group.initializing)
            newly_assignable = False
            for (topic_id, partition, start_offset), error in zip(items, errors):
                remove_partitions(initializing, topic_id, {partition})
                name = to_initialize[topic_id][0]
                if error is Errors.NONE:
                    add_partitions(initialized, topic_id, name, {partition})
                    newly_assignable = True
                    retry.pop((topic_id, partition), None)
                else:
                    retry[(topic_id, partition)] = start_offset
                    log.warning(
                        "share group %s: initializing %s-%d failed (%s); retried on the next heartbeat",
                        group_id, name, partition, error.name,
                    )
            records = [partition_metadata_record(group_id, initializing, initialized, group.deleting)]
            if newly_assignable and group.assignment_epoch >= group.group_epoch:
                # Initialized partitions not yet in the target assignment: bump so the assignor runs.
                records.append(group_epoch_record(group_id, group.group_epoch + 1, group.metadata_hash))
            await self.store.commit(records)
        except BaseException:
            # The replays of successful commits set the flag again; a failure must too, so the next
            # heartbeat retries what is left.
            group.initialize_check_needed = True
            raise

    # -- reset by alter offsets ------------------------------------------------------------------------

    async def reset_start_offsets(
        self,
        group: ShareGroup,
        offsets: dict[uuid.UUID, tuple[str, dict[int, int]]],
        records: list[Record],
    ) -> list[tuple[InitializeItem, Errors]]:
        """(Re)initialize the share-partitions of `offsets` (topic id -> (name, {partition: start
        offset})) with the current group epoch; returns each item with the persister's answer.

        `group` may be a group not registered yet, built by replaying `records` (its creation records),
        which are committed first together with stage 1. Partitions the group had no state for go
        through *initializing* and become initialized only if their call succeeded; initialized ones
        stay initialized whatever the answer (their old state is still there or replaced)."""
        group_id = group.group_id
        # Stage 1: partitions without state become initializing; none of them is deleting any more.
        initializing = dict(group.initializing)
        deleting = dict(group.deleting)
        fresh: dict[uuid.UUID, set[int]] = {}
        for topic_id, (name, partitions) in offsets.items():
            known = group.initialized.get(topic_id)
            new = {p for p in partitions if known is None or p not in known.partitions}
            if new:
                fresh[topic_id] = new
                add_partitions(initializing, topic_id, name, new)
            remove_partitions(deleting, topic_id, partitions)
        if fresh or deleting != group.deleting:
            records = [*records, partition_metadata_record(group_id, initializing, group.initialized, deleting)]
        await self.store.commit(records)
        group = self.store.groups[group_id]
        items = [
            (topic_id, partition, start_offset)
            for topic_id, (_name, partitions) in offsets.items()
            for partition, start_offset in partitions.items()
        ]
        errors = await self._initialize_state(group_id, group.group_epoch, items)
        # Stage 2: the new partitions that initialized become initialized; the others go back.
        initialized = dict(group.initialized)
        initializing = dict(group.initializing)
        for (topic_id, partition, _start), error in zip(items, errors):
            if partition in fresh.get(topic_id, ()):
                remove_partitions(initializing, topic_id, {partition})
                if error is Errors.NONE:
                    add_partitions(initialized, topic_id, offsets[topic_id][0], {partition})
            if error is not Errors.NONE:
                log.warning("alter offsets of %s %s-%d failed: %s", group_id, topic_id, partition, error.name)
        if fresh:
            await self.store.commit([partition_metadata_record(group_id, initializing, initialized, group.deleting)])
        return list(zip(items, errors))

    # -- deletion ------------------------------------------------------------------------------------

    async def delete_topics(self, group: ShareGroup, to_delete: dict[uuid.UUID, TopicEntry]) -> dict[uuid.UUID, Errors]:
        """Two-stage deletion of whole topics' share-partition state (delete offsets): they leave
        initializing/initialized for deleting, then deleting once every partition's state is gone.
        Returns the first persister error per topic that failed (those stay deleting)."""
        group_id = group.group_id
        initializing = {t: e for t, e in group.initializing.items() if t not in to_delete}
        initialized = {t: e for t, e in group.initialized.items() if t not in to_delete}
        deleting = {**group.deleting, **to_delete}
        await self.store.commit([partition_metadata_record(group_id, initializing, initialized, deleting)])
        failed = await self.delete_state(group_id, to_delete)
        done = [t for t in to_delete if t not in failed]
        if done:
            group = self.store.groups[group_id]
            deleting = {t: e for t, e in group.deleting.items() if t not in done}
            await self.store.commit(
                [partition_metadata_record(group_id, group.initializing, group.initialized, deleting)]
            )
        return failed

    async def delete_all(self, group: ShareGroup) -> dict[uuid.UUID, Errors]:
        """Stage 1 and the persister calls of deleting a group: every topic it holds state for becomes
        deleting and its state is deleted. Returns the first error per topic that failed; the caller
        tombstones the group when none did."""
        to_delete: dict[uuid.UUID, TopicEntry] = {}
        for topic_id in {*group.initialized, *group.initializing, *group.deleting}:
            entry = all_partitions_of(group, topic_id)
            assert entry is not None
            to_delete[topic_id] = entry
        if group.initialized or group.initializing:
            await self.store.commit([partition_metadata_record(group.group_id, {}, {}, to_delete)])
        return await self.delete_state(group.group_id, to_delete)

    async def delete_state(self, group_id: str, to_delete: dict[uuid.UUID, TopicEntry]) -> dict[uuid.UUID, Errors]:
        """Delete every partition's state; returns the first error per topic that failed."""
        items = [(t, p) for t, entry in sorted(to_delete.items()) for p in sorted(entry.partitions)]
        errors = await asyncio.gather(
            *(
                self.call_persister_error(lambda t=t, p=p: self.persister.delete_state(group_id, t, p))
                for t, p in items
            )
        )
        failed: dict[uuid.UUID, Errors] = {}
        for (topic_id, partition), error in zip(items, errors):
            if error is not Errors.NONE:
                failed.setdefault(topic_id, error)
                log.warning("deleting state of %s %s-%d failed: %s", group_id, topic_id, partition, error.name)
        return failed

    # -- persister calls -------------------------------------------------------------------------------

    async def _initialize_state(self, group_id: str, state_epoch: int, items: list[InitializeItem]) -> list[Errors]:
        return await asyncio.gather(
            *(
                self.call_persister_error(
                    lambda t=t, p=p, start=start: self.persister.initialize_state(
                        group_id, t, p, state_epoch=state_epoch, start_offset=start
                    )
                )
                for t, p, start in items
            )
        )

    async def call_persister(self, call: Callable[[], Awaitable[T]]) -> tuple[T | None, Errors]:
        """Run one persister call, retrying retriable errors up to PERSISTER_ATTEMPTS times."""
        error = Errors.UNKNOWN_SERVER_ERROR
        for _attempt in range(PERSISTER_ATTEMPTS):
            try:
                return await call(), Errors.NONE
            except ShareError as exc:
                error = exc.error
                if not error.retriable:
                    break
            except Exception:  # a broken persister is reported per partition, never crashes the caller
                log.exception("persister call failed")
                error = Errors.UNKNOWN_SERVER_ERROR
                break
        return None, error

    async def call_persister_error(self, call: Callable[[], Awaitable[Any]]) -> Errors:
        return (await self.call_persister(call))[1]
