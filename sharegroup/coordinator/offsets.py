"""Committed offsets of consumer groups: OffsetCommit, OffsetFetch, OffsetDelete and offset retention.

Offsets are kept per group id and (topic name, partition), as OffsetCommit records in the coordinator's
record sink (replayed like every other record, so they survive a restart). Which members may commit,
fetch or delete depends on the group's type, so each type registers `OffsetHooks`: classic groups check
generations and member ids (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
FENCED_INSTANCE_ID); KIP-848 consumer groups check member epochs (STALE_MEMBER_EPOCH, ...).

Kafka's rules kept here:
- a commit with a negative generation to a group that does not exist creates a "simple" classic group
  (offsets only), whatever member id it carries; with a generation >= 0 it is GROUP_ID_NOT_FOUND from
  OffsetCommit v9 on and ILLEGAL_GENERATION before;
- metadata longer than `offset.metadata.max.bytes` is OFFSET_METADATA_TOO_LARGE for that partition;
  despite the key's name Kafka measures the length of the Java string (UTF-16 code units), not its
  UTF-8 bytes, and so does this module;
- a fetch of a group that does not exist answers offset -1 for every partition asked (no error); a
  fetch of every offset then answers none;
- OffsetDelete refuses topics the group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and is idempotent for
  partitions without an offset;
- retention (`offsets.retention.minutes`): an offset expires once that long has passed since its group
  became Empty, or since its commit for a simple group and for topics a Stable consumer group no longer
  subscribes to (an explicit expiry from OffsetCommit v2-4 wins); an Empty group left without offsets is
  deleted.
Callers hold the group's lock.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, NamedTuple

from ..clock import Clock
from ..errors import Errors, ShareError
from .classic.config import ClassicGroupConfig
from .classic.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from .classic.responses import CommittedOffset
from .group_store import GroupStore
from .records import Record

__all__ = ["CommitRequest", "CommittedOffsets", "OffsetHooks"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def _java_length(text: str) -> int:
    """The length Java's String.length() reports: UTF-16 code units (a character outside the BMP counts 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class OffsetHooks(NamedTuple):
    """What the offsets APIs ask a group type. Every function takes the group id (of an existing group
    of that type) first and raises ShareError to refuse.

    - validate_commit(group_id, member_id, group_instance_id, generation_id_or_member_epoch, api_version)
    - validate_fetch(group_id, member_id, member_epoch): member_id None / epoch -1 when not given
    - validate_delete(group_id)
    - subscribed_topics(group_id) -> set of topic names, or None when unknown (nothing expires then)
    - expiration_base(group_id) -> None (no offset expires now) or a function OffsetCommitValue -> the
      timestamp its age counts from
    - is_empty(group_id) -> whether a group left without offsets may be deleted
    """

    validate_commit: Callable[[str, str, str | None, int, int], None]
    validate_fetch: Callable[[str, str | None, int], None]
    validate_delete: Callable[[str], None]
    subscribed_topics: Callable[[str], set[str] | None]
    expiration_base: Callable[[str], Callable[[OffsetCommitValue], int] | None]
    is_empty: Callable[[str], bool]


