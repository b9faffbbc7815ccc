"""The classic group protocol's requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
DeleteGroups, and the offset checks of classic groups. Callers hold the group's lock; the rebalance
itself (states, generations, timeouts) is `rebalance.Rebalancer`'s.

JoinGroup, as Kafka answers it:
- a session timeout outside [group.min.session.timeout.ms, group.max.session.timeout.ms] is
  INVALID_SESSION_TIMEOUT; a known member id of a missing group UNKNOWN_MEMBER_ID; a group at
  `group.max.size` GROUP_MAX_SIZE_REACHED for newcomers; a protocol type or protocol set the group
  cannot use INCONSISTENT_GROUP_PROTOCOL;
- a dynamic member's first join (v4+) gets a member id with MEMBER_ID_REQUIRED and must join again
  with it (a pending member until then, expired after the session timeout);
- a static member (KIP-345, `group.instance.id`) joining with an empty member id while its instance id
  is known takes a new member id; in a Stable group whose selected protocol would not change, that
  needs no rebalance: it gets the current generation at once (the leader with skip_assignment), its
  SyncGroup returns its current assignment, and the old member id is FENCED_INSTANCE_ID from then on;
  while the group rebalances it replaces the old member id the same way and counts as rejoined, so the
  join phase completes (at the next generation) once every member has;
- a known member rejoining in CompletingRebalance or Stable with unchanged metadata gets the current
  generation; the leader rejoining, or changed metadata, starts a rebalance.
The answer is either immediate (a `JoinGroupResult`) or a future completed when the join phase ends.
"""

from __future__ import annotations

import logging
import uuid

