"""The groups of one group coordinator, moved only by committed records, and their per-group locks.

`GroupStore.commit` appends a record list to the record sink and, only once the append succeeded,
replays it into memory: a failed append leaves every group unchanged, and a store rebuilt from the
sink's records (`load`) equals the one that wrote them (Kafka's coordinator shards work the same way).
Every operation on a group runs under that group's lock (`GroupLocks`), as Kafka serializes a group's
writes in its shard.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from ..errors import Errors, ShareError
from .classic.group import ClassicGroup, replay_classic_record
from .classic.records import CLASSIC_VALUE_TYPES
from .consumer.group import ConsumerGroup
from .consumer.records import CONSUMER_VALUE_TYPES, ConsumerGroupMetadataKey
from .records import Record, RecordSink
from .share.group import ShareGroup
from .share.records import SHARE_VALUE_TYPES, ShareGroupMetadataKey

__all__ = ["GroupLocks", "GroupStore", "append_error", "replay_into"]

# Group types by record key (classic groups and offsets aside: see `replay_into`): one coordinator
# serves every type, a group id belongs to one type (the
# type of the records that created it). The group metadata tombstone of a type deletes the group.
GROUP_TYPE_OF_KEY: dict[type, type] = {
    **{key: ShareGroup for key in SHARE_VALUE_TYPES},
    **{key: ConsumerGroup for key in CONSUMER_VALUE_TYPES},
}
GROUP_DELETING_KEYS: frozenset[type] = frozenset({ShareGroupMetadataKey, ConsumerGroupMetadataKey})
GROUP_TYPE_NAMES: dict[type, str] = {ShareGroup: "share", ConsumerGroup: "consumer"}


class GroupStore:
    """Every group by id (share and consumer groups in `groups`, classic ones in `classic_groups`), the committed
    offsets (`offsets`: group id -> (topic, partition) -> OffsetCommitValue), the record sink they are
    persisted to, and the group locks."""

    def __init__(self, sink: RecordSink, *, loaded: bool) -> None:
        self.sink = sink
        # A sink handed in may hold records of an earlier run: serve only after `load` replayed them.
        self.loaded = loaded
        self.groups: dict[str, Any] = {}  # ShareGroup, ConsumerGroup by group id
        self.classic_groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], Any]] = {}
        self.locks = GroupLocks()
        self.now_ms = 0  # the time classic records replayed while serving are stamped with

    def load(self, session_deadline_ms: int | Callable[[Any], int], now_ms: int = 0) -> None:
        """Rebuild every group from `sink.read_all()`; every share or consumer member's session ends at
        `session_deadline_ms` (or at what it returns for the member's group: group types have their own
        session timeouts; sessions are not persisted). A record that does not fit raises ValueError: a
        corrupt record is never skipped silently, and nothing changes then."""
        groups: dict[str, Any] = {}
        classic: dict[str, ClassicGroup] = {}
        offsets: dict[str, dict] = {}
        for index, record in enumerate(self.sink.read_all()):
            try:
                replay_into(groups, record, classic, offsets, loading=True, now_ms=now_ms)
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"group coordinator record #{index} cannot be replayed: {exc}") from exc
        for group in groups.values():
            deadline_ms = session_deadline_ms(group) if callable(session_deadline_ms) else session_deadline_ms
            for member_id in group.members:
                group.sessions.touch(member_id, deadline_ms)
        self.groups, self.classic_groups, self.offsets = groups, classic, offsets
        self.loaded = True

    def check_loaded(self) -> None:
        if not self.loaded:
            raise ShareError(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The group coordinator has not loaded its records.")

    def require_group(self, group_id: str, kind: type = ShareGroup) -> Any:
        """The group `group_id` of type `kind`; GROUP_ID_NOT_FOUND when it is missing or of another
        type (as Kafka answers, e.g. "Group g is not a share group.")."""
        group = self.groups.get(group_id)
        if group is None:
            if group_id in self.classic_groups:  # a classic group is "not a share/consumer group"
                raise ShareError(Errors.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a {GROUP_TYPE_NAMES.get(kind, kind.__name__)} group.")
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        check_group_type(group, kind)
        return group

    def group_of_type(self, group_id: str, kind: type) -> Any:
        """The group `group_id` if it exists (None otherwise); GROUP_ID_NOT_FOUND if it has another type."""
        group = self.groups.get(group_id)
        if group is not None:
            check_group_type(group, kind)
        return group

    async def commit(self, records: list[Record]) -> None:
        """Append `records` to the sink and, once that succeeded, apply them. Nothing changes on failure."""
        if not records:
            return
        try:
            await self.sink.append(records)
        except ShareError as exc:
            raise ShareError(append_error(exc.error), exc.message) from exc
        except Exception as exc:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"Appending group coordinator records failed: {exc}") from exc
        for record in records:
            replay_into(self.groups, record, self.classic_groups, self.offsets, loading=False, now_ms=self.now_ms)

    def group_type(self, group_id: str) -> str | None:
        """"share", "consumer" or "classic" for an existing group, None when there is none."""
        group = self.groups.get(group_id)
        if group is not None:
            return GROUP_TYPE_NAMES.get(type(group), type(group).__name__)
        if group_id in self.classic_groups:
            return "classic"
        return None

    def dump(self) -> dict[str, dict]:
        """Every group's persisted state in a comparable form (what `load` must reproduce)."""
        return {group_id: group.dump() for group_id, group in sorted(self.groups.items())}

    def replayed_dump(self, records: Iterable[Record] | None = None) -> dict[str, dict]:
        """`dump` of the groups a fresh replay of `records` (by default the sink's; the sink must be
        readable without side effects) builds."""
        rebuilt, _classic, _offsets = _replay(self.sink.read_all() if records is None else records)
        return {group_id: group.dump() for group_id, group in sorted(rebuilt.items())}

    def classic_dump(self) -> dict[str, Any]:
        """What the sink holds for classic groups and offsets, as this store believes it (the last
        record written for each classic group; every committed offset), and which ids are classic groups."""
        return _classic_dump(self.classic_groups, self.offsets)

    def replayed_classic_dump(self, records: Iterable[Record] | None = None) -> dict[str, Any]:
        """`classic_dump` of what a fresh replay of `records` (by default the sink's) builds."""
        _groups, classic, offsets = _replay(self.sink.read_all() if records is None else records)
        return _classic_dump(classic, offsets)


