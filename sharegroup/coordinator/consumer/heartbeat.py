"""ConsumerGroupHeartbeat for KIP-848 consumer groups: joins, heartbeats, leaves, static members,
session and rebalance timeouts, the target assignment and reconciliation.

A heartbeat commits up to three record lists, each leaving a consistent group:
1. membership: a static member's replacement, the member's metadata, a resolved subscription regex,
   and the group epoch bump (new member, changed subscription, or changed metadata of a subscribed
   topic: created, deleted, resized);
2. the target assignment, when the group epoch is ahead of the assignment epoch: the assignor the
   members prefer (or the default) runs over every subscribed topic, and the members whose target
   changed get a record, with the new assignment epoch;
3. the member's reconciliation to its target (`reconciliation.py`): partitions it must give
   up become pending revocation, partitions it gains are given only once no other member holds them.

A member leaves with epoch -1, or with -2 when static (it keeps its partitions and its place for its
session timeout, so a restart with the same instance id takes them back without a rebalance). A
member whose session times out, or that does not revoke within its rebalance timeout, is removed as
if it left. The callers hold the group lock.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Callable, Mapping, NamedTuple

from ...clock import Clock
from ...errors import Errors, ShareError
from ..assignment import Assignment, assignment_dict, assignment_tuple
from ..group_store import GroupStore
from ..records import Record
from ..responses import HeartbeatResult
from ..topics import TopicInfo, TopicsLookup, metadata_hash
from .assignors import ASSIGNORS
from .config import ConsumerGroupConfig
from .group import LEAVE_STATIC_EPOCH, ConsumerGroup, ConsumerGroupMember, MemberState
from .reconciliation import reconcile
from .records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)

__all__ = ["ConsumerHeartbeat", "ConsumerMembership", "REGEX_REFRESH_INTERVAL_MS"]

log = logging.getLogger(__name__)

# How often a group's subscription regexes are matched again against the topic names (Kafka refreshes
# them in the background at most every 10 s as well; a member changing its regex resolves it at once).
REGEX_REFRESH_INTERVAL_MS = 10_000


class ConsumerHeartbeat(NamedTuple):
    """One ConsumerGroupHeartbeat request, validated (`consumer_validation.check_heartbeat`).
    None means "unchanged since the last heartbeat" for the optional fields; `owned` is the
    member's owned partitions (topic id -> partitions) or None when not reported."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[uuid.UUID, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    # Whether the member may DESCRIBE a topic: regexes it triggers the resolution of match only those.
    topic_authorized: Callable[[str], bool] | None = None

    @property
    def full(self) -> bool:
        """A full request (a join, or a client recovering from an error) carries every field."""
        return (self.rebalance_timeout_ms != -1 and self.owned is not None
                and (self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None))