from ...clock import Clock
from ...errors import Errors, ShareError
from ..group_store import GroupStore
from ..records import Record
from .config import ClassicGroupConfig
from .group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicGroupMember, ClassicGroupState
from .rebalance import Rebalancer, new_future, store_error
from .records import GroupMetadataKey, OffsetCommitKey
from .responses import (
    ClassicGroupDescription,
    ClassicMemberDescription,
    JoinedMember,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from .timers import ClassicTimers

__all__ = ["ClassicGroups", "JoinRequest"]

log = logging.getLogger(__name__)
S = ClassicGroupState


class JoinRequest:
    """A validated JoinGroup: who joins with what (protocols in preference order, name -> metadata)."""

    __slots__ = ("group_id", "member_id", "group_instance_id", "protocol_type", "protocols",
                 "session_timeout_ms", "rebalance_timeout_ms", "client_id", "client_host", "require_known_member_id")

    def __init__(self, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
                 protocols: tuple[tuple[str, bytes], ...], session_timeout_ms: int, rebalance_timeout_ms: int,
                 client_id: str, client_host: str, require_known_member_id: bool) -> None:
        self.group_id, self.member_id, self.group_instance_id = group_id, member_id, group_instance_id
        self.protocol_type, self.protocols = protocol_type, protocols
        self.session_timeout_ms, self.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.client_id, self.client_host = client_id, client_host
        self.require_known_member_id = require_known_member_id


def _validate_existing_member(group: ClassicGroup, member_id: str, group_instance_id: str | None) -> Errors:
    """UNKNOWN_MEMBER_ID for a member the group does not have, FENCED_INSTANCE_ID for an old member id
    of a static member that has been replaced; NONE otherwise."""
    if group_instance_id is None:
        return Errors.NONE if member_id in group.members else Errors.UNKNOWN_MEMBER_ID
    existing = group.static_member_id(group_instance_id)
    if existing is None:
        return Errors.UNKNOWN_MEMBER_ID
    return Errors.NONE if existing == member_id else Errors.FENCED_INSTANCE_ID


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


class ClassicGroups:
    """Classic groups of one coordinator (in `store.classic_groups`); see the module docstring."""

    def __init__(self, store: GroupStore, timers: ClassicTimers, clock: Clock, config: ClassicGroupConfig) -> None:
        self.store = store
        self.timers = timers
        self.clock = clock
        self.config = config
        self.rebalancer = Rebalancer(store, timers, clock, config)

    # -- JoinGroup ------------------------------------------------------------------------------------

    async def join(self, req: JoinRequest):
        """A `JoinGroupResult`, or a future of one (the member waits for the join phase to end)."""
        config = self.config
        if not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms:
            return JoinGroupResult(Errors.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.store.classic_groups.get(req.group_id)
        unknown = req.member_id == ""
        if group is None:
            if not unknown:
                return JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.store.classic_groups[req.group_id] = ClassicGroup(req.group_id, self.clock.now_ms())
        if not self._accept_joining_member(group, req.member_id):
            return JoinGroupResult(Errors.GROUP_MAX_SIZE_REACHED, "")  # Kafka answers the unknown member id
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            return JoinGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if unknown:
            return await self._join_new_member(group, req)
        return await self._join_existing_member(group, req)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.in_state(S.EMPTY, S.DEAD):
            return True
        if group.in_state(S.PREPARING_REBALANCE):
            # Counting the members that rejoined (not all members) lets a shrunken max size drop the
            # last ones to rejoin.
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    async def _join_new_member(self, group: ClassicGroup, req: JoinRequest):
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_member_id = group.static_member_id(req.group_instance_id)
            if old_member_id is not None:
                return await self._replace_static_member(group, old_member_id, new_member_id, req)
            return await self._add_member(group, new_member_id, req)
        if req.require_known_member_id:
            group.pending_members.add(new_member_id)
            self.timers.schedule(("heartbeat", group.group_id, new_member_id),
                                 self.clock.now_ms() + req.session_timeout_ms)
            return JoinGroupResult(Errors.MEMBER_ID_REQUIRED, new_member_id)
        return await self._add_member(group, new_member_id, req)

    async def _join_existing_member(self, group: ClassicGroup, req: JoinRequest):
        member_id = req.member_id
        if member_id in group.pending_members:
            if req.group_instance_id is not None:  # a pending member id is never a static member's
                return JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, member_id)
            return await self._add_member(group, member_id, req)
        error = _validate_existing_member(group, member_id, req.group_instance_id)
        if error is not Errors.NONE:
            return JoinGroupResult(error, member_id)
        member = group.members[member_id]
        if group.in_state(S.PREPARING_REBALANCE):
            return await self._update_member(group, member, req, "member rejoined")
        if group.in_state(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The same metadata (the member may have missed its JoinGroup response): the current
                # generation again.
                return self._current_generation(group, member_id, with_members=group.is_leader(member_id))
            return await self._update_member(group, member, req, "member changed its metadata")
        if group.in_state(S.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader may rejoin to force a rebalance (e.g. topic metadata changed).
                return await self._update_member(group, member, req, "leader rejoined or metadata changed")
            return self._current_generation(group, member_id, with_members=False)
        return JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, member_id)

    def _current_generation(self, group: ClassicGroup, member_id: str, *, with_members: bool,
                            skip_assignment: bool = False) -> JoinGroupResult:
        members = tuple(JoinedMember(*m) for m in group.current_members()) if with_members else ()
        return JoinGroupResult(Errors.NONE, member_id, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_id or "", skip_assignment, members)

    async def _add_member(self, group: ClassicGroup, member_id: str, req: JoinRequest):
        member = ClassicGroupMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                                    req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                    req.protocols)
        member.is_new = True
        if group.in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # the initial rebalance waits a little longer
        future = new_future()
        group.add(member, future)
        # A new member cannot heartbeat until it has its generation, and a parked JoinGroup hides a
        # disconnect: it is dropped after the new-member join timeout if the join phase never ends.
        self.rebalancer.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        await self.rebalancer.maybe_prepare_rebalance_or_complete_join(group, f"member {member_id} joined")
        return future

    async def _update_member(self, group: ClassicGroup, member: ClassicGroupMember, req: JoinRequest, reason: str):
        future = new_future()
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future)
        await self.rebalancer.maybe_prepare_rebalance_or_complete_join(group, reason)
        return future

    async def _replace_static_member(self, group: ClassicGroup, old_member_id: str, new_member_id: str,
                                     req: JoinRequest):
        """KIP-345: a static member came back under a new member id."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        member = group.members[old_member_id]
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(instance_id, old_member_id, new_member_id,
                                    JoinGroupResult(Errors.FENCED_INSTANCE_ID, old_member_id))
        self.timers.cancel(("heartbeat", group.group_id, old_member_id))
        self.rebalancer.schedule_heartbeat(group, member)
        future = new_future()
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future)
        if group.in_state(S.STABLE):
            if group.protocol_name == group.select_protocol():
                try:
                    await self.rebalancer.store_group(group, raise_errors=True)
                except ShareError as exc:
                    # Undo the replacement: the old member id stays valid.
                    group.complete_join(member, None)
                    group.replace_static_member(instance_id, new_member_id, old_member_id, None)
                    group.update_member(member, *old, None)
                    self.timers.cancel(("heartbeat", group.group_id, new_member_id))
                    self.rebalancer.schedule_heartbeat(group, member)
                    return JoinGroupResult(store_error(exc.error), "")
                leader = group.is_leader(new_member_id)
                result = self._current_generation(group, new_member_id, with_members=leader, skip_assignment=leader)
                group.complete_join(member, result)
                log.info("classic group %s: static member %s came back as %s without a rebalance",
                         group.group_id, instance_id, new_member_id)
                return result
            await self.rebalancer.prepare_rebalance(group, f"static member {instance_id} changed its protocols")
        else:
            # CompletingRebalance: the leader may have computed an assignment for the old member id, so
            # start over. PreparingRebalance: the member has rejoined under its new id, which may be
            # the last one the join phase waits for (Kafka's testFencedStaticGroup).
            await self.rebalancer.maybe_prepare_rebalance_or_complete_join(
                group, f"static member {instance_id} rejoined")
        return future

    # -- SyncGroup ------------------------------------------------------------------------------------

    async def sync(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes]):
        """A `SyncGroupResult`, or a future of one (followers wait for the leader's assignment)."""
        group = self.store.classic_groups.get(group_id)
        if group is None:
            return SyncGroupResult(Errors.UNKNOWN_MEMBER_ID)
        error = _validate_existing_member(group, member_id, group_instance_id)
        if error is Errors.NONE and generation_id != group.generation_id:
            error = Errors.ILLEGAL_GENERATION
        if error is Errors.NONE and (_inconsistent(protocol_type, group.protocol_type)
                                     or _inconsistent(protocol_name, group.protocol_name)):
            error = Errors.INCONSISTENT_GROUP_PROTOCOL
        if error is not Errors.NONE:
            return SyncGroupResult(error)
        if group.in_state(S.EMPTY):
            return SyncGroupResult(Errors.UNKNOWN_MEMBER_ID)
        if group.in_state(S.PREPARING_REBALANCE):
            return SyncGroupResult(Errors.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        group.pending_sync_members.discard(member_id)
        if group.in_state(S.STABLE):
            return SyncGroupResult(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name)
        future = new_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.cancel()  # superseded by this request
        member.sync_future = future
        if group.is_leader(member_id):
            await self.rebalancer.store_assignment(group, assignments)
        return future

    # -- Heartbeat ------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> Errors:
        group = self.store.classic_groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        error = _validate_existing_member(group, member_id, group_instance_id)
        if error is not Errors.NONE:
            return error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.in_state(S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self.rebalancer.schedule_heartbeat(group, group.members[member_id])
        if group.in_state(S.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    # -- LeaveGroup -----------------------------------------------------------------------------------

    async def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[LeaveMemberResult]:
        """Remove members by member id or by group instance id (then a member id, when given, must be
        the instance's current one: FENCED_INSTANCE_ID otherwise). Per-member outcomes, in order."""
        group = self.store.classic_groups.get(group_id)
        if group is None:
            return [LeaveMemberResult(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in members]
        results: list[LeaveMemberResult] = []
        removed_members = removed_pending = False
        for member_id, instance_id in members:
            target = member_id
            if instance_id is not None:
                target = group.static_member_id(instance_id)
                if target is None:
                    results.append(LeaveMemberResult(member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
                    continue
                if member_id and member_id != target:
                    results.append(LeaveMemberResult(member_id, instance_id, Errors.FENCED_INSTANCE_ID))
                    continue
            if target in group.pending_members:
                group.remove(target)
                self.timers.cancel(("heartbeat", group_id, target))
                removed_pending = True
            elif target in group.members:
                self.rebalancer.remove_member(group, group.members[target])
                removed_members = True
            else:
                results.append(LeaveMemberResult(member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
                continue
            log.info("classic group %s: member %s left", group_id, target)
            results.append(LeaveMemberResult(member_id, instance_id, Errors.NONE))
        if removed_members:
            await self.rebalancer.member_removed(group)
        elif removed_pending and group.in_state(S.PREPARING_REBALANCE) and group.all_members_joined():
            await self.rebalancer.complete_join(group)
        return results

    # -- DescribeGroups and DeleteGroups -------------------------------------------------------------

    def describe(self, group_id: str) -> ClassicGroupDescription:
        group = self.store.classic_groups.get(group_id)
        if group is None:
            return ClassicGroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND, str(S.DEAD), "", "", (),
                                           f"Group {group_id} not found.")
        stable = group.in_state(S.STABLE)
        members = tuple(
            ClassicMemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata(group.protocol_name) if stable else b"",
                                     m.assignment if stable else b"")
            for m in group.members.values()
        )
        return ClassicGroupDescription(group_id, Errors.NONE, str(group.state), group.protocol_type or "",
                                       group.protocol_name or "" if stable else "", members)

    async def delete(self, group_id: str) -> None:
        """DeleteGroups of a classic group: only when Empty (GROUP_NOT_EMPTY otherwise); its offsets and
        its record are tombstoned and it is gone."""
        group = self.store.classic_groups.get(group_id)
        if group is None:
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not group.in_state(S.EMPTY):
            raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")
        records = [Record(OffsetCommitKey(group_id, topic, partition), None)
                   for topic, partition in sorted(self.store.offsets.get(group_id, {}))]
        records.append(Record(GroupMetadataKey(group_id), None))
        await self.store.commit(records)
        self.timers.cancel_group(group_id)
        group.state = S.DEAD
        log.info("deleted classic group %s", group_id)

    # -- committed offsets: the classic group's checks -------------------------------------------------

    def validate_offset_commit(self, group_id: str, member_id: str, group_instance_id: str | None,
                               generation_id: int, api_version: int) -> None:
        """Whether this member may commit now (Kafka's ClassicGroup.validateOffsetCommit): anyone with
        generation -1 while the group is Empty; otherwise a current member of the current generation,
        not while the group is CompletingRebalance. As in Kafka, an accepted commit of a member of a
        Stable or PreparingRebalance group also renews its session, like a heartbeat."""
        group = self.store.classic_groups[group_id]
        if generation_id < 0 and group.in_state(S.EMPTY):
            return
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = _validate_existing_member(group, member_id, group_instance_id)
            if error is not Errors.NONE:
                raise ShareError(error, f"Member {member_id} is not a member of group {group_id}.")
            if generation_id != group.generation_id:
                raise ShareError(Errors.ILLEGAL_GENERATION,
                                 f"Generation {generation_id} is not the group's generation {group.generation_id}.")
        elif not group.in_state(S.EMPTY):
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, "Only members commit to a group that is not empty.")
        if group.in_state(S.COMPLETING_REBALANCE):
            raise ShareError(Errors.REBALANCE_IN_PROGRESS, f"Group {group_id} is completing a rebalance.")
        if group.in_state(S.STABLE, S.PREPARING_REBALANCE):
            self.rebalancer.schedule_heartbeat(group, group.members[member_id])  # validated above

    def validate_offset_delete(self, group_id: str) -> None:
        group = self.store.classic_groups[group_id]
        if not group.in_state(S.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        return self.store.classic_groups[group_id].subscribed_topics()

    def offset_expiration_base(self, group_id: str):
        """How old an offset of this group is, for retention (Kafka's offsetExpirationCondition): from
        the moment an Empty group became empty, from its commit for a simple group or a Stable consumer
        group (topics it is not subscribed to), never for a group that is rebalancing."""
        group = self.store.classic_groups[group_id]
        if group.is_simple:
            return lambda value: value.commit_timestamp_ms
        if group.in_state(S.EMPTY):
            since = group.current_state_timestamp_ms
            return lambda value: since
        if group.in_state(S.STABLE) and group.subscribed_topics() is not None:
            return lambda value: value.commit_timestamp_ms
        return None

    def is_empty(self, group_id: str) -> bool:
        return self.store.classic_groups[group_id].in_state(S.EMPTY)
