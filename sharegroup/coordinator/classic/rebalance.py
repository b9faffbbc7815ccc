"""The rebalance machinery of classic groups: preparing a rebalance, completing the join phase, storing a
generation, answering parked requests, and every timeout (Kafka's GroupMetadataManager, classic part).

Timer keys (see timers.py), all carrying the group id second:
- ("join", group_id): the join phase ends — after `group.initial.rebalance.delay.ms` for a group that
  was Empty (extended while new members keep arriving, up to the rebalance timeout), else after the
  longest rebalance timeout of the members;
- ("sync", group_id): members that did not send SyncGroup within the rebalance timeout of a generation
  are removed and the group rebalances again (payload: the generation);
- ("heartbeat", group_id, member_id): a member's session (a new member's join timeout while its first
  JoinGroup is parked; a pending member's session).

Callers hold the group's lock. Parked JoinGroup/SyncGroup requests are asyncio futures the member
carries; they are answered here.
"""

from __future__ import annotations

import asyncio
import logging

from ...clock import Clock
from ...errors import Errors, ShareError
from ..group_store import GroupStore
from ..records import Record
from .config import ClassicGroupConfig
from .group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from .records import GroupMetadataKey
from .responses import JoinedMember, JoinGroupResult, SyncGroupResult
from .timers import ClassicTimers

__all__ = ["Rebalancer", "store_error"]

log = logging.getLogger(__name__)
S = ClassicGroupState


def store_error(error: Errors) -> Errors:
    """What a member hears when storing its group failed (Kafka's mapping of append errors)."""
    if error in (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                 Errors.REQUEST_TIMED_OUT, Errors.COORDINATOR_NOT_AVAILABLE):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR):
        return Errors.NOT_COORDINATOR
    return Errors.UNKNOWN_SERVER_ERROR