class ConsumerMembership:
    """Joins, heartbeats, leaves and timeouts of consumer-group members."""

    def __init__(self, store: GroupStore, topics: TopicsLookup, clock: Clock, config: ConsumerGroupConfig,
                 group_timing: Callable[[str], tuple[int, int] | None] | None = None) -> None:
        self.store = store
        self.topics = topics
        self.clock = clock
        self.config = config
        self.group_timing = group_timing

    def timing(self, group_id: str) -> tuple[int, int]:
        """(session timeout ms, heartbeat interval ms) of a group: its own when the `group_timing`
        source has them (the group's `consumer.*` configs), else the coordinator's."""
        own = None if self.group_timing is None else self.group_timing(group_id)
        return own if own is not None else (self.config.session_timeout_ms, self.config.heartbeat_interval_ms)

    # -- leave and timeouts ------------------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> None:
        """After a restart: members still told to revoke get their rebalance timeout again, from now
        (sessions are restarted by the store's load)."""
        for group in self.store.groups.values():
            if isinstance(group, ConsumerGroup):
                for member in group.members.values():
                    if member.state is MemberState.UNREVOKED_PARTITIONS:
                        group.rebalance_timeouts.touch(member.member_id, now_ms + member.rebalance_timeout_ms)
                        group.rebalance_timeout_epochs[member.member_id] = member.member_epoch

    async def leave(self, request: ConsumerHeartbeat) -> HeartbeatResult:
        """Epoch -1 (leave) or -2 (a static member's temporary leave). The response carries the member
        id and that epoch only (heartbeat interval 0), as Kafka's."""
        group: ConsumerGroup = self.store.require_group(request.group_id, ConsumerGroup)
        member = self._existing_member(group, request.member_id, request.instance_id)
        if request.member_epoch == LEAVE_STATIC_EPOCH:
            # The static member will come back: it keeps its partitions (none pending revocation) and
            # its session; a rejoin with the same instance id takes its place.
            await self.store.commit([_assignment_record(group.group_id, member.member_id, LEAVE_STATIC_EPOCH,
                                                        member.previous_member_epoch, MemberState.STABLE,
                                                        member.assigned, {})])
            group.rebalance_timeouts.cancel(member.member_id)
            group.rebalance_timeout_epochs.pop(member.member_id, None)
            log.info("static member %s (%s) of consumer group %s left temporarily",
                     member.member_id, member.instance_id, group.group_id)
            return HeartbeatResult(member.member_id, LEAVE_STATIC_EPOCH, 0, None)
        await self.store.commit(self.removal_records(group, [member.member_id]))
        log.info("member %s left consumer group %s", member.member_id, group.group_id)
        return HeartbeatResult(member.member_id, -1, 0, None)

    async def expire_group(self, group_id: str, now_ms: int) -> list[str]:
        """Remove the members whose session timed out, or that did not revoke within their rebalance
        timeout, at `now_ms`; returns their ids."""
        group = self.store.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return []
        gone = group.sessions.due(now_ms) if group.sessions.has_due(now_ms) else []
        if group.rebalance_timeouts.has_due(now_ms):
            for member_id in group.rebalance_timeouts.due(now_ms):
                member = group.members.get(member_id)
                if member is not None and member.member_epoch == group.rebalance_timeout_epochs.get(member_id) \
                        and member.state is MemberState.UNREVOKED_PARTITIONS:
                    if member_id not in gone:
                        gone.append(member_id)
                else:  # it revoked in time: nothing to do
                    group.rebalance_timeouts.cancel(member_id)
                    group.rebalance_timeout_epochs.pop(member_id, None)
        if gone:
            await self.store.commit(self.removal_records(group, gone))
            log.info("consumer group %s: removed %s (session or rebalance timeout)", group_id, ", ".join(gone))
        return gone

    def removal_records(self, group: ConsumerGroup, member_ids: list[str]) -> list[Record]:
        """Fence members (leave, session or rebalance timeout): their tombstones, regexes no one uses
        any more, and the group epoch bump (the group's metadata hash is recomputed)."""
        records: list[Record] = []
        regex_users = dict(group.regex_counts)
        for member_id in member_ids:
            records += _member_tombstones(group.group_id, member_id)
            regex = group.members[member_id].subscribed_topic_regex
            if regex is not None:
                regex_users[regex] -= 1
        records += [Record(ConsumerGroupRegularExpressionKey(group.group_id, r), None)
                    for r, n in sorted(regex_users.items()) if n <= 0 and r in group.regexes]
        remaining = [m for m in group.members.values() if m.member_id not in member_ids]
        regexes = {r: v for r, v in group.regexes.items() if regex_users.get(r, 0) > 0}
        _image, new_hash = self._image(remaining, regexes)
        records.append(_epoch_record(group.group_id, group.group_epoch + 1, new_hash))
        return records

    # -- join and heartbeat ------------------------------------------------------------------------

    async def heartbeat(self, request: ConsumerHeartbeat, first_records: list[Record] | None = None) -> HeartbeatResult:
        """A join or heartbeat. `first_records` (the tombstone of an Empty classic group this join
        replaces) are committed with the membership records, so both happen or neither."""
        group_id, member_epoch = request.group_id, request.member_epoch
        now_ms = self.clock.now_ms()
        group = self.store.group_of_type(group_id, ConsumerGroup)  # "Group g is not a consumer group."
        if group is None:
            if member_epoch != 0:
                raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            group = ConsumerGroup(group_id)  # registered by the replay of its first records
        member_id = request.member_id
        if len(group.members) >= self.config.max_size and (not member_id or member_id not in group.members):
            raise ShareError(Errors.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        if not member_id:  # v0 clients may let the coordinator choose
            member_id = _new_member_id(group)
        records: list[Record] = list(first_records or ())
        replaced: str | None = None
        if request.instance_id is None:
            old = self._dynamic_member(group, member_id, request)
        else:
            old, replaced, static_records = self._static_member(group, member_id, request)
            records += static_records

        # 1. Membership, a newly used regex, metadata and the group epoch.
        metadata = _updated_metadata(old, request)
        if old is None or old.member_id != member_id or metadata != old.metadata():
            records.append(Record(ConsumerGroupMemberMetadataKey(group_id, member_id), metadata))
        subscription_changed = old is None or (
            metadata.subscribed_topic_names != old.subscribed_topic_names
            or metadata.subscribed_topic_regex != old.subscribed_topic_regex)
        members = [m for m in group.members.values() if m.member_id not in (member_id, replaced)]
        members.append(_member_view(member_id, metadata))
        regexes = dict(group.regexes)
        refresh = [r for r in {m.subscribed_topic_regex for m in members} - {None}
                   if r not in regexes or now_ms - group.regex_checked_ms.get(r, regexes[r].timestamp_ms)
                   >= REGEX_REFRESH_INTERVAL_MS]
        regex_changed = False
        if refresh:
            names = sorted(self._topic_names())
            for regex in sorted(refresh):
                matched = tuple(n for n in names if _compiled(regex).fullmatch(n)
                                and (request.topic_authorized is None or request.topic_authorized(n)))
                old_value = regexes.get(regex)
                if old_value is not None and old_value.topics == matched:
                    continue  # unchanged: only the (unpersisted) check time moves, below
                value = ConsumerGroupRegularExpressionValue(
                    matched, 0 if old_value is None else old_value.version + 1, now_ms)
                regex_changed = True
                regexes[regex] = value
                records.append(Record(ConsumerGroupRegularExpressionKey(group_id, regex), value))
        in_use = {m.subscribed_topic_regex for m in members}
        for regex in sorted(set(regexes) - in_use):  # no member subscribes with it any more
            del regexes[regex]
            records.append(Record(ConsumerGroupRegularExpressionKey(group_id, regex), None))
        _image_now, new_hash = self._image(members, regexes)
        if group.group_epoch == 0 or subscription_changed or regex_changed or new_hash != group.metadata_hash:
            records.append(_epoch_record(group_id, group.group_epoch + 1, new_hash))
        await self.store.commit(records)
        group = self.store.groups[group_id]
        session_timeout_ms, heartbeat_interval_ms = self.timing(group_id)
        group.sessions.touch(member_id, now_ms + session_timeout_ms)
        for regex in refresh:
            group.regex_checked_ms[regex] = now_ms

        # 2. The target assignment.
        if group.group_epoch > group.assignment_epoch:
            await self.store.commit(self.target_assignment_records(group))

        # 3. This member's reconciliation.
        member = group.members[member_id]
        before = member.assigned
        nxt = reconcile(
            member.member_epoch, member.state, member.assigned, member.pending_revocation,
            group.assignment_epoch, group.target.get(member_id, {}),
            lambda t, p: group.partition_owners.get((t, p), member_id) != member_id,
            request.owned,
        )
        if tuple(nxt) != (member.member_epoch, member.state, member.assigned, member.pending_revocation):
            previous = member.member_epoch if nxt.member_epoch != member.member_epoch else member.previous_member_epoch
            await self.store.commit([_assignment_record(group_id, member_id, nxt.member_epoch, previous, nxt.state,
                                                        nxt.assigned, nxt.pending_revocation)])
            if nxt.state is MemberState.UNREVOKED_PARTITIONS:
                group.rebalance_timeouts.touch(member_id, now_ms + member.rebalance_timeout_ms)
                group.rebalance_timeout_epochs[member_id] = nxt.member_epoch
            else:
                group.rebalance_timeouts.cancel(member_id)
                group.rebalance_timeout_epochs.pop(member_id, None)
        member = group.members[member_id]
        send = member_epoch == 0 or request.full or member.assigned != before or member_id in group.assignment_unsent
        group.assignment_unsent.discard(member_id)
        return HeartbeatResult(member_id, member.member_epoch, heartbeat_interval_ms,
                               assignment_dict(member.assigned) if send else None)

    def _dynamic_member(self, group: ConsumerGroup, member_id: str,
                        request: ConsumerHeartbeat) -> ConsumerGroupMember | None:
        member = group.members.get(member_id)
        if request.member_epoch == 0:
            return member  # a new member, or one rejoining (it gave up its partitions)
        if member is None:
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        _check_epoch(member, request.member_epoch, request.owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, request: ConsumerHeartbeat
                       ) -> tuple[ConsumerGroupMember | None, str | None, list[Record]]:
        """(the member as it was, the id of a static member it replaces, the replacement records)."""
        instance_id = request.instance_id
        existing_id = group.static_members.get(instance_id)
        existing = None if existing_id is None else group.members[existing_id]
        if request.member_epoch == 0:
            if existing is None:
                return group.members.get(member_id), None, []
            # Kafka lets a join take the instance id only once its holder left with epoch -2, even when
            # the join comes with the holder's own member id.
            if existing.member_epoch != LEAVE_STATIC_EPOCH:
                raise ShareError(Errors.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            # The new member takes the old one's place: its metadata, target and partitions, at epoch 0.
            records: list[Record] = []
            if existing.member_id != member_id:
                records += _member_tombstones(group.group_id, existing.member_id)
                records.append(Record(ConsumerGroupMemberMetadataKey(group.group_id, member_id), existing.metadata()))
                if existing.member_id in group.target:
                    records.append(_target_record(group.group_id, member_id, group.target[existing.member_id]))
            records.append(_assignment_record(group.group_id, member_id, 0, 0, MemberState.STABLE,
                                              existing.assigned, {}))
            replaced = existing.member_id if existing.member_id != member_id else None
            if replaced is not None:
                log.info("static member %s of consumer group %s rejoins as %s", instance_id, group.group_id, member_id)
            view = _member_view(member_id, existing.metadata())
            return view, replaced, records
        if existing is None:
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise ShareError(Errors.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        _check_epoch(existing, request.member_epoch, request.owned)
        return existing, None, []

    def _existing_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise ShareError(Errors.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
            return member
        existing_id = group.static_members.get(instance_id)
        if existing_id is None:
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing_id != member_id:
            raise ShareError(Errors.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing_id}.")
        return group.members[existing_id]

    # -- topic metadata and the assignor -------------------------------------------------------------

    def _topic_names(self) -> list[str]:
        return list(self.topics.names())

    def _image(self, members, regexes) -> tuple[dict[str, TopicInfo], int]:
        """The subscribed topics that exist (name -> TopicInfo) and their metadata hash."""
        image: dict[str, TopicInfo] = {}
        for name in _subscribed_names(members, regexes):
            info = self.topics.lookup(name)
            if info is not None:
                image[name] = info
        return image, metadata_hash(image)

    def target_assignment_records(self, group: ConsumerGroup) -> list[Record]:
        """Run the preferred assignor over the subscribed topics; records for the members whose
        target changed, then the target assignment metadata at the group epoch."""
        image, _hash = self._image(group.members.values(), group.regexes)
        subscriptions = {
            m.member_id: {image[n].topic_id for n in _member_names(m, group.regexes) if n in image}
            for m in group.members.values()
        }
        partitions = {info.topic_id: info.num_partitions for info in image.values()}
        assignor = ASSIGNORS[group.preferred_assignor(self.config.default_assignor)]
        new = assignor(subscriptions, partitions, group.target)
        records: list[Record] = []
        for member_id, assignment in sorted(new.items()):
            target = {t: frozenset(ps) for t, ps in assignment.items() if ps}
            if target != group.target.get(member_id, {}):
                records.append(_target_record(group.group_id, member_id, target))
        records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                              ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch)))
        return records


# -- helpers ----------------------------------------------------------------------------------------


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Mapping[uuid.UUID, frozenset[int]] | None) -> None:
    """A greater epoch is fenced; a smaller one only if it is the previous epoch and the member owns
    no more than its assignment (the response that bumped it may have been lost)."""
    if epoch > member.member_epoch:
        raise ShareError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                         f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                         "and rejoin.")
    if epoch < member.member_epoch:
        subset = owned is not None and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
        if epoch != member.previous_member_epoch or not subset:
            raise ShareError(Errors.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known by "
                             f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")


def _updated_metadata(old: ConsumerGroupMember | None, request: ConsumerHeartbeat) -> ConsumerGroupMemberMetadataValue:
    base = old.metadata() if old is not None else ConsumerGroupMemberMetadataValue(
        None, None, "", "", (), None, -1, None)

    def pick(new, current):
        return current if new is None else new

    regex = pick(request.subscribed_topic_regex, base.subscribed_topic_regex)
    return ConsumerGroupMemberMetadataValue(
        pick(request.instance_id, base.instance_id),
        pick(request.rack_id, base.rack_id),
        request.client_id,
        request.client_host,
        pick(request.subscribed_topic_names, base.subscribed_topic_names),
        regex if regex else None,  # an empty regex subscribes to nothing
        base.rebalance_timeout_ms if request.rebalance_timeout_ms == -1 else request.rebalance_timeout_ms,
        pick(request.server_assignor, base.server_assignor),
    )


def _member_view(member_id: str, metadata: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
    view = ConsumerGroupMember(member_id)
    (view.instance_id, view.rack_id, view.client_id, view.client_host, view.subscribed_topic_names,
     view.subscribed_topic_regex, view.rebalance_timeout_ms, view.server_assignor) = metadata
    return view


def _member_names(member: ConsumerGroupMember, regexes) -> set[str]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex is not None and member.subscribed_topic_regex in regexes:
        names.update(regexes[member.subscribed_topic_regex].topics)
    return names


def _subscribed_names(members, regexes) -> set[str]:
    out: set[str] = set()
    for m in members:
        out |= _member_names(m, regexes)
    return out


_REGEX_CACHE: dict[str, re.Pattern] = {}


def _compiled(regex: str) -> re.Pattern:
    pattern = _REGEX_CACHE.get(regex)
    if pattern is None:
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        pattern = _REGEX_CACHE[regex] = re.compile(regex)
    return pattern


def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def _epoch_record(group_id: str, epoch: int, hash_: int) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, hash_))


def _target_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                  ConsumerGroupTargetAssignmentMemberValue(assignment_tuple(assignment)))


def _assignment_record(group_id: str, member_id: str, epoch: int, previous: int, state: MemberState,
                       assigned: Assignment, pending: Assignment) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id),
                  ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, int(state), assignment_tuple(assigned),
                                                            assignment_tuple(pending)))


def _new_member_id(group: ConsumerGroup) -> str:
    while True:
        member_id = str(uuid.uuid4())
        if member_id not in group.members:
            return member_id
