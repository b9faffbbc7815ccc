"""The manager's share-partitions: created lazily, initialized through the persister, never cached broken.

Kafka's `SharePartitionCache` plus the creation and "fenced handler" parts of `SharePartitionManager`.
An entry is made on the first request that touches (group, topic, partition) and initialized from the
persister's durable state (its start offset -1 resolved through the log's offset look-up). A
share-partition whose initialization fails, or that is later fenced or fails, is dropped: the request
gets Kafka's code for that partition, and the next request creates and initializes it afresh.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Callable, Iterator, Sequence

from ..clock import Clock
from ..config import ShareGroupConfig
from ..errors import Errors, ShareError
from ..logs import PartitionLogs
from .dead_letters import DeadLetterSink
from .share_partition import SharePartition, SharePartitionStatus
from ..persistence import Persister

__all__ = ["DROPPING_ERRORS", "SharePartitionCache", "SharePartitionEntry", "log_error"]

ShareKey = tuple[str, uuid.UUID, int]

# Errors after which Kafka removes a share-partition from its cache (the "fenced handler"): the next
# request re-creates it and re-reads the durable state.
DROPPING_ERRORS = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.FENCED_STATE_EPOCH,
    Errors.FENCED_LEADER_EPOCH,
    Errors.GROUP_ID_NOT_FOUND,
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
})


def log_error(logs: PartitionLogs, topic_id: uuid.UUID, partition: int) -> Errors:
    """NONE when this broker has the partition's log; otherwise UNKNOWN_TOPIC_ID when it has no log of the
    topic at all (every topic has partition 0) and UNKNOWN_TOPIC_OR_PARTITION when only the partition is
    missing."""
    if logs.has_partition(topic_id, partition):
        return Errors.NONE
    if partition != 0 and logs.has_partition(topic_id, 0):
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    return Errors.UNKNOWN_TOPIC_ID


class SharePartitionEntry:
    """One share-partition of the manager and the bookkeeping around it.

    `timer_deadline_ms` is the lock deadline the lock timer has it queued at (-1: not queued);
    `log_start_offset` the log start last pushed into it; `dropped` is set once it left the cache (it
    may still be referenced by a waiting fetch or the timer heap, which then skip it), with
    `drop_error` the code requests that still hold it answer.
    """

    __slots__ = ("key", "sp", "timer_deadline_ms", "log_start_offset", "dropped", "drop_error")

    def __init__(self, key: ShareKey, sp: SharePartition) -> None:
        self.key = key
        self.sp = sp
        self.timer_deadline_ms = -1
        self.log_start_offset = -1
        self.dropped = False
        self.drop_error = Errors.NONE

    @property
    def group_id(self) -> str:
        return self.key[0]

    @property
    def topic_id(self) -> uuid.UUID:
        return self.key[1]

    @property
    def partition(self) -> int:
        return self.key[2]

    def next_lock_deadline_ms(self) -> int:
        return self.sp.next_lock_deadline_ms() if self.sp.status is SharePartitionStatus.ACTIVE else -1

    def __repr__(self) -> str:
        return f"SharePartitionEntry({self.key[0]}:{self.key[1]}:{self.key[2]}, {self.sp.status.value})"


class SharePartitionCache:
    """Share-partitions by (group, topic id, partition), with a per-group index for group-wide drops."""

    def __init__(
        self,
        *,
        persister: Persister,
        logs: PartitionLogs,
        clock: Clock,
        group_config: Callable[[str], ShareGroupConfig],
        on_loaded: Callable[[SharePartitionEntry, int], None] | None = None,
        dead_letters: DeadLetterSink | None = None,
    ) -> None:
        self._persister = persister
        self._dead_letters = dead_letters
        self._logs = logs
        self._clock = clock
        self._group_config = group_config
        self._on_loaded = on_loaded
        self._entries: dict[ShareKey, SharePartitionEntry] = {}
        self._by_group: dict[str, dict[ShareKey, SharePartitionEntry]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[SharePartitionEntry]:
        return iter(list(self._entries.values()))

    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartitionEntry | None:
        return self._entries.get((group_id, topic_id, partition))

    async def get_or_create(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartitionEntry:
        """The initialized share-partition, created and initialized on first use; concurrent callers
        share one initialization. Raises ShareError with the partition's code (and drops the entry)."""
        key = (group_id, topic_id, partition)
        entry = self._entries.get(key)
        if entry is None:
            missing = log_error(self._logs, topic_id, partition)
            if missing is not Errors.NONE:
                raise ShareError(missing, f"this broker has no log for {topic_id}-{partition}")
            sp = SharePartition(
                group_id,
                topic_id,
                partition,
                persister=self._persister,
                config=self._group_config(group_id),
                clock=self._clock,
                offset_lookup=functools.partial(self._logs.offset_for, topic_id, partition),
                dead_letters=self._dead_letters,
            )
            entry = SharePartitionEntry(key, sp)
            self._entries[key] = entry
            self._by_group.setdefault(group_id, {})[key] = entry
        sp = entry.sp
        if sp.status is SharePartitionStatus.ACTIVE:
            return entry
        started_ms = self._clock.now_ms()
        first = sp.status is SharePartitionStatus.EMPTY
        try:
            await sp.initialize()
        except ShareError as exc:
            self.drop(entry, exc.error)
            raise
        if first and self._on_loaded is not None:
            self._on_loaded(entry, self._clock.now_ms() - started_ms)
        if entry.dropped:  # dropped while it initialized (group deleted, offsets reset)
            raise ShareError(entry.drop_error, "the share-partition was dropped while it initialized")
        return entry

    async def get_all(self, group_id: str, keys: Sequence[tuple[uuid.UUID, int]],
                      ) -> tuple[dict[tuple[uuid.UUID, int], SharePartitionEntry], dict[tuple[uuid.UUID, int], ShareError]]:
        """The initialized share-partitions of `keys` (topic id, partition), and the error of each that
        could not be had. The common case, loaded and active, needs no await; the others initialize
        concurrently."""
        entries: dict[tuple[uuid.UUID, int], SharePartitionEntry] = {}
        errors: dict[tuple[uuid.UUID, int], ShareError] = {}
        to_load = []
        for key in keys:
            entry = self._entries.get((group_id, key[0], key[1]))
            if entry is not None and entry.sp.status is SharePartitionStatus.ACTIVE:
                entries[key] = entry
            else:
                to_load.append(key)
        if to_load:
            async def one(key: tuple[uuid.UUID, int]) -> SharePartitionEntry | ShareError:
                try:
                    return await self.get_or_create(group_id, key[0], key[1])
                except ShareError as exc:
                    return exc

            for key, result in zip(to_load, await asyncio.gather(*(one(key) for key in to_load))):
                if isinstance(result, ShareError):
                    errors[key] = result
                else:
                    entries[key] = result
        return entries, errors

    def drop(self, entry: SharePartitionEntry, error: Errors) -> bool:
        """Remove `entry` from the cache (it is re-created on the next request); True if it was cached."""
        if entry.dropped:
            return False
        entry.dropped = True
        entry.drop_error = error
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            group = self._by_group.get(entry.group_id)
            if group is not None:
                group.pop(entry.key, None)
                if not group:
                    del self._by_group[entry.group_id]
        return True

    def of_group(self, group_id: str) -> list[SharePartitionEntry]:
        return list(self._by_group.get(group_id, {}).values())

    def _check(self) -> None:
        assert sum(len(g) for g in self._by_group.values()) == len(self._entries)
        for key, entry in self._entries.items():
            assert entry.key == key and not entry.dropped
            assert self._by_group[key[0]][key] is entry
            if entry.sp.status is SharePartitionStatus.ACTIVE:
                entry.sp._check()