class CommitRequest(NamedTuple):
    """One partition of an OffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class CommittedOffsets:
    """The offsets APIs over `store.offsets`; `group_type(group_id)` names the type of an existing group."""

    def __init__(self, store: GroupStore, clock: Clock, config: ClassicGroupConfig,
                 group_type: Callable[[str], str | None], create_simple_group: Callable[[str], None]) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.group_type = group_type
        self.create_simple_group = create_simple_group
        self.hooks: dict[str, OffsetHooks] = {}

    def register(self, group_type: str, hooks: OffsetHooks) -> None:
        """Let groups of `group_type` hold committed offsets, checked by `hooks`."""
        if not isinstance(hooks, OffsetHooks):
            raise TypeError(f"hooks must be OffsetHooks, got {hooks!r}")
        self.hooks[group_type] = hooks

    def _hooks(self, group_id: str) -> OffsetHooks | None:
        kind = self.group_type(group_id)
        if kind is None:
            return None
        hooks = self.hooks.get(kind)
        if hooks is None:
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return hooks

    # -- OffsetCommit ---------------------------------------------------------------------------------

    async def commit(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                     partitions: list[CommitRequest], api_version: int,
                     retention_ms: int = -1) -> dict[TopicPartition, Errors]:
        """Commit offsets; group-level refusals raise ShareError, per-partition outcomes come back."""
        hooks = self._hooks(group_id)
        if hooks is None:
            if generation_id >= 0:
                if api_version >= 9:
                    raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
                raise ShareError(Errors.ILLEGAL_GENERATION, f"Group {group_id} not found.")
            self.create_simple_group(group_id)
            log.info("group %s: created as a simple group by an offset commit", group_id)
            hooks = self._hooks(group_id)
            assert hooks is not None
        hooks.validate_commit(group_id, member_id, group_instance_id, generation_id, api_version)
        now_ms = self.clock.now_ms()
        expire_ms = now_ms + retention_ms if retention_ms >= 0 else -1
        results: dict[TopicPartition, Errors] = {}
        records: list[Record] = []
        for p in partitions:
            metadata = p.metadata or ""
            if _java_length(metadata) > self.config.offset_metadata_max_bytes:
                results[(p.topic, p.partition)] = Errors.OFFSET_METADATA_TOO_LARGE
                continue
            results[(p.topic, p.partition)] = Errors.NONE
            records.append(Record(OffsetCommitKey(group_id, p.topic, p.partition),
                                  OffsetCommitValue(p.offset, p.leader_epoch, metadata, now_ms, expire_ms)))
        await self.store.commit(records)
        return results

    # -- TxnOffsetCommit (KIP-447) --------------------------------------------------------------------

    def validate_transactional(self, group_id: str, member_id: str, group_instance_id: str | None,
                               generation_id: int, partitions: Iterable[tuple[str, int, str | None]]
                               ) -> dict[TopicPartition, Errors]:
        """Whether a TxnOffsetCommit may leave these offsets pending (Kafka's transactional offset
        validation): a missing group with generation < 0 becomes a simple group, else ILLEGAL_GENERATION;
        member checks as for OffsetCommit, except that a rebalance does not block it and a stale consumer
        group member epoch is ILLEGAL_GENERATION. Per partition NONE or OFFSET_METADATA_TOO_LARGE."""
        hooks = self._hooks(group_id)
        if hooks is None:
            if generation_id >= 0:
                raise ShareError(Errors.ILLEGAL_GENERATION, f"Group {group_id} not found.")
            self.create_simple_group(group_id)
            log.info("group %s: created as a simple group by a transactional offset commit", group_id)
        elif generation_id >= 0 or member_id or group_instance_id is not None:
            try:
                hooks.validate_commit(group_id, member_id, group_instance_id, generation_id, 9)
            except ShareError as exc:
                if exc.error == Errors.STALE_MEMBER_EPOCH:
                    raise ShareError(Errors.ILLEGAL_GENERATION, exc.message) from None
                if exc.error != Errors.REBALANCE_IN_PROGRESS:
                    raise
        return {(topic, partition): Errors.OFFSET_METADATA_TOO_LARGE
                if _java_length(metadata or "") > self.config.offset_metadata_max_bytes else Errors.NONE
                for topic, partition, metadata in partitions}

    async def commit_transactional(self, group_id: str, partitions: list[CommitRequest]) -> None:
        """Make a committed transaction's offsets committed (no member checks: they were checked when
        the offsets were sent); a group gone meanwhile comes back as a simple group."""
        if self.group_type(group_id) is None:
            self.create_simple_group(group_id)
        now_ms = self.clock.now_ms()
        await self.store.commit([Record(OffsetCommitKey(group_id, p.topic, p.partition),
                                        OffsetCommitValue(p.offset, p.leader_epoch, p.metadata or "", now_ms, -1))
                                 for p in partitions])

    # -- OffsetFetch ----------------------------------------------------------------------------------

    def fetch(self, group_id: str, partitions: Iterable[TopicPartition] | None, member_id: str | None = None,
              member_epoch: int = -1) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets of the partitions asked (None: every committed one). No transactional
        offsets exist here, so `require_stable` never has anything to wait for."""
        try:
            hooks = self._hooks(group_id)
        except ShareError:
            hooks = None  # a group of a type without offsets has none to show
        held = self.store.offsets.get(group_id, {}) if hooks is not None else {}
        if hooks is not None:
            hooks.validate_fetch(group_id, member_id, member_epoch)
        if partitions is None:
            return {tp: CommittedOffset(v.offset, v.leader_epoch, v.metadata) for tp, v in sorted(held.items())}
        out: dict[TopicPartition, CommittedOffset] = {}
        for tp in partitions:
            value = held.get(tp)
            out[tp] = CommittedOffset(-1, -1, "") if value is None else CommittedOffset(
                value.offset, value.leader_epoch, value.metadata)
        return out

    # -- OffsetDelete ---------------------------------------------------------------------------------

    async def delete(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, Errors]:
        hooks = self._hooks(group_id)
        if hooks is None:
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        hooks.validate_delete(group_id)
        subscribed = hooks.subscribed_topics(group_id) or set()
        held = self.store.offsets.get(group_id, {})
        results: dict[TopicPartition, Errors] = {}
        records: list[Record] = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = Errors.NONE
            if tp in held:
                records.append(Record(OffsetCommitKey(group_id, *tp), None))
        await self.store.commit(records)
        return results

    async def delete_topic(self, group_id: str, topic: str) -> int:
        """Tombstone the group's offsets of a deleted topic, whatever the group's state."""
        gone = [tp for tp in sorted(self.store.offsets.get(group_id, {})) if tp[0] == topic]
        await self.store.commit([Record(OffsetCommitKey(group_id, *tp), None) for tp in gone])
        return len(gone)

    # -- retention ------------------------------------------------------------------------------------

    async def expire(self, group_id: str) -> list[TopicPartition]:
        """Tombstone the offsets of one group that outlived `offsets.retention.minutes`; an Empty group
        left with none is deleted. Returns the expired partitions."""
        held = self.store.offsets.get(group_id, {})
        hooks = self._hooks_or_none(group_id)
        if hooks is None:
            return []
        base = hooks.expiration_base(group_id)
        if base is None:
            return []
        now_ms = self.clock.now_ms()
        retention_ms = self.config.offsets_retention_ms
        subscribed = hooks.subscribed_topics(group_id) or set()
        expired: list[TopicPartition] = []
        for tp, value in sorted(held.items()):
            if tp[0] in subscribed:
                continue
            if (now_ms >= value.expire_timestamp_ms if value.expire_timestamp_ms >= 0
                    else now_ms - base(value) >= retention_ms):
                expired.append(tp)
        records = [Record(OffsetCommitKey(group_id, *tp), None) for tp in expired]
        if len(expired) == len(held) and hooks.is_empty(group_id) and self.group_type(group_id) == "classic":
            records.append(Record(GroupMetadataKey(group_id), None))
        await self.store.commit(records)
        if expired:
            log.info("group %s: %d committed offsets expired", group_id, len(expired))
        return expired

    def _hooks_or_none(self, group_id: str) -> OffsetHooks | None:
        try:
            return self._hooks(group_id)
        except ShareError:
            return None