def append_error(error: Errors) -> Errors:
    """The error a group API answers when appending its records failed, as Kafka's group coordinator
    maps a failed `__consumer_offsets` append: a failed log dir (KAFKA_STORAGE_ERROR) or lost leadership
    is NOT_COORDINATOR (the client looks the coordinator up again and retries), a missing partition or
    a timeout is COORDINATOR_NOT_AVAILABLE, an oversized batch UNKNOWN_SERVER_ERROR; anything else
    passes through."""
    if error in (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_LEADER_OR_FOLLOWER):
        return Errors.NOT_COORDINATOR
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.REQUEST_TIMED_OUT):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


def _replay(records: Iterable[Record]) -> tuple[dict[str, Any], dict[str, ClassicGroup], dict[str, dict]]:
    groups: dict[str, Any] = {}
    classic: dict[str, ClassicGroup] = {}
    offsets: dict[str, dict] = {}
    for record in records:
        replay_into(groups, record, classic, offsets, loading=True)
    return groups, classic, offsets


def _classic_dump(classic: dict[str, ClassicGroup], offsets: dict[str, dict]) -> dict[str, Any]:
    return {"groups": {g: group.last_record for g, group in sorted(classic.items()) if group.last_record is not None},
            "offsets": {g: dict(sorted(held.items())) for g, held in sorted(offsets.items())}}


def check_group_type(group: Any, kind: type) -> None:
    if not isinstance(group, kind):
        name = GROUP_TYPE_NAMES.get(kind, kind.__name__)
        raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a {name} group.")


def replay_into(groups: dict[str, Any], record: Record, classic_groups: dict[str, ClassicGroup] | None = None,
                offsets: dict[str, dict] | None = None, *, loading: bool = True, now_ms: int = 0) -> None:
    """Apply one record: share- and consumer-group records to `groups` (the group metadata tombstone of
    a type deletes a group, any other record of an unknown group creates it with the record's group
    type, replacing a simple classic group of that id; a tombstone of an unknown group is a no-op; a
    record of one type for a group of another is corruption, ValueError), classic-group and offset
    records to `classic_groups` and `offsets`."""
    key, value = record
    if type(key) in CLASSIC_VALUE_TYPES:
        if classic_groups is None or offsets is None:
            raise ValueError(f"a classic record needs the classic maps: {key!r}")
        replay_classic_record(classic_groups, offsets, groups, record, loading, now_ms)
        return
    kind = GROUP_TYPE_OF_KEY.get(type(key))
    if kind is None:
        raise ValueError(f"unknown group coordinator record key {key!r}")
    group = groups.get(key.group_id)
    if group is not None and not isinstance(group, kind):
        raise ValueError(f"record {key!r} of a {GROUP_TYPE_NAMES[kind]} group for {type(group).__name__} "
                         f"{key.group_id!r}")
    if value is None:
        if type(key) in GROUP_DELETING_KEYS:
            groups.pop(key.group_id, None)
        elif group is not None:
            group.replay(record)
        return
    if group is None:
        group = groups[key.group_id] = kind(key.group_id)
        _drop_simple_group(classic_groups, key.group_id)
    group.replay(record)


def _drop_simple_group(classic_groups: dict[str, ClassicGroup] | None, group_id: str) -> None:
    """A share or consumer group replaces a simple classic group of its id (one that only an offset commit
    created: no members, no record of its own), as Kafka's replay does: after compaction the group's
    offsets can come before its first surviving group record, and must not leave a classic twin behind."""
    if classic_groups is None:
        return
    simple = classic_groups.get(group_id)
    if simple is not None and simple.is_simple and not simple.members and simple.last_record is None:
        del classic_groups[group_id]

class GroupLocks:
    """One asyncio.Lock per group id, created on demand and dropped when nobody holds or awaits it."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, list] = {}  # group id -> [lock, number of holders and waiters]

    def hold(self, group_id: str) -> "_HeldGroupLock":
        """`async with locks.hold(group_id):` runs the block under that group's lock."""
        entry = self._entries.get(group_id)
        if entry is None:
            entry = self._entries[group_id] = [asyncio.Lock(), 0]
        return _HeldGroupLock(self._entries, group_id, entry)

    def __len__(self) -> int:
        return len(self._entries)


class _HeldGroupLock:
    __slots__ = ("_entries", "_group_id", "_entry")

    def __init__(self, entries: dict[str, list], group_id: str, entry: list) -> None:
        self._entries, self._group_id, self._entry = entries, group_id, entry

    async def __aenter__(self) -> None:
        self._entry[1] += 1
        try:
            await self._entry[0].acquire()
        except BaseException:
            self._release_user()
            raise

    async def __aexit__(self, *exc_info) -> None:
        self._entry[0].release()
        self._release_user()

    def _release_user(self) -> None:
        self._entry[1] -= 1
        if self._entry[1] == 0 and self._entries.get(self._group_id) is self._entry:
            del self._entries[self._group_id]
