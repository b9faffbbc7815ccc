"""GroupCoordinator: the share-group side of Kafka's group coordinator (SPEC §6, coordinator-facts §4).

Every operation on a group runs under that group's lock (Kafka serializes a group's writes in its
shard), validates first, then produces records; a record list is appended to the record sink and only
once the append succeeded is it replayed into memory, so a failed append leaves state unchanged and a
coordinator rebuilt from the sink's records (`load`) equals the one that wrote them.

A heartbeat goes through up to four commits, each leaving a consistent state:
1. membership: member metadata, topic-metadata clean-up, the group epoch bump;
2. initialization stage 1: the partitions to initialize become *initializing*;
3. initialization stage 2, after `persister.initialize_state` (state epoch = group epoch): they become
   *initialized* (or go back, to be retried by the next heartbeat), bumping the group epoch so the
   assignor sees them;
4. the target assignment (when it lags the group epoch and the assignment interval has passed) and the
   member's reconciliation to it.
Stage 2 runs inside the heartbeat (Kafka runs it on a timer right after) so a member that joins a group
whose partitions initialize at once gets them in its first response.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

from ..clock import Clock, SystemClock
from ..errors import Errors, ShareError
from ..persistence import Persister
from .assignor import simple_assign
from .config import GroupConfig
from .group import (
    Assignment,
    ShareGroup,
    TopicEntry,
    assignment_tuple,
    partition_metadata_value,
)
from .records import (
    MemoryRecordSink,
    Record,
    RecordSink,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    VALUE_TYPES,
)
from .responses import GroupDescription, HeartbeatResult, MemberDescription, OffsetInfo
from .topics import TopicInfo, TopicsLookup, metadata_hash
from .validation import (
    check_group_id,
    check_member_epoch,
    check_member_id,
    check_optional_text,
    check_partition,
    check_text,
    check_topic_id,
    check_topic_names,
    invalid,
)

__all__ = ["GroupCoordinator", "PERSISTER_ATTEMPTS"]

log = logging.getLogger(__name__)

# Attempts per persister call when it fails with a retriable error (Kafka's persister client retries
# likewise before giving up). What still fails is retried by the next heartbeat (initialization) or the
# next admin call (deletion).
PERSISTER_ATTEMPTS = 3

# The epochs a new share group starts at (Kafka since KAFKA-20268): the first subscription makes it 2.
_NEW_GROUP_EPOCH = 1

T = TypeVar("T")


class GroupCoordinator:
    """Share-group membership, the simple assignor, share-partition initialization/deletion and the
    admin offsets APIs; see the module docstring and SPEC §6."""

    def __init__(
        self,
        *,
        persister: Persister,
        topics: TopicsLookup,
        clock: Clock = SystemClock(),
        config: GroupConfig = GroupConfig(),
        record_sink: RecordSink | None = None,
    ) -> None:
        if not isinstance(persister, Persister):
            raise TypeError(f"persister must implement sharegroup.persistence.Persister, got {persister!r}")
        if not (callable(getattr(topics, "lookup", None)) and callable(getattr(topics, "latest_offset", None))):
            raise TypeError(f"topics must provide lookup(name) and latest_offset(topic_id, partition), got {topics!r}")
        if not callable(getattr(clock, "now_ms", None)):
            raise TypeError(f"clock must provide now_ms(), got {clock!r}")
        if not isinstance(config, GroupConfig):
            raise TypeError(f"config must be a GroupConfig, got {config!r}")
        if record_sink is not None and not isinstance(record_sink, RecordSink):
            raise TypeError(f"record_sink must provide async append(records) and read_all(), got {record_sink!r}")
        self._persister = persister
        self._topics = topics
        self._clock = clock
        self._config = config
        self._sink: RecordSink = record_sink if record_sink is not None else MemoryRecordSink()
        # A sink handed in may hold records of an earlier run: serve only after `load` replayed them.
        self._loaded = record_sink is None
        self._groups: dict[str, ShareGroup] = {}
        self._locks = _GroupLocks()

    # -- properties --------------------------------------------------------------------------------

    @property
    def config(self) -> GroupConfig:
        return self._config

    @property
    def record_sink(self) -> RecordSink:
        return self._sink

    @property
    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    # -- loading -----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild every group from `record_sink.read_all()`; members get fresh sessions (as in Kafka).

        Call it before serving (operations on a coordinator with a sink of its own raise
        COORDINATOR_LOAD_IN_PROGRESS until then) and not concurrently with other operations. A record
        that does not fit raises ValueError: a corrupt record is never skipped silently.
        """
        groups: dict[str, ShareGroup] = {}
        for index, record in enumerate(self._sink.read_all()):
            try:
                _replay_into(groups, record)
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"group coordinator record #{index} cannot be replayed: {exc}") from exc
        deadline_ms = self._clock.now_ms() + self._config.session_timeout_ms
        for group in groups.values():
            for member_id in group.members:
                group.touch_session(member_id, deadline_ms)
        self._groups = groups
        self._loaded = True

    # -- ShareGroupHeartbeat -----------------------------------------------------------------------

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
        """Join (epoch 0), leave (epoch -1) or heartbeat (the member's epoch); see the module docstring.

        Raises ShareError: INVALID_REQUEST (malformed), GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, or a record sink failure.
        """
        group_id = check_group_id(group_id)
        member_epoch = check_member_epoch(member_epoch)
        member_id = check_member_id(member_id, member_epoch)
        names = check_topic_names(subscribed_topic_names, member_epoch)
        rack_id = check_optional_text(rack_id, "RackId")
        client_id = check_text(client_id, "ClientId")
        client_host = check_text(client_host, "ClientHost")
        self._check_loaded()
        async with self._locks.hold(group_id):
            await self._expire_group(group_id, self._clock.now_ms())
            if member_epoch == -1:
                return await self._leave(group_id, member_id)
            return await self._heartbeat(group_id, member_id, member_epoch, names, rack_id, client_id, client_host)

    async def _leave(self, group_id: str, member_id: str) -> HeartbeatResult:
        group = self._groups.get(group_id)
        if group is None:
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if member_id not in group.members:
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        await self._commit(self._removal_records(group, [member_id]))
        log.info("member %s left share group %s", member_id, group_id)
        return HeartbeatResult(member_id, -1, self._config.heartbeat_interval_ms, None)

    async def _heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        names: tuple[str, ...] | None,
        rack_id: str | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        now_ms = self._clock.now_ms()
        group = self._groups.get(group_id)
        records: list[Record] = []
        if member_epoch != 0:
            if group is None:
                raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            member = group.members.get(member_id)
            if member is None:
                raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch > member.member_epoch or (
                member_epoch < member.member_epoch and member_epoch != member.previous_member_epoch
            ):
                raise ShareError(
                    Errors.FENCED_MEMBER_EPOCH,
                    f"The share group member has a stale member epoch {member_epoch} (current "
                    f"{member.member_epoch}, previous {member.previous_member_epoch}).",
                )
        else:
            if group is None:
                # Build the new group on a private object: it is registered by the replay of the
                # records, together with the member, or not at all if the append fails.
                group = ShareGroup(group_id)
                records += _creation_records(group_id)
                for record in records:
                    group.replay(record)
            if not member_id:
                member_id = _new_member_id(group)
            member = group.members.get(member_id)
            if member is None and len(group.members) >= self._config.max_size:
                raise ShareError(
                    Errors.GROUP_MAX_SIZE_REACHED,
                    f"The share group {group_id} has reached its maximum size of {self._config.max_size}.",
                )

        # 1. Membership, topic metadata and the group epoch.
        old_names = member.subscribed_topic_names if member is not None else ()
        new_names = names if names is not None else old_names
        metadata = ShareGroupMemberMetadataValue(
            rack_id if rack_id is not None else (member.rack_id if member is not None else None),
            client_id,
            client_host,
            new_names,
        )
        if member is None or metadata != member.metadata():
            records.append(Record(ShareGroupMemberMetadataKey(group_id, member_id), metadata))
        subscription_changed = member is None or new_names != old_names
        if subscription_changed:
            counts = Counter(group.subscription_counts)
            counts.subtract(old_names)
            counts.update(new_names)
            names_after = {n for n, c in counts.items() if c > 0}
        else:
            names_after = set(group.subscription_counts)
        member_ids = list(group.members)
        if member is None:
            member_ids.append(member_id)
        new_hash, image, cleanup = self._sync_metadata(group, names_after, member_ids)
        records += cleanup
        if subscription_changed or new_hash != group.metadata_hash or cleanup:
            records.append(
                Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(group.group_epoch + 1, new_hash))
            )
        await self._commit(records)
        group = self._groups[group_id]
        group.touch_session(member_id, now_ms + self._config.session_timeout_ms)

        # 2-3. Two-stage initialization of the subscribed topics' share-partitions.
        if group.initialize_check_needed:
            await self._initialize_partitions(group, image)

        # 4. Target assignment, then this member's reconciliation to it.
        now_ms = self._clock.now_ms()
        if group.assignment_epoch < group.group_epoch and (
            group.assignment_timestamp_ms < 0
            or now_ms - group.assignment_timestamp_ms >= self._config.assignment_interval_ms
        ):
            await self._commit(self._target_assignment_records(group, image, now_ms))
        member = group.members[member_id]
        subscribed_ids = {image[n].topic_id for n in member.subscribed_topic_names if n in image}
        target = group.target.get(member_id, {})
        assigned = {t: ps for t, ps in target.items() if t in subscribed_ids}
        if assigned != member.assignment or member.member_epoch != group.assignment_epoch:
            previous_epoch = (
                member.member_epoch if member.member_epoch != group.assignment_epoch else member.previous_member_epoch
            )
            await self._commit(
                [
                    Record(
                        ShareGroupCurrentMemberAssignmentKey(group_id, member_id),
                        ShareGroupCurrentMemberAssignmentValue(
                            group.assignment_epoch, previous_epoch, assignment_tuple(assigned)
                        ),
                    )
                ]
            )
        # The assignment goes out on a join, a full request, or when it changed since it was last sent
        # (by this reconciliation or by a topic clean-up while the member was not heartbeating).
        full = member_epoch == 0 or names is not None or member_id in group.assignment_unsent
        group.assignment_unsent.discard(member_id)
        return HeartbeatResult(
            member_id,
            member.member_epoch,
            self._config.heartbeat_interval_ms,
            _assignment_dict(member.assignment) if full else None,
        )

    # -- sessions ----------------------------------------------------------------------------------

    async def expire_members(self) -> list[str]:
        """Remove every member whose session timed out at `clock.now_ms()` (each affected group's epoch
        bumps); returns their ids. Heartbeats and admin calls expire a group's overdue members too, so a
        member is gone once its deadline passed, whenever this is called."""
        self._check_loaded()
        now_ms = self._clock.now_ms()
        expired: list[str] = []
        for group_id in sorted(self._groups):
            group = self._groups.get(group_id)
            if group is None or not group.has_expired_sessions(now_ms):
                continue
            async with self._locks.hold(group_id):
                expired += await self._expire_group(group_id, now_ms)
        return expired

    async def _expire_group(self, group_id: str, now_ms: int) -> list[str]:
        group = self._groups.get(group_id)
        if group is None or not group.has_expired_sessions(now_ms):
            return []
        expired = group.expired_members(now_ms)
        if expired:
            await self._commit(self._removal_records(group, expired))
            log.info("share group %s: session timed out for %s", group_id, ", ".join(expired))
        return expired

    # -- describe ----------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        """State, epochs, and every member with its subscription and current assignment."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._check_loaded()
        group = self._require_group(group_id)
        members = [
            MemberDescription(
                m.member_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.rack_id,
                list(m.subscribed_topic_names),
                _assignment_dict(m.assignment),
            )
            for _, m in sorted(group.members.items())
        ]
        return GroupDescription(group_id, group.state, group.group_epoch, group.assignment_epoch, members)

    async def describe_offsets(self, group_id: str) -> dict[uuid.UUID, dict[int, OffsetInfo]]:
        """Start offset and lag of every initialized share-partition of the group, from `read_summary`.

        lag = latest offset - start offset - delivery complete count, never negative; -1 when the start
        offset is not resolved yet (-1) or the count is unknown. Per-partition failures come back as
        `OffsetInfo(start_offset or -1, -1, error)`.
        """
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._check_loaded()
        group = self._require_group(group_id)
        items = [(t, p) for t, entry in sorted(group.initialized.items()) for p in sorted(entry.partitions)]

        async def one(topic_id: uuid.UUID, partition: int) -> OffsetInfo:
            summary, error = await self._call_persister(
                lambda: self._persister.read_summary(group_id, topic_id, partition, leader_epoch=0)
            )
            if error is not Errors.NONE:
                return OffsetInfo(-1, -1, error)
            start, complete = summary.start_offset, summary.delivery_complete_count
            if start == -1 or complete == -1:
                return OffsetInfo(start, -1)
            try:
                latest = self._topics.latest_offset(topic_id, partition)
            except ShareError as exc:
                return OffsetInfo(start, -1, exc.error)
            except Exception:  # a broken topics lookup must not fail the whole describe
                log.exception("latest_offset(%s, %d) failed", topic_id, partition)
                return OffsetInfo(start, -1, Errors.UNKNOWN_SERVER_ERROR)
            return OffsetInfo(start, max(0, latest - start - complete))

        infos = await asyncio.gather(*(one(t, p) for t, p in items))
        out: dict[uuid.UUID, dict[int, OffsetInfo]] = {}
        for (t, p), info in zip(items, infos):
            out.setdefault(t, {})[p] = info
        return out

    # -- admin: alter / delete offsets, delete group -------------------------------------------------

    async def alter_offsets(
        self, group_id: str, offsets: Mapping[uuid.UUID, Mapping[int, int]]
    ) -> dict[uuid.UUID, dict[int, Errors]]:
        """Reset share-partitions to the given start offsets (re-initializing their state with the
        current group epoch). Only on an empty group (GROUP_NOT_EMPTY otherwise); a missing group is
        created. Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION (unknown topic id or partition beyond
        the topic), or the persister's error. A malformed request raises INVALID_REQUEST."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        request = _check_offsets_request(offsets)
        self._check_loaded()
        async with self._locks.hold(group_id):
            await self._expire_group(group_id, self._clock.now_ms())
            group = self._groups.get(group_id)
            if group is not None and group.members:
                raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")
            results: dict[uuid.UUID, dict[int, Errors]] = {t: {} for t in request}
            valid: dict[uuid.UUID, tuple[str, dict[int, int]]] = {}
            for topic_id, partitions in request.items():
                info = self._resolve_topic_id(group, topic_id)
                for partition, start_offset in partitions.items():
                    if info is None or partition >= info.num_partitions:
                        results[topic_id][partition] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                    else:
                        valid.setdefault(topic_id, (info.name, {}))[1][partition] = start_offset
            if not valid:
                return results
            records: list[Record] = []
            if group is None:
                group = ShareGroup(group_id)
                records += _creation_records(group_id)
                for record in records:
                    group.replay(record)
            # Stage 1: partitions without state become initializing.
            initializing = dict(group.initializing)
            deleting = dict(group.deleting)
            fresh: dict[uuid.UUID, set[int]] = {}
            for topic_id, (name, partitions) in valid.items():
                known = group.initialized.get(topic_id)
                new = {p for p in partitions if known is None or p not in known.partitions}
                if new:
                    fresh[topic_id] = new
                    _add(initializing, topic_id, name, new)
                _remove(deleting, topic_id, partitions)
            if fresh or deleting != group.deleting:
                records.append(_partition_metadata_record(group_id, initializing, group.initialized, deleting))
            await self._commit(records)
            group = self._groups[group_id]
            state_epoch = group.group_epoch
            items = [(t, p, off) for t, (_, parts) in valid.items() for p, off in parts.items()]
            errors = await asyncio.gather(
                *(
                    self._call_persister_error(
                        lambda t=t, p=p, off=off: self._persister.initialize_state(
                            group_id, t, p, state_epoch=state_epoch, start_offset=off
                        )
                    )
                    for t, p, off in items
                )
            )
            # Stage 2: the new partitions that initialized become initialized; the others go back.
            initialized = dict(group.initialized)
            initializing = dict(group.initializing)
            for (topic_id, partition, _), error in zip(items, errors):
                results[topic_id][partition] = error
                if partition in fresh.get(topic_id, ()):
                    _remove(initializing, topic_id, {partition})
                    if error is Errors.NONE:
                        _add(initialized, topic_id, valid[topic_id][0], {partition})
                if error is not Errors.NONE:
                    log.warning("alter offsets of %s %s-%d failed: %s", group_id, topic_id, partition, error.name)
            if fresh:
                await self._commit([_partition_metadata_record(group_id, initializing, initialized, group.deleting)])
            return results

    async def delete_offsets(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Errors]:
        """Delete the share-partition state of whole topics (two-stage: they are *deleting* until the
        persister deleted every partition). Only on an existing (GROUP_ID_NOT_FOUND), empty
        (GROUP_NOT_EMPTY) group. Per topic: NONE, UNKNOWN_TOPIC_OR_PARTITION (the group holds no state
        for it) or the first persister error (the topic then stays deleting; calling again retries)."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        if isinstance(topic_ids, (str, bytes)) or not isinstance(topic_ids, (list, tuple, set, frozenset)):
            raise invalid(f"topic ids must be a list of uuid.UUID, got {topic_ids!r}.")
        wanted = list(dict.fromkeys(check_topic_id(t) for t in topic_ids))
        self._check_loaded()
        async with self._locks.hold(group_id):
            await self._expire_group(group_id, self._clock.now_ms())
            group = self._require_group(group_id)
            if group.members:
                raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")
            results: dict[uuid.UUID, Errors] = {}
            doomed: dict[uuid.UUID, TopicEntry] = {}
            for topic_id in wanted:
                entry = _merged_entry(group, topic_id)
                if entry is None:
                    results[topic_id] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    doomed[topic_id] = entry
            if not doomed:
                return results
            initializing = {t: e for t, e in group.initializing.items() if t not in doomed}
            initialized = {t: e for t, e in group.initialized.items() if t not in doomed}
            deleting = {**group.deleting, **doomed}
            await self._commit([_partition_metadata_record(group_id, initializing, initialized, deleting)])
            failed = await self._delete_state(group_id, doomed)
            for topic_id in doomed:
                results[topic_id] = failed.get(topic_id, Errors.NONE)
            done = [t for t in doomed if t not in failed]
            if done:
                deleting = {t: e for t, e in group.deleting.items() if t not in done}
                await self._commit(
                    [_partition_metadata_record(group_id, group.initializing, group.initialized, deleting)]
                )
            return results

    async def delete_group(self, group_id: str) -> None:
        """Delete an empty group (GROUP_NOT_EMPTY otherwise; GROUP_ID_NOT_FOUND if missing): first all
        its share-partition state (two-stage, through *deleting*), then its records (tombstones). If the
        persister fails for a partition, the group stays with those topics deleting and the first error
        is raised; calling again retries."""
        group_id = check_group_id(group_id, Errors.INVALID_GROUP_ID)
        self._check_loaded()
        async with self._locks.hold(group_id):
            await self._expire_group(group_id, self._clock.now_ms())
            group = self._require_group(group_id)
            if group.members:
                raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")
            doomed: dict[uuid.UUID, TopicEntry] = {}
            for topic_id in {*group.initialized, *group.initializing, *group.deleting}:
                doomed[topic_id] = _merged_entry(group, topic_id)
            if group.initialized or group.initializing:
                await self._commit([_partition_metadata_record(group_id, {}, {}, doomed)])
            failed = await self._delete_state(group_id, doomed)
            if failed:
                topic_id, error = next(iter(sorted(failed.items())))
                raise ShareError(error, f"Deleting the share-partition state of topic {topic_id} failed.")
            await self._commit(_deletion_records(group))
            log.info("deleted share group %s", group_id)

    # -- invariants --------------------------------------------------------------------------------

    def _check(self, replay: bool = False) -> None:
        """Assert every invariant of every group; with `replay`, also that a coordinator rebuilt from the
        record sink has exactly the same groups (the sink must be readable without side effects)."""
        for group_id, group in self._groups.items():
            _check_group(group_id, group, self._config)
        if replay:
            rebuilt: dict[str, ShareGroup] = {}
            for record in self._sink.read_all():
                _replay_into(rebuilt, record)
            assert self._dump() == {g: group.dump() for g, group in sorted(rebuilt.items())}, "replay differs"

    def _dump(self) -> dict[str, dict]:
        """Every group's persisted state in a comparable form (what `load` must reproduce)."""
        return {group_id: group.dump() for group_id, group in sorted(self._groups.items())}

    # -- internals: records --------------------------------------------------------------------------

    def _check_loaded(self) -> None:
        if not self._loaded:
            raise ShareError(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The group coordinator has not loaded its records.")

    def _require_group(self, group_id: str) -> ShareGroup:
        group = self._groups.get(group_id)
        if group is None:
            raise ShareError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    async def _commit(self, records: list[Record]) -> None:
        """Append `records` to the sink and, once that succeeded, apply them. Nothing changes on failure."""
        if not records:
            return
        try:
            await self._sink.append(records)
        except ShareError:
            raise
        except Exception as exc:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"Appending group coordinator records failed: {exc}") from exc
        for record in records:
            _replay_into(self._groups, record)

    def _removal_records(self, group: ShareGroup, member_ids: list[str]) -> list[Record]:
        """Remove members (leave or session expiry): their tombstones, then the group epoch bump."""
        group_id, removed = group.group_id, set(member_ids)
        records: list[Record] = []
        counts = Counter(group.subscription_counts)
        for member_id in member_ids:
            records += [
                Record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
                Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
                Record(ShareGroupMemberMetadataKey(group_id, member_id), None),
            ]
            counts.subtract(group.members[member_id].subscribed_topic_names)
        remaining = [m for m in group.members if m not in removed]
        new_hash, _image, cleanup = self._sync_metadata(group, {n for n, c in counts.items() if c > 0}, remaining)
        records += cleanup
        epoch = group.group_epoch + 1
        records.append(Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, new_hash)))
        if not remaining:  # nothing to assign: the (empty) target is current, and the next join need not wait
            records.append(
                Record(
                    ShareGroupTargetAssignmentMetadataKey(group_id),
                    ShareGroupTargetAssignmentMetadataValue(epoch, -1),
                )
            )
        return records

    def _sync_metadata(
        self, group: ShareGroup, subscribed: set[str], member_ids: list[str]
    ) -> tuple[int, dict[str, TopicInfo], list[Record]]:
        """Look up every topic the group subscribes to or holds share-partition state for. Returns the
        metadata hash of the subscribed topics (Kafka's MetadataHash; a change bumps the group epoch),
        the image (name -> TopicInfo), and the records that drop the share-partitions of topics that
        were deleted, recreated or shrunk, stripping them from assignments (empty when none did).

        The clean-up check looks at every known topic on every call rather than only when the hash
        moved: topics become known through initialization and alter_offsets, which do not touch the
        hash. O(subscribed + known topics)."""
        image: dict[str, TopicInfo] = {}
        for name in subscribed | group.known_topic_names():
            info = self._topics.lookup(name)
            if info is not None:
                image[name] = info
        new_hash = metadata_hash({name: image[name] for name in subscribed if name in image})
        if not _has_stale_topics(group, image):
            return new_hash, image, []
        return new_hash, image, self._cleanup_records(group, image, member_ids)

    @staticmethod
    def _cleanup_records(group: ShareGroup, image: dict[str, TopicInfo], member_ids: list[str]) -> list[Record]:
        def still_there(entries: dict[uuid.UUID, TopicEntry]) -> dict[uuid.UUID, TopicEntry]:
            out = {}
            for topic_id, entry in entries.items():
                info = image.get(entry.topic_name)
                if info is None or info.topic_id != topic_id:
                    continue  # the topic was deleted (or recreated under a new id)
                partitions = frozenset(p for p in entry.partitions if p < info.num_partitions)
                if partitions:
                    out[topic_id] = TopicEntry.of(entry.topic_name, partitions)
            return out

        initializing = still_there(group.initializing)
        initialized = still_there(group.initialized)
        deleting = still_there(group.deleting)
        if (initializing, initialized, deleting) == (group.initializing, group.initialized, group.deleting):
            return []
        log.info("share group %s: dropping share-partitions of deleted or shrunk topics", group.group_id)
        records = [_partition_metadata_record(group.group_id, initializing, initialized, deleting)]
        # Assignments only ever hold initialized partitions: strip what is no longer initialized.
        for member_id in member_ids:
            member = group.members.get(member_id)
            if member is not None:
                kept = _restrict(member.assignment, initialized)
                if kept != member.assignment:
                    records.append(
                        Record(
                            ShareGroupCurrentMemberAssignmentKey(group.group_id, member_id),
                            ShareGroupCurrentMemberAssignmentValue(
                                member.member_epoch, member.previous_member_epoch, assignment_tuple(kept)
                            ),
                        )
                    )
            target = group.target.get(member_id)
            if target is not None:
                kept = _restrict(target, initialized)
                if kept != target:
                    records.append(
                        Record(
                            ShareGroupTargetAssignmentMemberKey(group.group_id, member_id),
                            ShareGroupTargetAssignmentMemberValue(assignment_tuple(kept)),
                        )
                    )
        return records

    def _target_assignment_records(self, group: ShareGroup, image: dict[str, TopicInfo], now_ms: int) -> list[Record]:
        """Run the assignor over the initialized partitions of subscribed topics; records for the members
        whose target changed and the new target assignment metadata (epoch = group epoch)."""
        subscriptions = {
            member_id: {image[n].topic_id for n in m.subscribed_topic_names if n in image}
            for member_id, m in group.members.items()
        }
        pools = {t: e.partitions for t, e in group.initialized.items() if e.topic_name in group.subscription_counts}
        new = simple_assign(subscriptions, pools, current=group.target)
        records: list[Record] = []
        for member_id, assignment in new.items():
            target = {t: frozenset(ps) for t, ps in assignment.items()}
            if target != group.target.get(member_id, {}):
                records.append(
                    Record(
                        ShareGroupTargetAssignmentMemberKey(group.group_id, member_id),
                        ShareGroupTargetAssignmentMemberValue(assignment_tuple(target)),
                    )
                )
        records.append(
            Record(
                ShareGroupTargetAssignmentMetadataKey(group.group_id),
                ShareGroupTargetAssignmentMetadataValue(group.group_epoch, now_ms),
            )
        )
        return records

    # -- internals: share-partition state -------------------------------------------------------------

    async def _initialize_partitions(self, group: ShareGroup, image: dict[str, TopicInfo]) -> None:
        """Two-stage initialization of every partition of a subscribed topic that is not initialized.

        A partition still *initializing* here was left so by a crash or a failed append between the
        stages (under the group lock nothing else is in flight), so it is driven again. New partitions
        of a topic the group already consumes start at offset 0; a topic new to the group at -1 (the
        share-partition leader resolves it with `share.auto.offset.reset`). A partition whose
        initialization failed is retried with the start offset it was meant to get, even if its
        siblings made the topic "already consumed" meanwhile.
        """
        group.initialize_check_needed = False
        todo: dict[uuid.UUID, tuple[str, set[int], int]] = {}
        for name in sorted(group.subscription_counts):
            info = image.get(name)
            if info is None or info.num_partitions == 0:
                continue
            known = group.initialized.get(info.topic_id)
            missing = set(range(info.num_partitions))
            if known is not None:
                missing -= known.partitions
            if missing:
                todo[info.topic_id] = (name, missing, 0 if known is not None else -1)
        if not todo:
            group.retry_start_offsets.clear()
            return
        group_id = group.group_id
        try:
            # Stage 1.
            initializing = dict(group.initializing)
            deleting = dict(group.deleting)
            for topic_id, (name, partitions, _) in todo.items():
                _add(initializing, topic_id, name, partitions)
                if _remove(deleting, topic_id, partitions):
                    log.warning("share group %s: topic %s was being deleted; initializing it again", group_id, name)
            await self._commit([_partition_metadata_record(group_id, initializing, group.initialized, deleting)])
            state_epoch = group.group_epoch
            retry = group.retry_start_offsets
            items = [(t, p, retry.get((t, p), start)) for t, (_, parts, start) in todo.items() for p in sorted(parts)]
            errors = await asyncio.gather(
                *(
                    self._call_persister_error(
                        lambda t=t, p=p, start=start: self._persister.initialize_state(
                            group_id, t, p, state_epoch=state_epoch, start_offset=start
                        )
                    )
                    for t, p, start in items
                )
            )
            # Stage 2: every attempted partition leaves initializing, initialized or not (then retried).
            initialized = dict(group.initialized)
            initializing = dict(group.initializing)
            newly_assignable = False
            for (topic_id, partition, start_offset), error in zip(items, errors):
                _remove(initializing, topic_id, {partition})
                if error is Errors.NONE:
                    _add(initialized, topic_id, todo[topic_id][0], {partition})
                    newly_assignable = True
                    retry.pop((topic_id, partition), None)
                else:
                    retry[(topic_id, partition)] = start_offset
                    log.warning(
                        "share group %s: initializing %s-%d failed (%s); retried on the next heartbeat",
                        group_id,
                        todo[topic_id][0],
                        partition,
                        error.name,
                    )
            records = [_partition_metadata_record(group_id, initializing, initialized, group.deleting)]
            if newly_assignable and group.assignment_epoch >= group.group_epoch:
                # Initialized partitions not yet in the target assignment: bump so the assignor runs.
                records.append(
                    Record(
                        ShareGroupMetadataKey(group_id),
                        ShareGroupMetadataValue(group.group_epoch + 1, group.metadata_hash),
                    )
                )
            await self._commit(records)
        except BaseException:
            # The replays of successful commits set the flag again; a failure must too, so the next
            # heartbeat retries what is left.
            group.initialize_check_needed = True
            raise

    async def _delete_state(self, group_id: str, doomed: dict[uuid.UUID, TopicEntry]) -> dict[uuid.UUID, Errors]:
        """Delete every partition's state; returns the first error per topic that failed."""
        items = [(t, p) for t, entry in sorted(doomed.items()) for p in sorted(entry.partitions)]
        errors = await asyncio.gather(
            *(
                self._call_persister_error(lambda t=t, p=p: self._persister.delete_state(group_id, t, p))
                for t, p in items
            )
        )
        failed: dict[uuid.UUID, Errors] = {}
        for (topic_id, partition), error in zip(items, errors):
            if error is not Errors.NONE:
                failed.setdefault(topic_id, error)
                log.warning("deleting state of %s %s-%d failed: %s", group_id, topic_id, partition, error.name)
        return failed

    async def _call_persister(self, call: Callable[[], Awaitable[T]]) -> tuple[T | None, Errors]:
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

    async def _call_persister_error(self, call: Callable[[], Awaitable[Any]]) -> Errors:
        return (await self._call_persister(call))[1]

    def _resolve_topic_id(self, group: ShareGroup | None, topic_id: uuid.UUID) -> TopicInfo | None:
        """The metadata of a topic known by id: through `topics.lookup_id` when the lookup has it, else
        through the names the group recorded for its share-partitions."""
        lookup_id = getattr(self._topics, "lookup_id", None)
        if callable(lookup_id):
            info = lookup_id(topic_id)
            return info if info is not None and info.topic_id == topic_id else None
        if group is not None:
            entry = _merged_entry(group, topic_id)
            if entry is not None:
                info = self._topics.lookup(entry.topic_name)
                if info is not None and info.topic_id == topic_id:
                    return info
        return None


