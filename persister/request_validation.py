"""Stateless checks of share-state requests, raising ShareError(INVALID_REQUEST) with a clear message.

They run before the coordinator looks at any stored state, in Kafka's order (topic id, partition,
epochs), followed by our own checks of the remaining fields, so a malformed request never reaches the
rules or the log. Each returns the value normalised to plain ints and StateBatch tuples.
"""

from __future__ import annotations

import uuid
from typing import Iterable

from sharegroup.errors import Errors, ShareError
from sharegroup.types import DELIVERY_COUNT_MAX, RECORD_STATE_IDS, StateBatch, is_plain_int

from .combiner import is_canonical
from .state_records import StateKey

__all__ = [
    "check_key",
    "request_key",
    "check_epoch",
    "check_start_offset",
    "check_delivery_complete_count",
    "check_state_batches",
    "fast_state_batches",
    "INT32_MAX",
    "INT64_MAX",
    "GROUP_ID_BYTES_MAX",
    "RECORDS_PER_SNAPSHOT_DEFAULT",
    "RECORDS_PER_SNAPSHOT_MAX",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
GROUP_ID_BYTES_MAX = 2**15 - 1  # Kafka strings carry an int16 length
_new_tuple = tuple.__new__
# share.coordinator.snapshot.update.records.per.snapshot: Kafka's default and bounds [0, 500].
RECORDS_PER_SNAPSHOT_DEFAULT = 500
RECORDS_PER_SNAPSHOT_MAX = 500


def _invalid(message: str) -> ShareError:
    return ShareError(Errors.INVALID_REQUEST, message)


def check_key(group_id, topic_id, partition) -> StateKey:
    """The request's StateKey: a non-empty group id, a uuid.UUID topic id and an int32 partition >= 0."""
    if not isinstance(group_id, str) or not group_id:
        raise _invalid("The group id must be a non-empty string.")
    try:
        if len(group_id.encode("utf-8")) > GROUP_ID_BYTES_MAX:
            raise _invalid(f"The group id is longer than {GROUP_ID_BYTES_MAX} bytes.")
    except UnicodeEncodeError:
        raise _invalid("The group id is not valid unicode.") from None
    if not isinstance(topic_id, uuid.UUID):
        raise _invalid("The topic id cannot be null and must be a uuid.UUID.")
    if not is_plain_int(partition) or partition < 0:
        raise _invalid("The partition id cannot be a negative number.")
    if partition > INT32_MAX:
        raise _invalid("The partition id does not fit in an int32.")
    return StateKey(group_id, topic_id, int(partition))


def check_epoch(value, name: str) -> int:
    """A leader or state epoch: an int32 >= 0 (negative sentinels are refused since KAFKA-20743)."""
    if not is_plain_int(value) or value < 0:
        raise _invalid(f"The {name} epoch cannot be a negative number.")
    if value > INT32_MAX:
        raise _invalid(f"The {name} epoch does not fit in an int32.")
    return int(value)


def check_start_offset(value) -> int:
    """A start offset: an int64 >= -1, where -1 means "not initialized" or "unchanged"."""
    if not is_plain_int(value) or not -1 <= value <= INT64_MAX:
        raise _invalid(f"The start offset must be an int64 >= -1, not {value!r}.")
    return int(value)


def check_delivery_complete_count(value) -> int:
    """A delivery complete count: an int32 >= -1, where -1 means "unknown"."""
    if not is_plain_int(value) or not -1 <= value <= INT32_MAX:
        raise _invalid(f"The delivery complete count must be an int32 >= -1, not {value!r}.")
    return int(value)


def check_state_batches(batches: Iterable) -> list[StateBatch]:
    """State batches of a request: 0 <= first <= last (int64), a record state id (0, 1, 2 or 4: the
    coordinator stores what a leader writes without judging the state, as Kafka's does) and a delivery
    count in 0..32767. Batches may overlap; the combiner resolves them."""
    if batches is None or isinstance(batches, (str, bytes)):
        raise _invalid("The state batches must be a sequence of StateBatch.")
    try:
        items = list(batches)
    except TypeError:
        raise _invalid("The state batches must be a sequence of StateBatch.") from None
    checked: list[StateBatch] = []
    for batch in items:
        try:
            first, last, state, count = batch
        except (TypeError, ValueError):
            raise _invalid(f"A state batch has four fields, not {batch!r}.") from None
        if not (is_plain_int(first) and is_plain_int(last) and 0 <= first <= last <= INT64_MAX):
            raise _invalid(f"A state batch needs 0 <= first_offset <= last_offset, not {batch!r}.")
        if not is_plain_int(state) or state not in RECORD_STATE_IDS:
            raise _invalid(f"A delivery state is a record state (0, 1, 2 or 4), not {state!r}.")
        if not is_plain_int(count) or not 0 <= count <= DELIVERY_COUNT_MAX:
            raise _invalid(f"A delivery count is in 0..{DELIVERY_COUNT_MAX}, not {count!r}.")
        checked.append(StateBatch(int(first), int(last), int(state), int(count)))
    return checked


def fast_state_batches(batches) -> tuple[tuple[StateBatch, ...], bool]:
    """`check_state_batches` for the common shape (a list or tuple of StateBatch of plain ints), checked
    in one pass without copying each batch; anything else goes through `check_state_batches`, so the
    errors are the same. Returns a tuple (the caller's list may change after the call) and, from the
    same pass, whether it is in the combiner's output form regardless of a start offset
    (`persister.combiner.is_canonical(batches)`: sorted, disjoint, touching batches differing)."""
    kind = type(batches)
    if kind is list or kind is tuple:
        canonical = True
        previous_last = -1
        previous_state = previous_count = None
        for batch in batches:
            if type(batch) is not StateBatch:
                break
            first, last, state, count = batch
            if not (
                type(first) is int
                and type(last) is int
                and type(state) is int
                and type(count) is int
                and 0 <= first <= last <= INT64_MAX
                and state in RECORD_STATE_IDS
                and 0 <= count <= DELIVERY_COUNT_MAX
            ):
                break
            if first <= previous_last or (
                first == previous_last + 1 and state == previous_state and count == previous_count
            ):
                canonical = False
            previous_last, previous_state, previous_count = last, state, count
        else:
            return (batches if kind is tuple else tuple(batches)), canonical
    checked = tuple(check_state_batches(batches))
    return checked, is_canonical(checked)


def request_key(group_id, topic_id, partition) -> StateKey:
    """`check_key` for the hot path: plain values take a fast branch, anything else `check_key` (same
    errors)."""
    if (
        type(group_id) is str
        and type(topic_id) is uuid.UUID
        and type(partition) is int
        and 0 <= partition <= INT32_MAX
        and 0 < len(group_id) <= GROUP_ID_BYTES_MAX
        and group_id.isascii()  # then its UTF-8 form is as long as it is
    ):
        return _new_tuple(StateKey, (group_id, topic_id, partition))  # StateKey(...) without its __new__
    return check_key(group_id, topic_id, partition)
