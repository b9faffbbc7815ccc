"""Requests of KIP-848 consumer groups other than the heartbeat: validation of a heartbeat's fields,
ConsumerGroupDescribe, the member-epoch checks of committed offsets, and group deletion.

Validation follows Kafka's order and messages; every refusal is a ShareError with Kafka's code, and
nothing is recorded before it.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable, Iterable, Mapping

from ...errors import Errors, ShareError
from ...types import is_plain_int
from ..assignment import assignment_dict
from ..classic.consumer_protocol import encode_assignment, encode_subscription
from ..classic.responses import ClassicGroupDescription, ClassicMemberDescription
from ..group_store import GroupStore
from ..offsets import OffsetHooks
from ..records import Record
from ..validation import check_group_id, check_partition, check_topic_id, invalid
from .config import ConsumerGroupConfig
from .group import ConsumerGroup, ConsumerGroupMember
from .heartbeat import ConsumerHeartbeat
from .records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from .responses import ConsumerGroupDescription, ConsumerMemberDescription

__all__ = ["check_heartbeat", "consumer_offset_hooks", "describe", "describe_classic_form", "validate_offset_commit",
           "validate_offset_fetch", "deletion_records"]

_INT32_MAX = 2**31 - 1


def check_heartbeat(request: Mapping[str, Any], api_version: int, config: ConsumerGroupConfig) -> ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat's fields (`request`: the keyword arguments of
    `GroupCoordinator.consumer_group_heartbeat`) checked as Kafka checks them; INVALID_REQUEST,
    UNSUPPORTED_ASSIGNOR or INVALID_REGULAR_EXPRESSION on the first problem."""
    epoch = request["member_epoch"]
    if not is_plain_int(epoch) or not -_INT32_MAX - 1 <= epoch <= _INT32_MAX:
        raise invalid(f"MemberEpoch must be an int32, got {epoch!r}.")
    member_id = request["member_id"]
    if not isinstance(member_id, str):
        raise invalid(f"MemberId must be a string, got {member_id!r}.")
    if (api_version >= 1 or epoch > 0 or epoch == -1) and not member_id.strip():
        raise invalid("MemberId can't be empty.")
    group_id = check_group_id(request["group_id"])
    for name, key in (("InstanceId", "instance_id"), ("RackId", "rack_id")):
        value = request.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise invalid(f"{name} can't be empty.")
    timeout = request.get("rebalance_timeout_ms", -1)
    if not is_plain_int(timeout) or not -1 <= timeout <= _INT32_MAX:
        raise invalid(f"RebalanceTimeoutMs must be -1 or an int32 >= 0, got {timeout!r}.")
    names = request.get("subscribed_topic_names")
    if names is not None:
        if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple, set, frozenset)) \
                or not all(isinstance(n, str) for n in names):
            raise invalid(f"SubscribedTopicNames must be a list of topic names, got {names!r}.")
        names = tuple(sorted(set(n for n in names if n)))
    regex = request.get("subscribed_topic_regex")
    if regex is not None and not isinstance(regex, str):
        raise invalid(f"SubscribedTopicRegex must be a string, got {regex!r}.")
    owned = _check_owned(request.get("owned_topic_partitions"))
    if epoch == 0:
        if timeout == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if owned is None or owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if names is None and regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == -2:
        if request.get("instance_id") is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < -2:
        raise invalid("MemberEpoch is invalid.")
    assignor = request.get("server_assignor")
    if assignor is not None and assignor not in config.assignors:
        raise ShareError(Errors.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. "
                         f"Supported assignors: {', '.join(config.assignors)}.")
    if regex:
        try:
            re.compile(regex)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ShareError(Errors.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.") from None
    return ConsumerHeartbeat(
        group_id, member_id, epoch, request.get("instance_id"), request.get("rack_id"), timeout, names, regex,
        assignor, owned, _text(request.get("client_id", "")), _text(request.get("client_host", "")),
        request.get("topic_authorized"),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(f"expected a string, got {value!r}.")
    return value


def _check_owned(owned: Any) -> dict[uuid.UUID, frozenset[int]] | None:
    """Owned partitions as topic id -> partitions (a mapping, or pairs of (topic id, partitions))."""
    if owned is None:
        return None
    items: Iterable = owned.items() if isinstance(owned, Mapping) else owned
    out: dict[uuid.UUID, frozenset[int]] = {}
    try:
        for topic_id, partitions in items:
            check_topic_id(topic_id)
            if isinstance(partitions, (str, bytes)) or not all(check_partition(p) for p in partitions):
                raise invalid(f"TopicPartitions of {topic_id} must be partition indexes, got {partitions!r}.")
            out[topic_id] = out.get(topic_id, frozenset()) | frozenset(partitions)
    except (TypeError, ValueError):
        raise invalid(f"TopicPartitions must be (topic id, partitions) entries, got {owned!r}.") from None
    return {t: ps for t, ps in out.items() if ps}


def describe(store: GroupStore, group_id: str, default_assignor: str) -> ConsumerGroupDescription:
    group: ConsumerGroup = store.require_group(group_id, ConsumerGroup)
    members = [
        ConsumerMemberDescription(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            list(m.subscribed_topic_names), m.subscribed_topic_regex, assignment_dict(m.assigned),
            assignment_dict(group.target.get(m.member_id, {})), m.state.kafka_name,
        )
        for m in group.members.values()
    ]
    return ConsumerGroupDescription(group.group_id, group.state, group.group_epoch, group.assignment_epoch,
                                    group.preferred_assignor(default_assignor), members)


def describe_classic_form(store: GroupStore, group_id: str, default_assignor: str,
                          topic_name: Callable[[uuid.UUID], str | None]) -> ClassicGroupDescription:
    """DescribeGroups (the classic API) of a KIP-848 consumer group, as Kafka answers it so that older
    tools still see the group: protocol type "consumer", the group's assignor as the protocol, Kafka's
    state name, and per member its ids, client id and host, its subscription as a
    ConsumerProtocolSubscription and its current assignment (by topic name; `topic_name(topic_id)`,
    None for a topic that is gone, which is left out) as a ConsumerProtocolAssignment."""
    group: ConsumerGroup = store.require_group(group_id, ConsumerGroup)
    members = []
    for m in group.members.values():
        assignment: dict[str, list[int]] = {}
        for topic_id, partitions in sorted(assignment_dict(m.assigned).items()):
            name = topic_name(topic_id)
            if name is not None:
                assignment[name] = sorted(partitions)
        members.append(ClassicMemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            encode_subscription(sorted(m.subscribed_topic_names)), encode_assignment(dict(sorted(assignment.items())))))
    return ClassicGroupDescription(group_id, Errors.NONE, str(group.state), "consumer",
                                   group.preferred_assignor(default_assignor), tuple(members))


def validate_offset_commit(store: GroupStore, group_id: str, member_id: str | None, member_epoch: int,
                           api_version: int = 9) -> None:
    """May this member commit offsets in this consumer group now? Epoch < 0 from outside the group
    (an admin client) is allowed only while the group is empty. Otherwise the member must exist
    (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ (UNSUPPORTED_VERSION: older versions carry no
    member epoch) and send exactly its current epoch (STALE_MEMBER_EPOCH otherwise, a greater one
    too: Kafka compares for equality)."""
    group: ConsumerGroup = store.require_group(group_id, ConsumerGroup)
    if member_epoch < 0 and not group.members:
        return
    _member(group, member_id)
    if api_version < 9:
        raise ShareError(Errors.UNSUPPORTED_VERSION,
                         "OffsetCommit version 9 or above must be used by members using the modern group protocol")
    _validate_epoch(group, member_id, member_epoch)


def validate_offset_fetch(store: GroupStore, group_id: str, member_id: str | None, member_epoch: int) -> None:
    """OffsetFetch with a member epoch (v9+): no member id and epoch < 0 is an outside read; otherwise
    the member must exist (UNKNOWN_MEMBER_ID) and send its current epoch (STALE_MEMBER_EPOCH)."""
    group: ConsumerGroup = store.require_group(group_id, ConsumerGroup)
    if member_epoch < 0 and not member_id:
        return
    _validate_epoch(group, member_id, member_epoch)


def _member(group: ConsumerGroup, member_id: str | None) -> ConsumerGroupMember:
    member = group.members.get(member_id or "")
    if member is None:
        raise ShareError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    return member


def _validate_epoch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    member = _member(group, member_id)
    if member_epoch != member.member_epoch:
        raise ShareError(Errors.STALE_MEMBER_EPOCH, f"The member epoch {member_epoch} is not the current epoch "
                         f"{member.member_epoch} of member {member_id}.")


def deletion_records(group: ConsumerGroup) -> list[Record]:
    """Tombstones of an empty consumer group: its regexes, then its target metadata and metadata."""
    if group.members:
        raise ShareError(Errors.GROUP_NOT_EMPTY, f"Group {group.group_id} is not empty.")
    records = [Record(ConsumerGroupRegularExpressionKey(group.group_id, r), None) for r in sorted(group.regexes)]
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group.group_id), None))
    records.append(Record(ConsumerGroupMetadataKey(group.group_id), None))
    return records


def consumer_offset_hooks(store: GroupStore) -> OffsetHooks:
    """What the committed-offsets service asks of a consumer group (Kafka's ConsumerGroup): member-epoch
    checks for commits and fetches, OffsetDelete allowed in any state (GROUP_SUBSCRIBED_TO_TOPIC per
    subscribed topic), offsets aging from their commit, the group empty when it has no members."""

    def group(group_id: str) -> ConsumerGroup:
        return store.require_group(group_id, ConsumerGroup)

    def subscribed_topics(group_id: str) -> set[str]:
        g = group(group_id)
        return set(g.subscription_counts) | {t for value in g.regexes.values() for t in value.topics}

    return OffsetHooks(
        validate_commit=lambda group_id, member_id, _instance_id, member_epoch, version: validate_offset_commit(
            store, group_id, member_id, member_epoch, version),
        validate_fetch=lambda group_id, member_id, member_epoch: validate_offset_fetch(
            store, group_id, member_id, member_epoch),
        validate_delete=lambda group_id: None,
        subscribed_topics=subscribed_topics,
        expiration_base=lambda group_id: (lambda value: value.commit_timestamp_ms),
        is_empty=lambda group_id: not group(group_id).members,
    )
