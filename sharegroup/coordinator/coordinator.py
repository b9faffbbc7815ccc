"""GroupCoordinator: Kafka's group coordinator for share groups and KIP-848 consumer groups.

The public face of the package: it validates every request, takes the group's lock, expires the
group's overdue members, runs the operation, and tells the optional `GroupListener` what changed once
the lock is released. The work itself lives with what it concerns:

- `share/heartbeat.py`: joins, heartbeats, leaves, session expiry, the target assignment;
- `consumer/heartbeat.py`, `consumer/admin.py`: the same for KIP-848 consumer groups (a group id has one
  type; a request of the other type gets GROUP_ID_NOT_FOUND), with describe and the offset-commit checks;
- `share/admin.py`: describe, alter and delete offsets, delete group;
- `classic/coordinator.py` (`ClassicCoordinator`, a component this class owns and delegates to):
  classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups) and committed offsets
  (OffsetCommit, OffsetFetch, OffsetDelete, retention);
- `share/partition_lifecycle.py`: two-stage initialization and deletion of share-partition state through
  the Persister protocol;
- `group_store.py` (groups moved only by committed records, group locks) and `share/record_helpers.py`
  (the record lists that change a group).
"""

from __future__ import annotations

import logging
import uuid
from typing import Awaitable, Callable, Iterable, Mapping, Sequence