# -- helpers ---------------------------------------------------------------------------------------------


class _GroupLocks:
    """One asyncio.Lock per group id, created on demand and dropped when nobody holds or awaits it."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, list] = {}  # group id -> [lock, users]

    def hold(self, group_id: str) -> "_Held":
        entry = self._entries.get(group_id)
        if entry is None:
            entry = self._entries[group_id] = [asyncio.Lock(), 0]
        return _Held(self._entries, group_id, entry)


class _Held:
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


def _replay_into(groups: dict[str, ShareGroup], record: Record) -> None:
    """Apply one record to a map of groups: the group metadata tombstone deletes a group, any other
    record of an unknown group creates it (a tombstone of an unknown group is a no-op)."""
    key, value = record
    if type(key) not in VALUE_TYPES:
        raise ValueError(f"unknown group coordinator record key {key!r}")
    group = groups.get(key.group_id)
    if value is None:
        if type(key) is ShareGroupMetadataKey:
            groups.pop(key.group_id, None)
        elif group is not None:
            group.replay(record)
        return
    if group is None:
        group = groups[key.group_id] = ShareGroup(key.group_id)
    group.replay(record)


def _creation_records(group_id: str) -> list[Record]:
    return [
        Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(_NEW_GROUP_EPOCH, 0)),
        Record(
            ShareGroupTargetAssignmentMetadataKey(group_id),
            ShareGroupTargetAssignmentMetadataValue(_NEW_GROUP_EPOCH, -1),
        ),
    ]


def _deletion_records(group: ShareGroup) -> list[Record]:
    """Tombstones of everything the group has, in Kafka's order (coordinator-facts §4.2)."""
    g = group.group_id
    members = sorted(set(group.members) | set(group.target))
    records = [Record(ShareGroupCurrentMemberAssignmentKey(g, m), None) for m in members]
    records += [Record(ShareGroupTargetAssignmentMemberKey(g, m), None) for m in members]
    records.append(Record(ShareGroupTargetAssignmentMetadataKey(g), None))
    records += [Record(ShareGroupMemberMetadataKey(g, m), None) for m in members]
    records.append(Record(ShareGroupStatePartitionMetadataKey(g), None))
    records.append(Record(ShareGroupMetadataKey(g), None))
    return records