class Rebalancer:
    """Moves classic groups between states; see the module docstring."""

    def __init__(self, store: GroupStore, timers: ClassicTimers, clock: Clock, config: ClassicGroupConfig) -> None:
        self.store = store
        self.timers = timers
        self.clock = clock
        self.config = config

    # -- sessions ------------------------------------------------------------------------------------

    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(("heartbeat", group.group_id, member.member_id), self.clock.now_ms() + timeout)

    def remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Take a member out; a request it has parked is answered with UNKNOWN_MEMBER_ID so that a live
        client rejoins."""
        gone = JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, "")
        group.complete_join(member, gone)
        group.complete_sync(member, SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.timers.cancel(("heartbeat", group.group_id, member.member_id))

    async def member_removed(self, group: ClassicGroup) -> None:
        """After members left or expired: rebalance a settled group, or finish a join phase that now
        has everyone it waits for."""
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
            await self.prepare_rebalance(group, "members left")
        elif group.in_state(S.PREPARING_REBALANCE) and group.all_members_joined():
            await self.complete_join(group)

    # -- the join phase ------------------------------------------------------------------------------

    async def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            await self.prepare_rebalance(group, reason)
        elif (group.in_state(S.PREPARING_REBALANCE) and group.all_members_joined()
              and group.previous_state is not S.EMPTY):
            # The initial rebalance of an Empty group always waits for its delay.
            await self.complete_join(group)

    async def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.in_state(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment(group, Errors.REBALANCE_IN_PROGRESS)
        self.timers.cancel(("sync", group.group_id))
        now_ms = self.clock.now_ms()
        initial = group.in_state(S.EMPTY)
        if initial:
            delay_ms = self.config.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self.timers.schedule(("join", group.group_id), now_ms + delay_ms, (delay_ms, remaining_ms))
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        log.info("classic group %s: preparing to rebalance at generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if initial:
            return
        if group.all_members_joined():
            await self.complete_join(group)
        else:
            self.timers.schedule(("join", group.group_id), now_ms + group.rebalance_timeout_ms())

    async def join_deadline(self, group: ClassicGroup, payload: tuple[int, int] | None) -> None:
        """The join timer fired: extend an initial delay while new members arrive, else complete."""
        if payload is not None:
            delay_ms, remaining_ms = payload
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                new_delay_ms = min(self.config.initial_rebalance_delay_ms, remaining_ms)
                new_remaining_ms = max(remaining_ms - delay_ms, 0)
                self.timers.schedule(("join", group.group_id), self.clock.now_ms() + new_delay_ms,
                                     (new_delay_ms, new_remaining_ms))
                return
        await self.complete_join(group)

    async def complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next generation and
        answer every parked JoinGroup (the leader gets the members' metadata)."""
        self.timers.cancel(("join", group.group_id))
        if not group.in_state(S.PREPARING_REBALANCE):
            return
        now_ms = self.clock.now_ms()
        for member in [m for m in group.members.values() if not m.awaiting_join and not m.is_static]:
            log.info("classic group %s: member %s did not rejoin; removed", group.group_id, member.member_id)
            self.remove_member(group, member)
        if not group.elect_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them or their session timeout.
            self.timers.schedule(("join", group.group_id), now_ms + group.rebalance_timeout_ms())
            return
        group.init_next_generation(now_ms)
        if group.in_state(S.EMPTY):
            log.info("classic group %s: generation %d is empty", group.group_id, group.generation_id)
            await self.store_group(group)
            return
        log.info("classic group %s: generation %d with %d members (protocol %s, leader %s)", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        members = tuple(JoinedMember(*m) for m in group.current_members())
        for member in list(group.members.values()):
            leader = group.is_leader(member.member_id)
            group.complete_join(member, JoinGroupResult(
                Errors.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, members if leader else ()))
            self.schedule_heartbeat(group, member)
            member.is_new = False
        self.timers.schedule(("sync", group.group_id), now_ms + group.rebalance_timeout_ms(), group.generation_id)

    # -- the sync phase ------------------------------------------------------------------------------

    async def sync_deadline(self, group: ClassicGroup, generation_id: int) -> None:
        """Members that never sent SyncGroup for this generation are removed; the group rebalances."""
        if generation_id != group.generation_id or not group.in_state(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            self.remove_member(group, group.members[member_id])
        await self.prepare_rebalance(group, f"removing {', '.join(missing)}: no SyncGroup in time")

    async def store_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """The leader's SyncGroup: store the generation with its assignment, then answer every parked
        SyncGroup and become Stable. If the store fails, the members hear the error and rejoin."""
        generation = group.generation_id
        full = {member_id: assignment.get(member_id, b"") for member_id in group.members}
        try:
            await self.store_group(group, full, raise_errors=True)
        except ShareError as exc:
            if group.generation_id == generation and group.in_state(S.COMPLETING_REBALANCE):
                self.reset_and_propagate_assignment(group, store_error(exc.error))
                await self.maybe_prepare_rebalance_or_complete_join(group, "storing the assignment failed")
            return
        if group.generation_id == generation and group.in_state(S.COMPLETING_REBALANCE):
            for member_id, member in group.members.items():
                member.assignment = full[member_id]
            self.propagate_assignment(group, Errors.NONE)
            group.transition_to(S.STABLE, self.clock.now_ms())
            log.info("classic group %s: generation %d is stable", group.group_id, generation)

    def propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        for member in group.members.values():
            if member.awaiting_sync:
                group.complete_sync(member, SyncGroupResult(error, member.assignment if error is Errors.NONE else b"",
                                                            group.protocol_type, group.protocol_name))
                self.schedule_heartbeat(group, member)

    def reset_and_propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        assert group.in_state(S.COMPLETING_REBALANCE)
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    # -- records -------------------------------------------------------------------------------------

    async def store_group(self, group: ClassicGroup, assignment: dict[str, bytes] | None = None,
                          raise_errors: bool = False) -> None:
        """Write the group's generation (GroupMetadata). Kafka only logs a failure for an Empty
        generation: the group is still right in memory and the next write replaces the record."""
        value = group.snapshot(assignment)
        try:
            await self.store.commit([Record(GroupMetadataKey(group.group_id), value)])
        except ShareError as exc:
            if raise_errors:
                raise
            log.warning("classic group %s: storing generation %d failed: %s", group.group_id,
                        group.generation_id, exc)

    # -- the timer -----------------------------------------------------------------------------------

    async def fire(self, key: tuple, payload: object) -> None:
        """Handle one due timer (the caller holds the lock of group `key[1]`)."""
        group = self.store.classic_groups.get(key[1])
        if group is None:
            return
        kind = key[0]
        if kind == "join":
            await self.join_deadline(group, payload)  # type: ignore[arg-type]
        elif kind == "sync":
            await self.sync_deadline(group, payload)  # type: ignore[arg-type]
        elif kind == "heartbeat":
            await self.session_expired(group, key[2])

    async def session_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            log.info("classic group %s: pending member %s never joined; removed", group.group_id, member_id)
            group.remove(member_id)
            if group.in_state(S.PREPARING_REBALANCE) and group.all_members_joined():
                await self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("classic group %s: session of member %s expired", group.group_id, member_id)
        self.remove_member(group, member)
        await self.member_removed(group)


def new_future() -> asyncio.Future:
    return asyncio.get_running_loop().create_future()
