"""Validation of the coordinator's request arguments: malformed input is INVALID_REQUEST, with state
left unchanged (the checks run before anything is recorded)."""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import Errors, ShareError
from ..types import is_plain_int

__all__ = [
    "MAX_MEMBER_ID_LENGTH",
    "check_group_id",
    "check_member_epoch",
    "check_member_id",
    "check_optional_text",
    "check_text",
    "check_topic_names",
    "check_topic_id",
    "check_partition",
]

# Kafka clients generate a UUID string (36 characters); KafkaApis refuses longer member ids.
MAX_MEMBER_ID_LENGTH = 36
_INT32_MAX = 2**31 - 1


def invalid(message: str) -> ShareError:
    return ShareError(Errors.INVALID_REQUEST, message)


def check_group_id(group_id: Any, error: Errors = Errors.INVALID_REQUEST) -> str:
    """A heartbeat with a blank group id is INVALID_REQUEST; the admin APIs answer INVALID_GROUP_ID.
    The message is Kafka's ("GroupId can't be empty.", for a blank id too)."""
    if not isinstance(group_id, str) or not group_id.strip():
        raise ShareError(error, "GroupId can't be empty.")
    return group_id


def check_member_epoch(member_epoch: Any) -> int:
    if not is_plain_int(member_epoch) or not -1 <= member_epoch <= _INT32_MAX:
        raise invalid(f"MemberEpoch must be an int32 >= -1, got {member_epoch!r}.")
    return member_epoch


def check_member_id(member_id: Any, member_epoch: int) -> str:
    """The member id of a heartbeat: blank is allowed only on a join (the coordinator makes one)."""
    if not isinstance(member_id, str):
        raise invalid(f"MemberId must be a string, got {member_id!r}.")
    if not member_id.strip():
        if member_id == "" and member_epoch == 0:
            return member_id
        raise invalid("MemberId can't be empty or blank.")
    if len(member_id) > MAX_MEMBER_ID_LENGTH:
        raise invalid(f"MemberId can't be longer than {MAX_MEMBER_ID_LENGTH} characters.")
    return member_id


def check_text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {value!r}.")
    return value


def check_optional_text(value: Any, name: str) -> str | None:
    """None (unchanged / not set) or a non-blank string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{name} can't be empty or blank, got {value!r}.")
    return value


def check_topic_names(names: Any, member_epoch: int) -> tuple[str, ...] | None:
    """SubscribedTopicNames: None means unchanged; required and non-empty on a join. Returned sorted
    and without duplicates."""
    if names is None:
        if member_epoch == 0:
            raise invalid("SubscribedTopicNames must be set in first request.")
        return None
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple, set, frozenset)):
        raise invalid(f"SubscribedTopicNames must be a list of topic names, got {names!r}.")
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise invalid(f"SubscribedTopicNames can't hold an empty or blank name, got {name!r}.")
    if member_epoch == 0 and not names:
        raise invalid("SubscribedTopicNames must be set in first request.")
    return tuple(sorted(set(names)))


def check_topic_id(topic_id: Any) -> uuid.UUID:
    if not isinstance(topic_id, uuid.UUID):
        raise invalid(f"a topic id must be a uuid.UUID, got {topic_id!r}.")
    return topic_id


def check_partition(partition: Any) -> bool:
    """Whether `partition` is a valid partition index (an int32 >= 0)."""
    return is_plain_int(partition) and 0 <= partition <= _INT32_MAX