from ..clock import Clock, SystemClock
from ..errors import Errors, ShareError
from ..persistence import Persister
from .classic.config import ClassicGroupConfig
from .classic.coordinator import ClassicCoordinator
from .classic.records import OffsetCommitKey
from .classic.responses import (
    ClassicGroupDescription,
    CommittedOffset,
    GroupListing,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from .consumer.admin import (
    check_heartbeat,
    consumer_offset_hooks,
    deletion_records,
    describe as describe_consumer_group,
    describe_classic_form,
    validate_offset_commit,
    validate_offset_fetch,
)
from .consumer.config import ConsumerGroupConfig
from .consumer.group import ConsumerGroup
from .consumer.heartbeat import ConsumerMembership
from .consumer.responses import ConsumerGroupDescription
from .group_store import GroupStore
from .listener import GroupListener
from .offsets import CommitRequest, CommittedOffsets
from .records import MemoryRecordSink, Record, RecordSink, compact
from .responses import HeartbeatResult
from .share.admin import ShareGroupAdmin, check_offsets_request
from .share.config import GroupConfig
from .share.heartbeat import Membership
from .share.partition_lifecycle import PERSISTER_ATTEMPTS, PartitionStateLifecycle
from .share.responses import GroupDescription, OffsetInfo
from .topics import TopicsLookup
from .transactions.records import PendingOffset
from .validation import (
    check_group_id,
    check_member_epoch,
    check_member_id,
    check_optional_text,
    check_text,
    check_topic_id,
    check_topic_names,
    invalid,
)

__all__ = ["GroupCoordinator", "PERSISTER_ATTEMPTS"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """Share-group membership, the simple assignor, share-partition initialization/deletion and the
    admin offsets APIs, classic groups and committed offsets; see the module docstring."""

    def __init__(
        self,
        *,
        persister: Persister,
        topics: TopicsLookup,
        clock: Clock = SystemClock(),
        config: GroupConfig = GroupConfig(),
        record_sink: RecordSink | None = None,
        listener: GroupListener | None = None,
        group_timing: Callable[[str], tuple[int, int] | None] | None = None,
        classic_config: ClassicGroupConfig = ClassicGroupConfig(),
        consumer_config: ConsumerGroupConfig = ConsumerGroupConfig(),
        consumer_group_timing: Callable[[str], tuple[int, int] | None] | None = None,
    ) -> None:
        """`group_timing(group_id)` optionally gives a share group's own (session timeout ms, heartbeat
        interval ms), e.g. from its group configs; None keeps `config`'s. `consumer_group_timing` is the
        same for KIP-848 consumer groups (their `consumer.*` group configs) over `consumer_config`'s. `classic_config` holds the
        classic-group and offset settings (`group.min.session.timeout.ms`, ...), `consumer_config` those
        of KIP-848 consumer groups (`group.consumer.*`)."""
        if not isinstance(persister, Persister):
            raise TypeError(f"persister must implement sharegroup.persistence.Persister, got {persister!r}")
        if not isinstance(topics, TopicsLookup):
            raise TypeError(f"topics must implement sharegroup.coordinator.TopicsLookup, got {topics!r}")
        if not isinstance(clock, Clock):
            raise TypeError(f"clock must implement sharegroup.clock.Clock, got {clock!r}")
        if not isinstance(config, GroupConfig):
            raise TypeError(f"config must be a GroupConfig, got {config!r}")
        if record_sink is not None and not isinstance(record_sink, RecordSink):
            raise TypeError(f"record_sink must provide async append(records) and read_all(), got {record_sink!r}")
        if not isinstance(classic_config, ClassicGroupConfig):
            raise TypeError(f"classic_config must be a ClassicGroupConfig, got {classic_config!r}")
        if listener is not None and not isinstance(listener, GroupListener):
            raise TypeError(
                f"listener must provide async on_member_left, on_group_deleted and on_offsets_deleted, got {listener!r}"
            )
        self._clock = clock
        self._config = config
        self._listener = listener
        self._store = GroupStore(record_sink if record_sink is not None else MemoryRecordSink(),
                                 loaded=record_sink is None)
        self._lifecycle = PartitionStateLifecycle(self._store, persister)
        self._membership = Membership(self._store, self._lifecycle, topics, clock, config, group_timing)
        self._admin = ShareGroupAdmin(self._store, self._lifecycle, topics)
        if not isinstance(consumer_config, ConsumerGroupConfig):
            raise TypeError(f"consumer_config must be a ConsumerGroupConfig, got {consumer_config!r}")
        self._consumer_config = consumer_config
        self._consumer = ConsumerMembership(self._store, topics, clock, consumer_config, consumer_group_timing)
        self._classic = ClassicCoordinator(self._store, clock, classic_config)
        self._classic.offsets.register("consumer", consumer_offset_hooks(self._store))

    # -- properties --------------------------------------------------------------------------------

    @property
    def config(self) -> GroupConfig:
        return self._config

    @property
    def record_sink(self) -> RecordSink:
        return self._store.sink

    @property
    def consumer_config(self) -> ConsumerGroupConfig:
        return self._consumer_config

    @property
    def classic_config(self) -> ClassicGroupConfig:
        return self._classic.config

    @property
    def offsets(self) -> CommittedOffsets:
        """The committed-offsets service; other group types `register` their OffsetHooks on it."""
        return self._classic.offsets

    @property
    def group_ids(self) -> list[str]:
        """The ids of the share groups (what the share-group admin APIs serve)."""
        return sorted(g for g, group in self._store.groups.items() if not isinstance(group, ConsumerGroup))

    def group_types(self) -> dict[str, str]:
        """Every group id with its type ("share", "consumer", ...), sorted by id."""
        return {g: self._store.group_type(g) or "" for g in sorted(self._store.groups)}

    def group_type(self, group_id: str) -> str | None:
        """"classic", "share" or "consumer" of an existing group; None when missing."""
        return self._store.group_type(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether `group_id` is a KIP-848 consumer group."""
        return isinstance(self._store.groups.get(group_id), ConsumerGroup)

    # -- loading -----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild every group from `record_sink.read_all()`; members get fresh sessions (as in Kafka).

        Call it before serving (operations on a coordinator with a sink of its own raise
        COORDINATOR_LOAD_IN_PROGRESS until then) and not concurrently with other operations. A record
        that does not fit raises ValueError: a corrupt record is never skipped silently.
        """
        now_ms = self._clock.now_ms()
        share_ms = self._config.session_timeout_ms
        self._store.load(lambda group: now_ms + (self._consumer.timing(group.group_id)[0]
                                                 if isinstance(group, ConsumerGroup) else share_ms), now_ms)
        self._classic.on_loaded()
        self._consumer.on_loaded(now_ms)

    # -- ShareGroupHeartbeat and sessions ------------------------------------------------------------

    async def share_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed_topic_names: Iterable[str] | None = None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """Join (epoch 0), leave (epoch -1) or heartbeat (the member's epoch); see `share/heartbeat.py`.

        Raises ShareError: INVALID_REQUEST (malformed), GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, or a record sink failure. A leave, and members
        whose session expired meanwhile, are reported to the listener's `on_member_left`.
        """
        group_id = check_group_id(group_id)
        member_epoch = check_member_epoch(member_epoch)
        member_id = check_member_id(member_id, member_epoch)
        names = check_topic_names(subscribed_topic_names, member_epoch)
        rack_id = check_optional_text(rack_id, "RackId")
        client_id = check_text(client_id, "ClientId")
        client_host = check_text(client_host, "ClientHost")
        self._store.check_loaded()
        self._require_share_type(group_id)
        events = _Events()
        try:
            async with self._store.locks.hold(group_id):
                events.members_left(group_id, await self._membership.expire_group(group_id, self._clock.now_ms()))
                if member_epoch == -1:
                    result = await self._membership.leave(group_id, member_id)
                    events.members_left(group_id, [member_id])
                    return result
                return await self._membership.heartbeat(
                    group_id, member_id, member_epoch, names, rack_id, client_id, client_host
                )
        finally:
            await self._notify(events)

    async def expire_members(self) -> list[str]:
        """Remove every member whose session timed out at `clock.now_ms()` (each affected group's epoch
        bumps); returns their ids. Heartbeats and admin calls expire a group's overdue members too, so a
        member is gone once its deadline passed, whenever this is called."""
        self._store.check_loaded()
        now_ms = self._clock.now_ms()
        expired: list[str] = []
        for group_id in sorted(self._store.groups):
            group = self._store.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                if group.sessions.has_due(now_ms) or group.rebalance_timeouts.has_due(now_ms):
                    async with self._store.locks.hold(group_id):
                        expired += await self._consumer.expire_group(group_id, now_ms)
                continue
            if group is None or not group.has_expired_sessions(now_ms):
                continue
            events = _Events()
            try:
                async with self._store.locks.hold(group_id):
                    gone = await self._membership.expire_group(group_id, now_ms)
                    events.members_left(group_id, gone)
                    expired += gone
            finally:
                await self._notify(events)
        return expired

    # -- KIP-848 consumer groups ---------------------------------------------------------------------

    async def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Iterable[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned_topic_partitions: Mapping[uuid.UUID, Iterable[int]] | None = None,
        client_id: str = "",
        client_host: str = "",
        api_version: int = 1,
        topic_authorized: Callable[[str], bool] | None = None,
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: join (epoch 0), heartbeat, leave (-1) or static leave (-2) of a
        KIP-848 consumer group member; see `consumer/heartbeat.py`. None means "unchanged" for the
        optional fields; `owned_topic_partitions` is what the member owns (None: not reported). In v0
        (`api_version` 0) an empty member id on a join gets one generated. `topic_authorized(name)`, when
        given, says whether the member may DESCRIBE a topic: a regex this heartbeat resolves matches only
        those (as Kafka filters regex subscriptions by the requester's permissions).

        A join (epoch 0) on the id of an Empty classic group replaces that group (its committed offsets
        stay), as Kafka does; a classic group with members is not converted.

        Raises ShareError: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION (malformed),
        GROUP_ID_NOT_FOUND (missing, or a group of another type: "Group g is not a consumer group."), UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED."""
        request = check_heartbeat(dict(
            group_id=group_id, member_id=member_id, member_epoch=member_epoch, instance_id=instance_id,
            rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=subscribed_topic_names,
            subscribed_topic_regex=subscribed_topic_regex, server_assignor=server_assignor,
            owned_topic_partitions=owned_topic_partitions, client_id=client_id, client_host=client_host,
            topic_authorized=topic_authorized,
        ), api_version, self._consumer_config)
        self._store.check_loaded()
        async with self._store.locks.hold(request.group_id):
            await self._consumer.expire_group(request.group_id, self._clock.now_ms())
            replaced = self._classic.yield_to_consumer_group(request.group_id, request.member_epoch == 0)
            if request.member_epoch < 0:
                return await self._consumer.leave(request)
            try:
                return await self._consumer.heartbeat(request, replaced)
            finally:
                if replaced:
                    self._classic.forget_timers(request.group_id)

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe of one group: INVALID_GROUP_ID for a blank id, GROUP_ID_NOT_FOUND for a
        missing group or one of another type ("Group g is not a consumer group.", a classic one too)."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._store.check_loaded()
        return describe_consumer_group(self._store, group_id, self._consumer_config.default_assignor)

    def describe_groups(self, group_ids: Iterable[str]) -> list[ClassicGroupDescription]:
        """DescribeGroups: classic groups as they are, KIP-848 consumer groups in classic form (see
        `consumer/admin.describe_classic_form`), GROUP_ID_NOT_FOUND (state Dead) for the rest."""
        described = self._classic.describe_groups(group_ids)
        return [describe_classic_form(self._store, d.group_id, self._consumer_config.default_assignor,
                                      self._topic_name)
                if self.is_consumer_group(d.group_id) else d for d in described]

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of a live topic known by id (None when it is gone or the lookup cannot tell)."""
        info = self._consumer.topics.lookup_id(topic_id)
        return info.name if info is not None and info.topic_id == topic_id else None

    async def expire_offsets(self) -> int:
        """One retention pass (see `ClassicCoordinator.expire_offsets`); then, as Kafka's periodic group
        cleanup does, every KIP-848 consumer group that is empty and holds no committed offsets any more
        is deleted (its records tombstoned). Returns how many offsets expired."""
        expired = await self._classic.expire_offsets()
        for group_id in sorted(g for g, group in self._store.groups.items() if isinstance(group, ConsumerGroup)):
            async with self._store.locks.hold(group_id):
                await self._consumer.expire_group(group_id, self._clock.now_ms())
                group = self._store.groups.get(group_id)
                if isinstance(group, ConsumerGroup) and not group.members and not self._store.offsets.get(group_id):
                    await self._store.commit(deletion_records(group))
                    log.info("consumer group %s: empty without committed offsets, deleted", group_id)
        return expired

    def validate_offset_commit(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """Raise as Kafka does when a member of a consumer group commits offsets with a wrong epoch
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); GROUP_ID_NOT_FOUND when the group
        is not a consumer group (ask `is_consumer_group` first)."""
        self._store.check_loaded()
        validate_offset_commit(self._store, group_id, member_id, member_epoch)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """The member-epoch check of OffsetFetch v9+ on a consumer group (UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH)."""
        self._store.check_loaded()
        validate_offset_fetch(self._store, group_id, member_id, member_epoch)

    # -- classic groups and committed offsets: delegated to the ClassicCoordinator -------------------

    async def join_group(self, group_id: str, member_id: str, protocol_type: str,
                         protocols: Iterable[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int = -1, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = True) -> JoinGroupResult:
        """JoinGroup; see `ClassicCoordinator.join_group`."""
        return await self._classic.join_group(group_id, member_id, protocol_type, protocols, session_timeout_ms,
                                              rebalance_timeout_ms, group_instance_id, client_id, client_host,
                                              require_known_member_id)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes] | None = None, group_instance_id: str | None = None,
                         protocol_type: str | None = None, protocol_name: str | None = None) -> SyncGroupResult:
        """SyncGroup; see `ClassicCoordinator.sync_group`."""
        return await self._classic.sync_group(group_id, generation_id, member_id, assignments, group_instance_id,
                                              protocol_type, protocol_name)

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> Errors:
        """The classic Heartbeat; see `ClassicCoordinator.heartbeat`."""
        return await self._classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> list[LeaveMemberResult]:
        """LeaveGroup of one or more members (by member id, or by group instance id)."""
        return await self._classic.leave_group(group_id, members)

    async def offset_commit(self, group_id: str, generation_id: int, member_id: str,
                            partitions: Iterable[CommitRequest], group_instance_id: str | None = None,
                            api_version: int = 9, retention_ms: int = -1) -> dict[tuple[str, int], Errors]:
        """OffsetCommit; see `ClassicCoordinator.offset_commit`."""
        return await self._classic.offset_commit(group_id, generation_id, member_id, partitions, group_instance_id,
                                                 api_version, retention_ms)

    async def validate_transactional_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                                             generation_id: int, partitions: Sequence[tuple[str, int, str | None]]
                                             ) -> dict[tuple[str, int], Errors]:
        """TxnOffsetCommit's KIP-447 member checks (the transaction coordinator's `TransactionalOffsets`)."""
        return await self._classic.validate_transactional_offsets(group_id, member_id, group_instance_id,
                                                                  generation_id, partitions)

    async def commit_transactional_offsets(self, group_id: str, offsets: Sequence[PendingOffset]) -> None:
        """A committed transaction's pending offsets become committed offsets."""
        await self._classic.commit_transactional_offsets(group_id, [
            CommitRequest(o.topic, o.partition, o.offset, o.leader_epoch, o.metadata) for o in offsets])

    async def offset_fetch(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                           member_id: str | None = None, member_epoch: int = -1,
                           require_stable: bool = False) -> dict[tuple[str, int], CommittedOffset]:
        """OffsetFetch of the partitions asked (None: every committed offset of the group)."""
        return await self._classic.offset_fetch(group_id, partitions, member_id, member_epoch, require_stable)

    async def offset_delete(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Errors]:
        """OffsetDelete; see `ClassicCoordinator.offset_delete`."""
        return await self._classic.offset_delete(group_id, partitions)

    async def delete_topic_offsets(self, topic: str) -> int:
        """A topic was deleted: every group's committed offsets of it go too; returns how many."""
        return await self._classic.delete_topic_offsets(topic)

    async def run_timers(self) -> int:
        """Handle every classic-group deadline due now; see `ClassicCoordinator.run_timers`."""
        return await self._classic.run_timers()

    async def wait_for_timers(self) -> None:
        """Return once a classic-group deadline is due."""
        await self._classic.wait_for_timers()

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[GroupListing]:
        """ListGroups: every group with its type, protocol type and state; `states` and `types` filter
        case-insensitively, states also ignoring surrounding blanks (empty: all)."""
        self._store.check_loaded()
        state_filter = {s.lower().strip() for s in states}  # Kafka trims the states too
        type_filter = {t.lower() for t in types}
        listings = self._classic.listings()
        listings += [GroupListing(g, "share", "share", str(group.state)) for g, group in self._store.groups.items()
                     if self._store.group_type(g) == "share"]
        listings += [GroupListing(g, "consumer", "consumer", str(group.state))
                     for g, group in self._store.groups.items() if isinstance(group, ConsumerGroup)]
        return sorted((entry for entry in listings
                       if (not state_filter or entry.state.lower() in state_filter)
                       and (not type_filter or entry.group_type in type_filter)), key=lambda e: e.group_id)

    # -- admin APIs ----------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """State, epochs, and every member with its subscription and current assignment."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._store.check_loaded()
        self._require_share_type(group_id)
        return self._admin.describe_group(group_id)

    async def describe_offsets(self, group_id: str) -> dict[uuid.UUID, dict[int, OffsetInfo]]:
        """Start offset and lag of every initialized share-partition of the group, from `read_summary`.

        lag = latest offset - start offset - delivery complete count, never negative; -1 when the start
        offset is not resolved yet (-1) or the count is unknown. Per-partition failures come back as
        `OffsetInfo(start_offset or -1, -1, error)`.
        """
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._store.check_loaded()
        self._require_share_type(group_id)
        return await self._admin.describe_offsets(group_id)

    async def alter_offsets(
        self, group_id: str, offsets: Mapping[uuid.UUID, Mapping[int, int]]
    ) -> dict[uuid.UUID, dict[int, Errors]]:
        """Reset share-partitions to the given start offsets (re-initializing their state with the
        current group epoch). Only on an empty group (GROUP_NOT_EMPTY otherwise); a missing group is
        created. Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION (unknown topic id or partition beyond
        the topic), or the persister's error. A malformed request raises INVALID_REQUEST.

        The listener's `on_offsets_deleted` gets every topic the persister was asked to reset, in
        request order, whatever it answered (a call that failed may still have landed)."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        request = check_offsets_request(offsets)
        self._store.check_loaded()
        self._require_share_type(group_id)
        events = _Events()
        try:
            async with self._store.locks.hold(group_id):
                events.members_left(group_id, await self._membership.expire_group(group_id, self._clock.now_ms()))
                results, reset = await self._admin.alter_offsets(group_id, request)
                events.offsets_deleted(group_id, reset)
                return results
        finally:
            await self._notify(events)

    async def delete_offsets(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Errors]:
        """Delete the share-partition state of whole topics (two-stage: they are *deleting* until the
        persister deleted every partition). Only on an existing (GROUP_ID_NOT_FOUND), empty
        (GROUP_NOT_EMPTY) group. Per topic: NONE, UNKNOWN_TOPIC_OR_PARTITION (the group holds no state
        for it) or the first persister error (the topic then stays deleting; calling again retries).

        The listener's `on_offsets_deleted` gets every topic the group held state for, in request
        order, whatever the persister answered (none of them is initialized any more)."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        if isinstance(topic_ids, (str, bytes)) or not isinstance(topic_ids, (list, tuple, set, frozenset)):
            raise invalid(f"topic ids must be a list of uuid.UUID, got {topic_ids!r}.")
        wanted = list(dict.fromkeys(check_topic_id(t) for t in topic_ids))
        self._store.check_loaded()
        events = _Events()
        try:
            async with self._store.locks.hold(group_id):
                events.members_left(group_id, await self._membership.expire_group(group_id, self._clock.now_ms()))
                results, deleted = await self._admin.delete_offsets(group_id, wanted)
                events.offsets_deleted(group_id, deleted)
                return results
        finally:
            await self._notify(events)

    async def delete_group(self, group_id: str) -> None:
        """Delete an empty group (GROUP_NOT_EMPTY otherwise; GROUP_ID_NOT_FOUND if missing): first all
        its share-partition state (two-stage, through *deleting*), then its records (tombstones). If the
        persister fails for a partition, the group stays with those topics deleting and the first error
        is raised; calling again retries. The listener's `on_group_deleted` follows a deletion. As in
        Kafka, only a null group id is INVALID_GROUP_ID: an empty or blank one is looked up like any
        other (a classic group may have a blank id)."""
        if not isinstance(group_id, str):
            raise ShareError(Errors.INVALID_GROUP_ID, f"The group id must be a string, got {group_id!r}.")
        self._store.check_loaded()
        if self._store.group_type(group_id) == "classic":
            await self._classic.delete_group(group_id)
            return
        if self.is_consumer_group(group_id):
            async with self._store.locks.hold(group_id):
                await self._consumer.expire_group(group_id, self._clock.now_ms())
                group = self._store.require_group(group_id, ConsumerGroup)
                offsets = [Record(OffsetCommitKey(group_id, topic, partition), None)  # the group's offsets go too
                           for topic, partition in sorted(self._store.offsets.get(group_id, {}))]
                await self._store.commit(offsets + deletion_records(group))
            return
        events = _Events()
        try:
            async with self._store.locks.hold(group_id):
                events.members_left(group_id, await self._membership.expire_group(group_id, self._clock.now_ms()))
                await self._admin.delete_group(group_id)
                events.group_deleted(group_id)
        finally:
            await self._notify(events)

    async def topic_deleted(self, topic_id: uuid.UUID) -> dict[str, Errors]:
        """The topic `topic_id` was deleted: every group holding share-partition state for it has that
        state deleted through the persister (two-stage, as delete offsets) whether it has members or
        not; their assignments lose the topic on the next heartbeat (its metadata is gone). Returns the
        groups that held state, with the persister's first error (NONE when all went)."""
        topic_id = check_topic_id(topic_id)
        self._store.check_loaded()
        outcomes: dict[str, Errors] = {}
        for group_id in self.group_ids:
            events = _Events()
            try:
                async with self._store.locks.hold(group_id):
                    held, error = await self._admin.delete_topic_state(group_id, topic_id)
                    if held:
                        outcomes[group_id] = error
                        events.offsets_deleted(group_id, [topic_id])
            finally:
                await self._notify(events)
        return outcomes

    def _require_share_type(self, group_id: str) -> None:
        """A share-group API on a group of another type is GROUP_ID_NOT_FOUND, as Kafka answers."""
        kind = self._store.group_type(group_id)
        if kind is not None and kind != "share":
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")

    # -- listener ------------------------------------------------------------------------------------

    async def _notify(self, events: "_Events") -> None:
        """Tell the listener, in order, what changed; a listener that raises is logged and skipped."""
        if self._listener is None or not events.calls:
            return
        for what, call in events.calls:
            try:
                await call(self._listener)
            except Exception:
                log.exception("group listener %s failed", what)

    # -- invariants ----------------------------------------------------------------------------------

    def _check(self, replay: bool = False) -> None:
        """Assert every invariant of every group; with `replay`, also that a coordinator rebuilt from the
        record sink has exactly the same groups (the sink must be readable without side effects)."""
        for group_id, group in self._store.groups.items():
            assert group.group_id == group_id
            group._check(self._consumer_config.max_size if isinstance(group, ConsumerGroup) else self._config.max_size)
        self._classic.check()
        if replay:
            records = self._store.sink.read_all()
            assert self._store.dump() == self._store.replayed_dump(records), "replay differs"
            assert self._store.classic_dump() == self._store.replayed_classic_dump(records), "classic replay differs"
            compacted = compact(records)  # what a compacting sink (DIR/groups) keeps must replay the same
            assert self._store.dump() == self._store.replayed_dump(compacted), "compacted replay differs"
            assert self._store.classic_dump() == self._store.replayed_classic_dump(compacted), \
                "compacted classic replay differs"

    def _dump(self) -> dict[str, dict]:
        """Every group's persisted state in a comparable form (what `load` must reproduce)."""
        return self._store.dump()


class _Events:
    """Listener calls an operation owes, collected under the group lock and made after it."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        # (what, the call owed to the GroupListener), made on the listener after the lock is released
        self.calls: list[tuple[str, Callable[[GroupListener], Awaitable[None]]]] = []

    def members_left(self, group_id: str, member_ids: list[str]) -> None:
        for member_id in member_ids:
            self.calls.append((f"on_member_left({group_id!r}, {member_id!r})",
                               lambda listener, m=member_id: listener.on_member_left(group_id, m)))

    def group_deleted(self, group_id: str) -> None:
        self.calls.append((f"on_group_deleted({group_id!r})", lambda listener: listener.on_group_deleted(group_id)))

    def offsets_deleted(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        if topic_ids:
            ids = list(topic_ids)
            self.calls.append((f"on_offsets_deleted({group_id!r}, {ids!r})",
                               lambda listener: listener.on_offsets_deleted(group_id, ids)))
