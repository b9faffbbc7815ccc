"""The admin APIs of share groups: describe a group, describe, alter and delete its offsets, delete it.

Kafka's DescribeShareGroups, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups for share groups. Group-level problems raise ShareError
(GROUP_ID_NOT_FOUND, GROUP_NOT_EMPTY, ...); partition-level outcomes come back in the returned maps.
The writes (alter, delete) run under the group lock the caller holds and drive the share-partition
lifecycle's two stages.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Mapping

from ...errors import Errors, ShareError
from ..assignment import assignment_dict
from ..group_store import GroupStore
from ..records import Record
from ..topics import TopicInfo, TopicsLookup
from ..validation import check_partition, check_topic_id, invalid
from .group import ShareGroup, TopicEntry, all_partitions_of
from .partition_lifecycle import PartitionStateLifecycle
from .record_helpers import creation_records, deletion_records
from .responses import GroupDescription, MemberDescription, OffsetInfo

__all__ = ["ShareGroupAdmin", "check_offsets_request"]

log = logging.getLogger(__name__)


class ShareGroupAdmin:
    """Describe, alter offsets, delete offsets, delete group (inputs already validated by the caller)."""

    def __init__(self, store: GroupStore, lifecycle: PartitionStateLifecycle, topics: TopicsLookup) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.topics = topics

    # -- describe ------------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.store.require_group(group_id)
        members = [
            MemberDescription(
                m.member_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.rack_id,
                list(m.subscribed_topic_names),
                assignment_dict(m.assignment),
            )
            for _, m in sorted(group.members.items())
        ]
        return GroupDescription(group_id, group.state, group.group_epoch, group.assignment_epoch, members)

    async def describe_offsets(self, group_id: str) -> dict[uuid.UUID, dict[int, OffsetInfo]]:
        group = self.store.require_group(group_id)
        items = [(t, p) for t, entry in sorted(group.initialized.items()) for p in sorted(entry.partitions)]
        infos = await asyncio.gather(*(self._describe_partition(group_id, t, p) for t, p in items))
        out: dict[uuid.UUID, dict[int, OffsetInfo]] = {}
        for (topic_id, partition), info in zip(items, infos):
            out.setdefault(topic_id, {})[partition] = info
        return out

    async def _describe_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> OffsetInfo:
        persister = self.lifecycle.persister
        summary, error = await self.lifecycle.call_persister(
            lambda: persister.read_summary(group_id, topic_id, partition, leader_epoch=0)
        )
        if error is not Errors.NONE:
            return OffsetInfo(-1, -1, error)
        start, complete = summary.start_offset, summary.delivery_complete_count
        if start == -1 or complete == -1:
            return OffsetInfo(start, -1)
        try:
            latest = self.topics.latest_offset(topic_id, partition)
        except ShareError as exc:
            return OffsetInfo(start, -1, exc.error)
        except Exception:  # a broken topics lookup must not fail the whole describe
            log.exception("latest_offset(%s, %d) failed", topic_id, partition)
            return OffsetInfo(start, -1, Errors.UNKNOWN_SERVER_ERROR)
        return OffsetInfo(start, max(0, latest - start - complete))

    # -- alter offsets -------------------------------------------------------------------------------

    async def alter_offsets(
        self, group_id: str, request: dict[uuid.UUID, dict[int, int]]
    ) -> tuple[dict[uuid.UUID, dict[int, Errors]], list[uuid.UUID]]:
        """Reset share-partitions of an empty (or missing: it is created) group. Returns the
        per-partition results and the topics whose state the persister was asked to reset."""
        group = self.store.group_of_type(group_id, ShareGroup)
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
            return results, []
        records: list[Record] = []
        if group is None:
            group = ShareGroup(group_id)
            records += creation_records(group_id)
            for record in records:
                group.replay(record)
        outcomes = await self.lifecycle.reset_start_offsets(group, valid, records)
        for (topic_id, partition, _start), error in outcomes:
            results[topic_id][partition] = error
        return results, list(valid)

    # -- delete offsets and groups ---------------------------------------------------------------------

    async def delete_offsets(
        self, group_id: str, topic_ids: list[uuid.UUID]
    ) -> tuple[dict[uuid.UUID, Errors], list[uuid.UUID]]:
        """Delete whole topics' share-partition state of an existing, empty group. Returns the per-topic
        results and the topics that left initializing/initialized (whatever the persister answered)."""
        group = self._require_empty_group(group_id)
        results: dict[uuid.UUID, Errors] = {}
        to_delete: dict[uuid.UUID, TopicEntry] = {}
        for topic_id in topic_ids:
            entry = all_partitions_of(group, topic_id)
            if entry is None:
                results[topic_id] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                to_delete[topic_id] = entry
        if not to_delete:
            return results, []
        failed = await self.lifecycle.delete_topics(group, to_delete)
        for topic_id in to_delete:
            results[topic_id] = failed.get(topic_id, Errors.NONE)
        return results, list(to_delete)

    async def delete_group(self, group_id: str) -> None:
        """Delete an empty group: first all its share-partition state, then its records."""
        group = self._require_empty_group(group_id)
        failed = await self.lifecycle.delete_all(group)
        if failed:
            topic_id, error = next(iter(sorted(failed.items())))
            raise ShareError(error, f"Deleting the share-partition state of topic {topic_id} failed.")
        await self.store.commit(deletion_records(group))
        log.info("deleted share group %s", group_id)

    async def delete_topic_state(self, group_id: str, topic_id: uuid.UUID) -> tuple[bool, Errors]:
        """A deleted topic: delete the group's share-partition state of it, members or not (Kafka does
        so when the topic's partitions are deleted). Returns whether the group held state for it and
        the first persister error (the topic then stays deleting; the next call retries)."""
        group = self.store.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return False, Errors.NONE
        entry = all_partitions_of(group, topic_id)
        if entry is None:
            return False, Errors.NONE
        failed = await self.lifecycle.delete_topics(group, {topic_id: entry})
        return True, failed.get(topic_id, Errors.NONE)

    # -- helpers -------------------------------------------------------------------------------------

    def _require_empty_group(self, group_id: str) -> ShareGroup:
        group = self.store.require_group(group_id)
        if group.members:
            raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group_id} is not empty.")
        return group

    def _resolve_topic_id(self, group: ShareGroup | None, topic_id: uuid.UUID) -> TopicInfo | None:
        """The metadata of a live topic known by id (None when no topic has that id now)."""
        info = self.topics.lookup_id(topic_id)
        return info if info is not None and info.topic_id == topic_id else None


def check_offsets_request(offsets: Any) -> dict[uuid.UUID, dict[int, int]]:
    """Validate an alter-offsets request: topic id -> {partition: start offset >= 0}."""
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
