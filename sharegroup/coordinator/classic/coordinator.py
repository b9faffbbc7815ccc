"""ClassicCoordinator: classic groups and committed offsets, a component the GroupCoordinator owns and
delegates its classic-group and offsets APIs to.

Every method validates its arguments (malformed input is INVALID_REQUEST, a missing group id
INVALID_GROUP_ID), takes the group's lock, and leaves the work to `protocol.ClassicGroups`
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, DeleteGroups) and the
`CommittedOffsets` of `coordinator/offsets.py` (OffsetCommit, OffsetFetch, OffsetDelete, retention),
which KIP-848 consumer groups share. A JoinGroup or SyncGroup that must wait for the rest of the group
waits outside the lock.

Group types clash as in Kafka: JoinGroup on a share group id is INCONSISTENT_GROUP_PROTOCOL; SyncGroup,
Heartbeat and LeaveGroup on a group that is not classic are UNKNOWN_MEMBER_ID; DescribeGroups
describes only classic groups (GROUP_ID_NOT_FOUND otherwise). A consumer group (KIP-848) may take the
id of an Empty classic group (`yield_to_consumer_group`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterable, Mapping

from ...clock import Clock
from ...errors import Errors, ShareError
from ...types import is_plain_int
from ..group_store import GroupStore
from ..offsets import CommitRequest, CommittedOffsets, OffsetHooks
from ..records import Record
from ..validation import invalid
from .config import ClassicGroupConfig
from .group import ClassicGroup, ClassicGroupState
from .protocol import ClassicGroups, JoinRequest
from .records import GroupMetadataKey
from .responses import (
    ClassicGroupDescription,
    CommittedOffset,
    GroupListing,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from .timers import ClassicTimers

__all__ = ["ClassicCoordinator"]

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1


def _group_id(group_id: object) -> str:
    """Kafka refuses only a null or empty group id (INVALID_GROUP_ID); blanks are allowed."""
    if not isinstance(group_id, str) or not group_id:
        raise ShareError(Errors.INVALID_GROUP_ID, f"The group id must not be empty, got {group_id!r}.")
    return group_id


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {value!r}.")
    return value


def _optional_text(value: object, name: str) -> str | None:
    return None if value is None else _text(value, name)


def _partitions(partitions: Iterable[object]) -> list[tuple[str, int]]:
    """(topic name, partition index) pairs; anything else is INVALID_REQUEST."""
    out = []
    for item in partitions:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and is_plain_int(item[1])):
            raise invalid(f"a partition must be (topic name, partition index), got {item!r}")
        out.append((item[0], item[1]))
    return out


def _int32(value: object, name: str, lo: int = -_INT32_MAX - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= _INT32_MAX:
        raise invalid(f"{name} must be an int32 >= {lo}, got {value!r}.")
    return value


class ClassicCoordinator:
    """Classic groups and committed offsets over the coordinator's group store (and through it its
    record sink), on its clock, with the classic-group and offset settings; see the module docstring."""

    def __init__(self, store: GroupStore, clock: Clock, config: ClassicGroupConfig) -> None:
        self._store = store
        self._clock = clock
        self._config = config
        self._timers = ClassicTimers(clock)
        self._groups = ClassicGroups(store, self._timers, clock, config)
        self._offsets = CommittedOffsets(store, clock, config, store.group_type, self._create_simple_group)
        c = self._groups
        self._offsets.register("classic", OffsetHooks(
            validate_commit=c.validate_offset_commit,
            validate_fetch=lambda group_id, member_id, member_epoch: None,
            validate_delete=c.validate_offset_delete,
            subscribed_topics=c.subscribed_topics,
            expiration_base=c.offset_expiration_base,
            is_empty=c.is_empty,
        ))

    @property
    def config(self) -> ClassicGroupConfig:
        return self._config

    @property
    def offsets(self) -> CommittedOffsets:
        """The committed-offsets service; other group types `register` their OffsetHooks on it."""
        return self._offsets

    def _create_simple_group(self, group_id: str) -> None:
        self._store.classic_groups[group_id] = ClassicGroup(group_id, self._clock.now_ms())

    def on_loaded(self) -> None:
        """After the store loaded: every member of a loaded classic group gets a fresh session."""
        for group in self._store.classic_groups.values():
            for member in group.members.values():
                self._groups.rebalancer.schedule_heartbeat(group, member)

    # -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------

    async def join_group(self, group_id: str, member_id: str, protocol_type: str,
                         protocols: Iterable[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int = -1, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = True) -> JoinGroupResult:
        """JoinGroup; waits until the join phase ends when the member must. `rebalance_timeout_ms` -1
        means the session timeout (JoinGroup v0). Errors come back in the result, as Kafka answers them
        (a malformed request raises ShareError INVALID_REQUEST)."""
        group_id = _group_id(group_id)
        member_id = _text(member_id, "MemberId")
        protocol_type = _text(protocol_type, "ProtocolType")
        instance_id = _optional_text(group_instance_id, "GroupInstanceId")
        session_timeout_ms = _int32(session_timeout_ms, "SessionTimeoutMs")
        rebalance_timeout_ms = _int32(rebalance_timeout_ms, "RebalanceTimeoutMs", -1)
        if rebalance_timeout_ms == -1:
            rebalance_timeout_ms = session_timeout_ms
        checked: list[tuple[str, bytes]] = []
        for item in protocols:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], (bytes, bytearray))):
                raise invalid(f"a protocol must be (name, metadata bytes), got {item!r}")
            checked.append((item[0], bytes(item[1])))
        self._store.check_loaded()
        if self._store.group_type(group_id) not in (None, "classic"):
            return JoinGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL, "")  # Kafka: the unknown member id
        request = JoinRequest(group_id, member_id, instance_id, protocol_type, tuple(checked), session_timeout_ms,
                              max(rebalance_timeout_ms, 0), _text(client_id, "ClientId"),
                              _text(client_host, "ClientHost"), bool(require_known_member_id))
        async with self._store.locks.hold(group_id):
            answer = await self._groups.join(request)
        return await answer if isinstance(answer, asyncio.Future) else answer

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes] | None = None, group_instance_id: str | None = None,
                         protocol_type: str | None = None, protocol_name: str | None = None) -> SyncGroupResult:
        """SyncGroup: the leader brings the assignment; everyone waits for it (CompletingRebalance) or
        gets its current one (Stable)."""
        group_id = _group_id(group_id)
        generation_id = _int32(generation_id, "GenerationId")
        member_id = _text(member_id, "MemberId")
        instance_id = _optional_text(group_instance_id, "GroupInstanceId")
        assignments = dict(assignments or {})
        for mid, data in assignments.items():
            if not isinstance(mid, str) or not isinstance(data, (bytes, bytearray)):
                raise invalid(f"an assignment must map member id -> bytes, got {mid!r}: {data!r}")
        self._store.check_loaded()
        if self._store.group_type(group_id) not in (None, "classic"):
            return SyncGroupResult(Errors.UNKNOWN_MEMBER_ID)
        async with self._store.locks.hold(group_id):
            answer = await self._groups.sync(group_id, generation_id, member_id, instance_id,
                                              _optional_text(protocol_type, "ProtocolType"),
                                              _optional_text(protocol_name, "ProtocolName"),
                                              {m: bytes(a) for m, a in assignments.items()})
        return await answer if isinstance(answer, asyncio.Future) else answer

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> Errors:
        """Heartbeat: NONE, REBALANCE_IN_PROGRESS (rejoin), or why the member is not part of it."""
        group_id = _group_id(group_id)
        generation_id = _int32(generation_id, "GenerationId")
        member_id = _text(member_id, "MemberId")
        instance_id = _optional_text(group_instance_id, "GroupInstanceId")
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            if self._store.group_type(group_id) not in (None, "classic"):
                return Errors.UNKNOWN_MEMBER_ID
            return self._groups.heartbeat(group_id, generation_id, member_id, instance_id)

    async def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> list[LeaveMemberResult]:
        """LeaveGroup of one or more members (by member id, or by group instance id)."""
        group_id = _group_id(group_id)
        checked = [(_text(m, "MemberId"), _optional_text(i, "GroupInstanceId")) for m, i in members]
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            if self._store.group_type(group_id) not in (None, "classic"):
                return [LeaveMemberResult(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in checked]
            return await self._groups.leave(group_id, checked)

    # -- describe, list, delete ---------------------------------------------------------------------

    def describe_groups(self, group_ids: Iterable[str]) -> list[ClassicGroupDescription]:
        """DescribeGroups: one description per id, in order (GROUP_ID_NOT_FOUND, state Dead, for a
        group that does not exist or is not classic)."""
        self._store.check_loaded()
        out = []
        for group_id in group_ids:
            if not isinstance(group_id, str):
                raise invalid(f"a group id must be a string, got {group_id!r}")
            out.append(self._groups.describe(group_id))
        return out

    def listings(self) -> list[GroupListing]:
        """ListGroups' entries of the classic groups (type "classic"), unfiltered and unsorted."""
        return [GroupListing(g, "classic", group.protocol_type or "", str(group.state))
                for g, group in self._store.classic_groups.items()]

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a classic group (GROUP_NOT_EMPTY while it has members)."""
        async with self._store.locks.hold(group_id):
            await self._groups.delete(group_id)

    def yield_to_consumer_group(self, group_id: str, joining: bool) -> list[Record]:
        """A ConsumerGroupHeartbeat names `group_id` (the caller holds its lock). Kafka's rule: a joining
        member (epoch 0) takes the id of an Empty classic group — the returned tombstone of its
        GroupMetadata goes first into the new consumer group's records, and its committed offsets stay
        with the id; [] when the id holds no classic group. Otherwise GROUP_ID_NOT_FOUND "Group g is
        not a consumer group.": a member that is not joining, or a classic group with members (Kafka
        upgrades those online only when their protocol type is "consumer"; serve has no online upgrade,
        as Kafka with `group.consumer.migration.policy=disabled`)."""
        group = self._store.classic_groups.get(group_id)
        if group is None:
            return []
        if not joining or not group.in_state(ClassicGroupState.EMPTY):
            if joining:
                log.info("classic group %s (protocol type %r) with members cannot become a consumer group",
                         group_id, group.protocol_type)
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return [Record(GroupMetadataKey(group_id), None)]

    def forget_timers(self, group_id: str) -> None:
        """After a classic group was replaced by a group of another type: its deadlines go too."""
        if group_id not in self._store.classic_groups:
            self._timers.cancel_group(group_id)

    # -- committed offsets --------------------------------------------------------------------------

    async def offset_commit(self, group_id: str, generation_id: int, member_id: str,
                            partitions: Iterable[CommitRequest], group_instance_id: str | None = None,
                            api_version: int = 9, retention_ms: int = -1) -> dict[tuple[str, int], Errors]:
        """OffsetCommit. Group-level refusals raise ShareError (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
        REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH, ...);
        per partition: NONE or OFFSET_METADATA_TOO_LARGE."""
        group_id = _group_id(group_id)
        generation_id = _int32(generation_id, "GenerationIdOrMemberEpoch")
        member_id = _text(member_id, "MemberId")
        instance_id = _optional_text(group_instance_id, "GroupInstanceId")
        checked = []
        for p in partitions:
            if not (isinstance(p, CommitRequest) and isinstance(p.topic, str) and is_plain_int(p.partition)
                    and is_plain_int(p.offset) and is_plain_int(p.leader_epoch)
                    and (p.metadata is None or isinstance(p.metadata, str))):
                raise invalid(f"a commit must be a CommitRequest(topic, partition, offset, leader_epoch, metadata), got {p!r}")
            checked.append(p)
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            return await self._offsets.commit(group_id, member_id, instance_id, generation_id, checked,
                                              api_version, retention_ms)

    async def validate_transactional_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                                             generation_id: int, partitions: Iterable[tuple[str, int, str | None]]
                                             ) -> dict[tuple[str, int], Errors]:
        """TxnOffsetCommit's member checks (KIP-447); see `CommittedOffsets.validate_transactional`."""
        group_id = _group_id(group_id)
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            return self._offsets.validate_transactional(group_id, member_id, group_instance_id, generation_id,
                                                        list(partitions))

    async def commit_transactional_offsets(self, group_id: str, partitions: list[CommitRequest]) -> None:
        """A committed transaction's offsets become the group's committed offsets."""
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            await self._offsets.commit_transactional(group_id, partitions)

    async def offset_fetch(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                           member_id: str | None = None, member_epoch: int = -1,
                           require_stable: bool = False) -> dict[tuple[str, int], CommittedOffset]:
        """OffsetFetch of the partitions asked (None: every committed offset of the group)."""
        group_id = _group_id(group_id)
        wanted = None if partitions is None else _partitions(partitions)
        self._store.check_loaded()
        member_id = _optional_text(member_id, "MemberId")
        member_epoch = _int32(member_epoch, "MemberEpoch")
        async with self._store.locks.hold(group_id):
            return self._offsets.fetch(group_id, wanted, member_id, member_epoch)

    async def offset_delete(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Errors]:
        """OffsetDelete: group-level refusals raise ShareError (GROUP_ID_NOT_FOUND, GROUP_NOT_EMPTY);
        per partition NONE or GROUP_SUBSCRIBED_TO_TOPIC."""
        group_id = _group_id(group_id)
        wanted = _partitions(partitions)
        self._store.check_loaded()
        async with self._store.locks.hold(group_id):
            return await self._offsets.delete(group_id, wanted)

    async def delete_topic_offsets(self, topic: str) -> int:
        """A topic was deleted: every group's committed offsets of it go too (as Kafka does when the
        topic's partitions are deleted). Returns how many were deleted."""
        self._store.check_loaded()
        deleted = 0
        for group_id in sorted(g for g, held in self._store.offsets.items() if any(t == topic for t, _p in held)):
            async with self._store.locks.hold(group_id):
                deleted += await self._offsets.delete_topic(group_id, topic)
        return deleted

    async def expire_offsets(self) -> int:
        """One retention pass over every group with committed offsets (and every Empty classic group):
        returns how many offsets expired."""
        self._store.check_loaded()
        expired = 0
        candidates = set(self._store.offsets) | {
            g for g, group in self._store.classic_groups.items() if group.in_state(ClassicGroupState.EMPTY)}
        for group_id in sorted(candidates):
            async with self._store.locks.hold(group_id):
                expired += len(await self._offsets.expire(group_id))
                if group_id not in self._store.classic_groups:
                    self._timers.cancel_group(group_id)
        return expired

    # -- timers -------------------------------------------------------------------------------------

    async def run_timers(self) -> int:
        """Handle every classic-group deadline due at `clock.now_ms()` (join and sync phases ending,
        sessions expiring); returns how many fired. `sharegroup serve` calls it whenever
        `wait_for_timers()` returns; tests call it after advancing a ManualClock."""
        self._store.check_loaded()
        fired = 0
        for _round in range(1000):  # handlers may schedule deadlines that are already due
            due = self._timers.pop_due(self._clock.now_ms())
            if not due:
                break
            for key, payload in due:
                async with self._store.locks.hold(key[1]):
                    try:
                        await self._groups.rebalancer.fire(key, payload)
                    except Exception:  # one group's failure must not stop the others (logged)
                        log.exception("classic group timer %r failed", key)
                fired += 1
        return fired

    async def wait_for_timers(self) -> None:
        """Return once a classic-group deadline is due."""
        await self._timers.wait_due()

    def check(self) -> None:
        """Assert every classic group's invariants and that each deadline the protocol relies on is armed."""
        max_size = self._config.max_size
        for group_id, group in self._store.classic_groups.items():
            assert group.group_id == group_id
            assert group_id not in self._store.groups, f"{group_id} is both a share and a classic group"
            group._check(max_size)
            # Every deadline the protocol relies on is armed: a session for each member not kept
            # alive by a parked request and for each pending member, the join phase's end while
            # preparing, the sync deadline while completing.
            for member_id, member in group.members.items():
                if not (member.awaiting_join or member.awaiting_sync):
                    assert ("heartbeat", group_id, member_id) in self._timers, (group_id, member_id)
            for member_id in group.pending_members:
                assert ("heartbeat", group_id, member_id) in self._timers, (group_id, member_id)
            if group.in_state(ClassicGroupState.PREPARING_REBALANCE):
                assert ("join", group_id) in self._timers, group_id
            if group.in_state(ClassicGroupState.COMPLETING_REBALANCE):
                assert ("sync", group_id) in self._timers, group_id
        self._timers._check()