def _partition_metadata_record(
    group_id: str,
    initializing: dict[uuid.UUID, TopicEntry],
    initialized: dict[uuid.UUID, TopicEntry],
    deleting: dict[uuid.UUID, TopicEntry],
) -> Record:
    return Record(
        ShareGroupStatePartitionMetadataKey(group_id), partition_metadata_value(initializing, initialized, deleting)
    )


def _add(entries: dict[uuid.UUID, TopicEntry], topic_id: uuid.UUID, name: str, partitions: Iterable[int]) -> None:
    old = entries.get(topic_id)
    before = old.partitions if old is not None else frozenset()
    entries[topic_id] = TopicEntry.of(name, before | frozenset(partitions))


def _remove(entries: dict[uuid.UUID, TopicEntry], topic_id: uuid.UUID, partitions: Iterable[int]) -> bool:
    """Remove partitions of one topic (dropping the topic when none are left); whether any were there."""
    old = entries.get(topic_id)
    if old is None:
        return False
    left = old.partitions - frozenset(partitions)
    if left == old.partitions:
        return False
    if left:
        entries[topic_id] = TopicEntry.of(old.topic_name, left)
    else:
        del entries[topic_id]
    return True


def _merged_entry(group: ShareGroup, topic_id: uuid.UUID) -> TopicEntry | None:
    """All partitions of a topic the group holds state for, in any lifecycle stage, or None."""
    name, partitions = None, frozenset()
    for entries in (group.initialized, group.initializing, group.deleting):
        entry = entries.get(topic_id)
        if entry is not None:
            name, partitions = entry.topic_name, partitions | entry.partitions
    return TopicEntry.of(name, partitions) if name is not None else None


