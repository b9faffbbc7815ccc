"""ShareGroupHeartbeat: membership, sessions, the group epoch and the target assignment.

A heartbeat goes through up to four commits, each leaving a consistent state:
1. membership: member metadata, topic-metadata clean-up, the group epoch bump;
2. initialization stage 1: the partitions to initialize become *initializing*;
3. initialization stage 2, after `persister.initialize_state` (state epoch = group epoch): they become
   *initialized* (or go back, to be retried by the next heartbeat), bumping the group epoch so the
   assignor sees them;
4. the target assignment (when it lags the group epoch and the assignment interval has passed) and the
   member's reconciliation to it.
Stage 2 runs inside the heartbeat (Kafka runs it on a timer right after) so a member that joins a group
whose partitions initialize at once gets them in its first response. Stages 2-3 are the
share-partition lifecycle's (`partition_lifecycle.py`).

A member leaves with epoch -1 or when its session times out; both remove it the same way (its
records' tombstones and a group epoch bump).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Callable

from ...clock import Clock
from ...errors import Errors, ShareError
from ..assignment import assignment_dict
from ..group_store import GroupStore
from ..records import Record
from ..responses import HeartbeatResult
from ..topics import TopicInfo, TopicsLookup, metadata_hash
from .assignor import simple_assign
from .config import GroupConfig
from .group import ShareGroup, has_stale_topics
from .partition_lifecycle import PartitionStateLifecycle
from .record_helpers import (
    creation_records,
    group_epoch_record,
    member_assignment_record,
    member_removal_records,
    target_assignment_metadata_record,
    target_member_record,
    topic_cleanup_records,
)
from .records import ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue

__all__ = ["Membership"]

log = logging.getLogger(__name__)


class Membership:
    """Joins, heartbeats, leaves and session expiry of share-group members (callers hold the group lock)."""

    def __init__(
        self,
        store: GroupStore,
        lifecycle: PartitionStateLifecycle,
        topics: TopicsLookup,
        clock: Clock,
        config: GroupConfig,
        group_timing: Callable[[str], tuple[int, int] | None] | None = None,
    ) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.topics = topics
        self.clock = clock
        self.config = config
        self.group_timing = group_timing

    def timing(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) in ms of one group: its own values when the optional
        `group_timing` source has them (group configs), else the coordinator's."""
        own = None if self.group_timing is None else self.group_timing(group_id)
        return own if own is not None else (self.config.session_timeout_ms, self.config.heartbeat_interval_ms)

    # -- leave and session expiry ------------------------------------------------------------------

    async def leave(self, group_id: str, member_id: str) -> HeartbeatResult:
        group = self.store.require_group(group_id)
        if member_id not in group.members:
            raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        await self.store.commit(self.removal_records(group, [member_id]))
        log.info("member %s left share group %s", member_id, group_id)
        return HeartbeatResult(member_id, -1, 0, None)  # as Kafka: a member that left gets no interval

    async def expire_group(self, group_id: str, now_ms: int) -> list[str]:
        """Remove the members of one group whose session timed out at `now_ms`; returns their ids."""
        group = self.store.groups.get(group_id)
        if not isinstance(group, ShareGroup) or not group.has_expired_sessions(now_ms):
            return []
        expired = group.expired_members(now_ms)
        if expired:
            await self.store.commit(self.removal_records(group, expired))
            log.info("share group %s: session timed out for %s", group_id, ", ".join(expired))
        return expired

    def removal_records(self, group: ShareGroup, member_ids: list[str]) -> list[Record]:
        """Remove members (leave or session expiry): their tombstones, then the group epoch bump."""
        group_id, removed = group.group_id, set(member_ids)
        records: list[Record] = []
        counts = Counter(group.subscription_counts)
        for member_id in member_ids:
            records += member_removal_records(group_id, member_id)
            counts.subtract(group.members[member_id].subscribed_topic_names)
        remaining = [m for m in group.members if m not in removed]
        new_hash, _image, cleanup = self.sync_metadata(group, {n for n, c in counts.items() if c > 0}, remaining)
        records += cleanup
        epoch = group.group_epoch + 1
        records.append(group_epoch_record(group_id, epoch, new_hash))
        if not remaining:  # nothing to assign: the (empty) target is current, and the next join need not wait
            records.append(target_assignment_metadata_record(group_id, epoch, -1))
        return records

    # -- join and heartbeat ------------------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        names: tuple[str, ...] | None,
        rack_id: str | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        """A join (epoch 0) or heartbeat of a member; `names` None means "subscription unchanged"."""
        now_ms = self.clock.now_ms()
        group = self.store.group_of_type(group_id, ShareGroup)  # "Group g is not a share group."
        records: list[Record] = []
        if member_epoch != 0:
            group = self.store.require_group(group_id)
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
                records += creation_records(group_id)
                for record in records:
                    group.replay(record)
            if not member_id:
                member_id = _new_member_id(group)
            member = group.members.get(member_id)
            if member is None and len(group.members) >= self.config.max_size:
                raise ShareError(
                    Errors.GROUP_MAX_SIZE_REACHED,
                    f"The share group {group_id} has reached its maximum size of {self.config.max_size}.",
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
        new_hash, image, cleanup = self.sync_metadata(group, names_after, member_ids)
        records += cleanup
        if subscription_changed or new_hash != group.metadata_hash or cleanup:
            records.append(group_epoch_record(group_id, group.group_epoch + 1, new_hash))
        await self.store.commit(records)
        group = self.store.groups[group_id]
        group.touch_session(member_id, now_ms + self.timing(group_id)[0])

        # 2-3. Two-stage initialization of the subscribed topics' share-partitions.
        if group.initialize_check_needed:
            await self.lifecycle.initialize_subscribed(group, image)

        # 4. Target assignment, then this member's reconciliation to it.
        now_ms = self.clock.now_ms()
        if group.assignment_epoch < group.group_epoch and (
            group.assignment_timestamp_ms < 0
            or now_ms - group.assignment_timestamp_ms >= self.config.assignment_interval_ms
        ):
            await self.store.commit(self.target_assignment_records(group, image, now_ms))
        member = group.members[member_id]
        subscribed_ids = {image[n].topic_id for n in member.subscribed_topic_names if n in image}
        target = group.target.get(member_id, {})
        assigned = {t: ps for t, ps in target.items() if t in subscribed_ids}
        if assigned != member.assignment or member.member_epoch != group.assignment_epoch:
            previous_epoch = (
                member.member_epoch if member.member_epoch != group.assignment_epoch else member.previous_member_epoch
            )
            await self.store.commit(
                [member_assignment_record(group_id, member_id, group.assignment_epoch, previous_epoch, assigned)]
            )
        # The assignment goes out on a join, a full request, or when it changed since it was last sent
        # (by this reconciliation or by a topic clean-up while the member was not heartbeating).
        full = member_epoch == 0 or names is not None or member_id in group.assignment_unsent
        group.assignment_unsent.discard(member_id)
        return HeartbeatResult(
            member_id,
            member.member_epoch,
            self.timing(group_id)[1],
            assignment_dict(member.assignment) if full else None,
        )

    # -- topic metadata and the assignor -------------------------------------------------------------

    def sync_metadata(
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
            info = self.topics.lookup(name)
            if info is not None:
                image[name] = info
        new_hash = metadata_hash({name: image[name] for name in subscribed if name in image})
        if not has_stale_topics(group, image):
            return new_hash, image, []
        return new_hash, image, topic_cleanup_records(group, image, member_ids)

    @staticmethod
    def target_assignment_records(group: ShareGroup, image: dict[str, TopicInfo], now_ms: int) -> list[Record]:
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
                records.append(target_member_record(group.group_id, member_id, target))
        records.append(target_assignment_metadata_record(group.group_id, group.group_epoch, now_ms))
        return records


def _new_member_id(group: ShareGroup) -> str:
    while True:
        member_id = str(uuid.uuid4())
        if member_id not in group.members:
            return member_id