def _has_stale_topics(group: ShareGroup, image: dict[str, TopicInfo]) -> bool:
    """Whether the group holds share-partitions of a topic that is gone, recreated or shrunk. O(topics)."""
    for entries in (group.initialized, group.initializing, group.deleting):
        for topic_id, entry in entries.items():
            info = image.get(entry.topic_name)
            if info is None or info.topic_id != topic_id or entry.last_partition >= info.num_partitions:
                return True
    return False


def _restrict(assignment: Assignment, initialized: dict[uuid.UUID, TopicEntry]) -> Assignment:
    out = {}
    for topic_id, partitions in assignment.items():
        entry = initialized.get(topic_id)
        if entry is not None:
            kept = partitions & entry.partitions
            if kept:
                out[topic_id] = kept
    return out


def _assignment_dict(assignment: Assignment) -> dict[uuid.UUID, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(assignment.items())}


def _new_member_id(group: ShareGroup) -> str:
    while True:
        member_id = str(uuid.uuid4())
        if member_id not in group.members:
            return member_id


def _check_offsets_request(offsets: Any) -> dict[uuid.UUID, dict[int, int]]:
    if not isinstance(offsets, Mapping):
        raise invalid(f"offsets must map topic id -> {{partition: start offset}}, got {offsets!r}.")
    request: dict[uuid.UUID, dict[int, int]] = {}
    for topic_id, partitions in offsets.items():
        check_topic_id(topic_id)
        if not isinstance(partitions, Mapping):
            raise invalid(f"offsets of topic {topic_id} must map partition -> start offset, got {partitions!r}.")
        for partition, start_offset in partitions.items():
            if not check_partition(partition):
                raise invalid(f"topic {topic_id}: {partition!r} is not a partition index.")
            if isinstance(start_offset, bool) or not isinstance(start_offset, int) or start_offset < 0:
                raise invalid(
                    f"topic {topic_id} partition {partition}: start offset must be an int >= 0, got {start_offset!r}."
                )
        request[topic_id] = dict(partitions)
    return request


def _check_group(group_id: str, group: ShareGroup, config: GroupConfig) -> None:
    """Every invariant of one group (see GroupCoordinator._check)."""
    assert group.group_id == group_id
    assert group.group_epoch >= _NEW_GROUP_EPOCH, group.group_epoch
    assert 0 <= group.assignment_epoch <= group.group_epoch, (group.assignment_epoch, group.group_epoch)
    assert len(group.members) <= config.max_size
    expected_counts = Counter(n for m in group.members.values() for n in m.subscribed_topic_names)
    assert group.subscription_counts == expected_counts, (group.subscription_counts, expected_counts)
    assert set(group.session_deadlines) == set(group.members), "every member has a session, and only members"
    assert set(group.target) <= set(group.members), "target assignment of a member that left"
    # Share-partition lifecycle: a partition is in at most one stage.
    for topic_id in {*group.initializing, *group.initialized, *group.deleting}:
        stages = [
            entries[topic_id].partitions
            for entries in (group.initializing, group.initialized, group.deleting)
            if topic_id in entries
        ]
        assert all(stages), f"empty lifecycle entry for {topic_id}"
        assert sum(len(s) for s in stages) == len(frozenset().union(*stages)), f"{topic_id} in two stages"
        assert all(p >= 0 for s in stages for p in s)

    def assignable(assignment: Assignment, names: Iterable[str] | None, what: str) -> None:
        names = set(names) if names is not None else None
        for topic_id, partitions in assignment.items():
            entry = group.initialized.get(topic_id)
            assert entry is not None, f"{what} holds {topic_id}, which is not initialized"
            assert partitions and partitions <= entry.partitions, f"{what} holds uninitialized partitions"
            if names is not None:
                assert entry.topic_name in names, f"{what} holds {entry.topic_name}, which it does not subscribe to"

    for member_id, member in group.members.items():
        assert 0 <= member.previous_member_epoch <= member.member_epoch <= group.assignment_epoch, (
            member_id,
            member.previous_member_epoch,
            member.member_epoch,
            group.assignment_epoch,
        )
        assert member.member_epoch == 0 or member.previous_member_epoch < member.member_epoch
        assignable(member.assignment, member.subscribed_topic_names, f"member {member_id}")
    for member_id, target in group.target.items():
        # A target behind the group epoch may still hold a topic its member no longer subscribes to
        # (reconciliation filters it out); it never holds an uninitialized partition.
        assignable(target, None, f"target of {member_id}")
    if group.assignment_epoch == group.group_epoch:
        # A target at the group epoch reflects the current members, subscriptions and initialized
        # partitions (any change to those bumps the group epoch).
        pool = {
            (t, p)
            for t, e in group.initialized.items()
            if e.topic_name in group.subscription_counts
            for p in e.partitions
        }
        assigned = {(t, p) for a in group.target.values() for t, ps in a.items() for p in ps}
        assert assigned == pool, "a current target assignment covers every assignable partition, and only those"
        for member_id, member in group.members.items():
            target = group.target.get(member_id, {})
            assignable(target, member.subscribed_topic_names, f"target of {member_id}")
            subscribed_pool = any(
                e.topic_name in member.subscribed_topic_names for e in group.initialized.values()
            )
            assert bool(target) == subscribed_pool, f"member {member_id} subscribes to assignable topics but has none"
        if group.members and group.homogeneous() and pool:
            counts = [sum(len(ps) for ps in group.target.get(m, {}).values()) for m in group.members]
            if len(pool) >= len(group.members):
                assert max(counts) - min(counts) <= 1, f"unbalanced homogeneous assignment {counts}"
