"""The state log's records and their byte form: ShareCheckpoint, ShareDelta, tombstones, and framing.

A ShareCheckpoint holds the full state of one share-partition and a ShareDelta one write's change
(Kafka's ShareSnapshot and ShareUpdate, under the names of the original KIP-932 draft); a tombstone is a
checkpoint key with no value. Each record is framed so that a reader detects a torn or corrupt one:

    length  u32 big-endian   bytes in the body (type + version + payload), at most MAX_FRAME_BYTES
    crc     u32 big-endian   CRC32C of the 4 length bytes followed by the body
    body    type u8 | format version u8 | msgpack payload [key, value or nil]

The CRC covers the length too, so a flipped length bit is caught as corruption rather than misread as
a torn frame whenever the frame still fits in the buffer.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from typing import Iterator, NamedTuple, Union

import crc32c
import msgpack

from sharegroup.types import StateBatch

__all__ = [
    "StateKey",
    "ShareCheckpoint",
    "ShareDelta",
    "ShareRecord",
    "RecordDecodeError",
    "TornRecordError",
    "encode_record",
    "check_frame",
    "decode_record",
    "iter_records",
    "encode_key",
    "encode_delta_frame",
    "new_checkpoint",
    "new_delta",
    "RECORD_TYPE_CHECKPOINT",
    "RECORD_TYPE_DELTA",
    "FORMAT_VERSION",
    "FRAME_HEADER_BYTES",
    "MAX_FRAME_BYTES",
    "check_encoded_key",
    "unflatten_batches",
]

RECORD_TYPE_CHECKPOINT = 0  # also the type of a tombstone (as Kafka's ShareSnapshotKey, apiKey 0)
RECORD_TYPE_DELTA = 1
FORMAT_VERSION = 0
MAX_FRAME_BYTES = 64 * 2**20  # a longer length field is corruption, never an allocation

_PREFIX = struct.Struct(">II")  # length, crc
FRAME_HEADER_BYTES = _PREFIX.size
_BODY_MIN_BYTES = 3  # type, version and at least one payload byte

_INT8 = (-(2**7), 2**7 - 1)
_INT16 = (-(2**15), 2**15 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class StateKey(NamedTuple):
    """The key of one share-partition's state: Kafka's SharePartitionKey (group, topic id, partition)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


def _as_batches(batches) -> tuple[StateBatch, ...]:
    return tuple(b if type(b) is StateBatch else StateBatch(*b) for b in batches)


@dataclasses.dataclass(frozen=True, slots=True)
class ShareCheckpoint:
    """The full state of one share-partition (Kafka's ShareSnapshot); replaying it replaces the state.

    `state_batches` is stored as a tuple of StateBatch so the value is immutable and hashable.
    """

    checkpoint_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp_ms: int
    write_timestamp_ms: int
    state_batches: tuple[StateBatch, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_batches", _as_batches(self.state_batches))


@dataclasses.dataclass(frozen=True, slots=True)
class ShareDelta:
    """One write's change to a share-partition (Kafka's ShareUpdate), merged into the state on replay.

    -1 in `start_offset` or `leader_epoch` means "unchanged"; `state_batches` are the write's batches,
    combined among themselves and pruned by the new start offset.
    """

    checkpoint_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_batches", _as_batches(self.state_batches))


ShareRecord = Union[ShareCheckpoint, ShareDelta, None]  # None is a tombstone

# The slot setters of the two frozen dataclasses, for `new_checkpoint` / `new_delta`: the generated
# __init__ sets each field through object.__setattr__ by name and then normalises the batches, which is
# most of the cost of a write's replay; these build the same value from parts already normalised.
_CHECKPOINT_SET = tuple(getattr(ShareCheckpoint, f.name).__set__ for f in dataclasses.fields(ShareCheckpoint))
_DELTA_SET = tuple(getattr(ShareDelta, f.name).__set__ for f in dataclasses.fields(ShareDelta))


def new_checkpoint(
    checkpoint_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    delivery_complete_count: int,
    create_timestamp_ms: int,
    write_timestamp_ms: int,
    state_batches: tuple[StateBatch, ...],
) -> ShareCheckpoint:
    """`ShareCheckpoint(...)` for `state_batches` that is already a tuple of StateBatch (not checked)."""
    value = object.__new__(ShareCheckpoint)
    s0, s1, s2, s3, s4, s5, s6, s7 = _CHECKPOINT_SET
    s0(value, checkpoint_epoch)
    s1(value, state_epoch)
    s2(value, leader_epoch)
    s3(value, start_offset)
    s4(value, delivery_complete_count)
    s5(value, create_timestamp_ms)
    s6(value, write_timestamp_ms)
    s7(value, state_batches)
    return value


def new_delta(
    checkpoint_epoch: int,
    leader_epoch: int,
    start_offset: int,
    delivery_complete_count: int,
    state_batches: tuple[StateBatch, ...],
) -> ShareDelta:
    """`ShareDelta(...)` for `state_batches` that is already a tuple of StateBatch (not checked)."""
    value = object.__new__(ShareDelta)
    s0, s1, s2, s3, s4 = _DELTA_SET
    s0(value, checkpoint_epoch)
    s1(value, leader_epoch)
    s2(value, start_offset)
    s3(value, delivery_complete_count)
    s4(value, state_batches)
    return value


class RecordDecodeError(ValueError):
    """Bytes that are not a valid record frame: bad length, CRC mismatch, unknown type or version, or a
    payload of the wrong shape. A torn frame raises the subclass TornRecordError."""


class TornRecordError(RecordDecodeError):
    """The buffer ends inside a frame: what a crash in the middle of an append leaves behind."""


# -- encoding -----------------------------------------------------------------------------------


def encode_record(key: StateKey, value: ShareRecord) -> bytes:
    """Frame one record: `value` None is a tombstone. Raises ValueError (or TypeError) for a key or
    value that `decode_record` would refuse, so everything written can be read back."""
    group_id, topic_id, partition = key
    if not isinstance(topic_id, uuid.UUID):
        raise TypeError(f"topic_id must be a uuid.UUID, not {type(topic_id).__name__}")
    try:
        record_type, encoded_value = _encode_value(value)
        encoded_key = [group_id, topic_id.bytes, _plain(partition)]
        check_encoded_key(encoded_key)
    except RecordDecodeError as exc:
        raise ValueError(f"cannot encode record: {exc}") from None
    payload = msgpack.packb([encoded_key, encoded_value], use_bin_type=True)
    body = bytes((record_type, FORMAT_VERSION)) + payload
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"record of {len(body)} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})")
    length = len(body).to_bytes(4, "big")
    crc = crc32c.crc32c(body, crc32c.crc32c(length))
    return length + crc.to_bytes(4, "big") + body


def encode_key(key: StateKey) -> bytes:
    """The msgpack form of a key ([group_id, topic_id bytes, partition]), checked as `encode_record`
    checks it; with `encode_delta_frame` it lets a writer encode a key once and reuse it."""
    group_id, topic_id, partition = key
    if not isinstance(topic_id, uuid.UUID):
        raise TypeError(f"topic_id must be a uuid.UUID, not {type(topic_id).__name__}")
    encoded_key = [group_id, topic_id.bytes, _plain(partition)]
    try:
        check_encoded_key(encoded_key)
    except RecordDecodeError as exc:
        raise ValueError(f"cannot encode record: {exc}") from None
    return msgpack.packb(encoded_key, use_bin_type=True)


_DELTA_BODY_HEAD = bytes((RECORD_TYPE_DELTA, FORMAT_VERSION, 0x92))  # type, version, [key, value]


def encode_delta_frame(encoded_key: bytes, value: ShareDelta, pack=None) -> bytes:
    """`encode_record(key, value)` for a delta, given `encode_key(key)`: the same bytes, built without
    the generic checks when every field is a plain int in range (else it defers to the full checks, so
    it raises exactly when `encode_record` would). `pack` may be a `msgpack.Packer().pack` the caller
    owns (a Packer is not thread-safe)."""
    checkpoint_epoch, leader_epoch, start_offset, delivery_complete_count, batches = (
        value.checkpoint_epoch,
        value.leader_epoch,
        value.start_offset,
        value.delivery_complete_count,
        value.state_batches,
    )
    if not (
        type(checkpoint_epoch) is int
        and type(leader_epoch) is int
        and type(start_offset) is int
        and type(delivery_complete_count) is int
        and 0 <= checkpoint_epoch <= _INT32[1]
        and -1 <= leader_epoch <= _INT32[1]
        and -1 <= start_offset <= _INT64[1]
        and -1 <= delivery_complete_count <= _INT32[1]
    ):
        return _encode_delta_checked(encoded_key, value)
    flat: list = []
    for batch in batches:  # value.state_batches is a tuple of StateBatch (ShareDelta normalises it)
        first, last, state, count = batch
        if not (
            type(first) is int
            and type(last) is int
            and type(state) is int
            and type(count) is int
            and 0 <= first <= last <= _INT64[1]
            and _INT8[0] <= state <= _INT8[1]
            and 0 <= count <= _INT16[1]
        ):
            return _encode_delta_checked(encoded_key, value)
        flat += batch
    payload = (pack or msgpack.packb)([checkpoint_epoch, leader_epoch, start_offset, delivery_complete_count, flat])
    body = _DELTA_BODY_HEAD + encoded_key + payload
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"record of {len(body)} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})")
    length = len(body).to_bytes(4, "big")
    return length + crc32c.crc32c(body, crc32c.crc32c(length)).to_bytes(4, "big") + body


def _encode_delta_checked(encoded_key: bytes, value: ShareDelta) -> bytes:
    group_id, topic_bytes, partition = msgpack.unpackb(encoded_key, raw=False)
    return encode_record(StateKey(group_id, uuid.UUID(bytes=topic_bytes), partition), value)


def _encode_value(value: ShareRecord) -> tuple[int, list | None]:
    """The record type and the msgpack-ready field list of a value, checked as a decoder would."""
    if value is None:
        return RECORD_TYPE_CHECKPOINT, None
    if isinstance(value, ShareCheckpoint):
        fields = [
            _plain(value.checkpoint_epoch),
            _plain(value.state_epoch),
            _plain(value.leader_epoch),
            _plain(value.start_offset),
            _plain(value.delivery_complete_count),
            _plain(value.create_timestamp_ms),
            _plain(value.write_timestamp_ms),
            _flatten(value.state_batches),
        ]
        _check_checkpoint(fields)
        return RECORD_TYPE_CHECKPOINT, fields
    if isinstance(value, ShareDelta):
        fields = [
            _plain(value.checkpoint_epoch),
            _plain(value.leader_epoch),
            _plain(value.start_offset),
            _plain(value.delivery_complete_count),
            _flatten(value.state_batches),
        ]
        _check_delta(fields)
        return RECORD_TYPE_DELTA, fields
    raise TypeError(f"a record value is a ShareCheckpoint, a ShareDelta or None, not {type(value).__name__}")


def _plain(value):
    """An int subclass (IntEnum, ...) as a plain int, so it passes the exact-type checks; bools stay bools."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _flatten(batches) -> list:
    """State batches as one flat list [first, last, state, count, ...]: compact and quick to decode."""
    flat: list = []
    for batch in batches:
        flat.extend(map(_plain, batch))
    return flat


# -- decoding -----------------------------------------------------------------------------------


def check_frame(buf: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Check the framing of the frame at `offset` of `buf` (length range, CRC, record type and format
    version) without decoding its payload; return the offset of the next frame.

    Raises TornRecordError when `buf` ends inside the frame and RecordDecodeError for any other framing
    fault, exactly as `decode_record` does. This is what a log scans with on recovery: a few hundred
    nanoseconds per frame instead of a full decode.
    """
    view = buf if type(buf) is memoryview else memoryview(buf)
    remaining = len(view) - offset
    if offset < 0 or remaining < 0:
        raise ValueError(f"offset {offset} outside a buffer of {len(view)} bytes")
    if remaining < FRAME_HEADER_BYTES:
        raise TornRecordError(f"buffer ends {remaining} bytes into a frame header at byte {offset}")
    length, crc = _PREFIX.unpack_from(view, offset)
    if length > MAX_FRAME_BYTES or length < _BODY_MIN_BYTES:
        raise RecordDecodeError(f"frame length {length} at byte {offset} is out of range")
    end = offset + FRAME_HEADER_BYTES + length
    if end > len(view):
        have = remaining - FRAME_HEADER_BYTES
        raise TornRecordError(f"frame at byte {offset} needs {length} body bytes, buffer has {have}")
    body_start = offset + FRAME_HEADER_BYTES
    if crc32c.crc32c(view[body_start:end], crc32c.crc32c(view[offset : offset + 4])) != crc:
        raise RecordDecodeError(f"CRC mismatch in the frame at byte {offset}")
    record_type, version = view[body_start], view[body_start + 1]
    if version != FORMAT_VERSION:
        raise RecordDecodeError(f"unsupported record format version {version} at byte {offset}")
    if record_type not in (RECORD_TYPE_CHECKPOINT, RECORD_TYPE_DELTA):
        raise RecordDecodeError(f"unknown record type {record_type} at byte {offset}")
    return end


def decode_record(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[StateKey, ShareRecord, int]:
    """Decode the frame at `offset` of `buf`; return (key, value or None, offset of the next frame).

    Raises TornRecordError when `buf` ends inside the frame (including before its header) and
    RecordDecodeError for anything else that is not a valid frame. Work and memory are bounded by the
    bytes present: a length field above MAX_FRAME_BYTES is refused before anything is read.
    """
    view = memoryview(buf)
    end = check_frame(view, offset)
    body = view[offset + FRAME_HEADER_BYTES : end]
    record_type = body[0]
    try:
        payload = msgpack.unpackb(body[2:], raw=False, use_list=True, strict_map_key=True)
        key, value = _decode_payload(record_type, payload)
    except RecordDecodeError:
        raise
    except Exception as exc:  # msgpack's FormatError, ExtraData, ValueError, UnicodeDecodeError, ...
        raise RecordDecodeError(f"bad payload in the frame at byte {offset}: {exc!r}") from exc
    return key, value, end


def iter_records(buf: bytes | bytearray | memoryview, offset: int = 0) -> Iterator[tuple[StateKey, ShareRecord, int]]:
    """Decode consecutive frames from `offset` to the end of `buf`, yielding (key, value, next_offset).

    Stops cleanly at the end of the buffer; raises like `decode_record` on a torn or corrupt frame, so
    the caller knows the byte offset where valid data ended (the last `next_offset` yielded).
    """
    end = len(buf)
    while offset < end:
        key, value, offset = decode_record(buf, offset)
        yield key, value, offset


def _decode_payload(record_type: int, payload) -> tuple[StateKey, ShareRecord]:
    if type(payload) is not list or len(payload) != 2:
        raise RecordDecodeError("a payload is a 2-element array [key, value]")
    encoded_key, encoded_value = payload
    check_encoded_key(encoded_key)
    group_id, topic_bytes, partition = encoded_key
    key = StateKey(group_id, uuid.UUID(bytes=topic_bytes), partition)
    if encoded_value is None:
        if record_type != RECORD_TYPE_CHECKPOINT:
            raise RecordDecodeError("a tombstone must have the checkpoint record type")
        return key, None
    if record_type == RECORD_TYPE_CHECKPOINT:
        _check_checkpoint(encoded_value)
        *fields, flat = encoded_value
        return key, ShareCheckpoint(*fields, unflatten_batches(flat))
    _check_delta(encoded_value)
    *fields, flat = encoded_value
    return key, ShareDelta(*fields, unflatten_batches(flat))


def unflatten_batches(flat) -> tuple[StateBatch, ...]:
    """State batches from their stored form, a flat sequence (first, last, state, count, first, ...)."""
    it = iter(flat)
    return tuple(map(StateBatch, it, it, it, it))


# -- shape checks shared by encoding and decoding -----------------------------------------------


def _int_in(value, bounds: tuple[int, int]) -> bool:
    return type(value) is int and bounds[0] <= value <= bounds[1]


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise RecordDecodeError(what)


# Each check first tries one combined condition (what nearly every record meets, evaluated inline:
# recovery runs these for every record of the log) and only on failure runs the step-by-step version,
# which raises with the message of the first rule broken. The two must accept exactly the same values.

_I8_MIN, _I8_MAX = _INT8
_I16_MAX = _INT16[1]
_I32_MAX = _INT32[1]
_I64_MIN, _I64_MAX = _INT64


def check_encoded_key(encoded_key) -> None:
    """Check a decoded msgpack key [group_id, topic_id bytes, partition]; RecordDecodeError if malformed.
    The one definition of a well-formed stored key (recovery, both frame codecs and the audit use it)."""
    if type(encoded_key) is list and len(encoded_key) == 3:
        group_id, topic_bytes, partition = encoded_key
        if (
            type(group_id) is str
            and type(topic_bytes) is bytes
            and len(topic_bytes) == 16
            and type(partition) is int
            and 0 <= partition <= _I32_MAX
        ):
            return
    _require(type(encoded_key) is list and len(encoded_key) == 3, "a key is [group_id, topic_id, partition]")
    group_id, topic_bytes, partition = encoded_key
    _require(type(group_id) is str, "group_id must be a string")
    _require(type(topic_bytes) is bytes and len(topic_bytes) == 16, "topic_id must be 16 bytes")
    _require(_int_in(partition, (0, _INT32[1])), "partition must be an int32 >= 0")


def _check_checkpoint(fields) -> None:
    if type(fields) is list and len(fields) == 8:
        (checkpoint_epoch, state_epoch, leader_epoch, start_offset, delivery_complete_count, create_ms, write_ms,
         flat) = fields
        if (
            type(checkpoint_epoch) is int
            and type(state_epoch) is int
            and type(leader_epoch) is int
            and type(start_offset) is int
            and type(delivery_complete_count) is int
            and type(create_ms) is int
            and type(write_ms) is int
            and 0 <= checkpoint_epoch <= _I32_MAX
            and 0 <= state_epoch <= _I32_MAX
            and -1 <= leader_epoch <= _I32_MAX
            and -1 <= start_offset <= _I64_MAX
            and -1 <= delivery_complete_count <= _I32_MAX
            and _I64_MIN <= create_ms <= _I64_MAX
            and _I64_MIN <= write_ms <= _I64_MAX
            and _batches_ok(flat)
        ):
            return
    _require(type(fields) is list and len(fields) == 8, "a checkpoint value has 8 fields")
    (checkpoint_epoch, state_epoch, leader_epoch, start_offset, delivery_complete_count, create_ms, write_ms,
         flat) = fields
    _require(_int_in(checkpoint_epoch, (0, _INT32[1])), "checkpoint_epoch must be an int32 >= 0")
    _require(_int_in(state_epoch, (0, _INT32[1])), "state_epoch must be an int32 >= 0")
    _require(_int_in(leader_epoch, (-1, _INT32[1])), "leader_epoch must be an int32 >= -1")
    _require(_int_in(start_offset, (-1, _INT64[1])), "start_offset must be an int64 >= -1")
    _require(_int_in(delivery_complete_count, (-1, _INT32[1])), "delivery_complete_count must be an int32 >= -1")
    _require(_int_in(create_ms, _INT64) and _int_in(write_ms, _INT64), "timestamps must be int64")
    _check_batches(flat)


def _check_delta(fields) -> None:
    if type(fields) is list and len(fields) == 5:
        checkpoint_epoch, leader_epoch, start_offset, delivery_complete_count, flat = fields
        if (
            type(checkpoint_epoch) is int
            and type(leader_epoch) is int
            and type(start_offset) is int
            and type(delivery_complete_count) is int
            and 0 <= checkpoint_epoch <= _I32_MAX
            and -1 <= leader_epoch <= _I32_MAX
            and -1 <= start_offset <= _I64_MAX
            and -1 <= delivery_complete_count <= _I32_MAX
            and _batches_ok(flat)
        ):
            return
    _require(type(fields) is list and len(fields) == 5, "a delta value has 5 fields")
    checkpoint_epoch, leader_epoch, start_offset, delivery_complete_count, flat = fields
    _require(_int_in(checkpoint_epoch, (0, _INT32[1])), "checkpoint_epoch must be an int32 >= 0")
    _require(_int_in(leader_epoch, (-1, _INT32[1])), "leader_epoch must be an int32 >= -1")
    _require(_int_in(start_offset, (-1, _INT64[1])), "start_offset must be an int64 >= -1")
    _require(_int_in(delivery_complete_count, (-1, _INT32[1])), "delivery_complete_count must be an int32 >= -1")
    _check_batches(flat)


def _batches_ok(flat) -> bool:
    """Whether `_check_batches(flat)` passes, without building messages."""
    if type(flat) is not list or len(flat) % 4:
        return False
    it = iter(flat)
    for first, last, state, count in zip(it, it, it, it):
        if not (
            type(first) is int
            and type(last) is int
            and type(state) is int
            and type(count) is int
            and 0 <= first <= last <= _I64_MAX
            and _I8_MIN <= state <= _I8_MAX
            and 0 <= count <= _I16_MAX
        ):
            return False
    return True


def _check_batches(flat) -> None:
    if _batches_ok(flat):
        return
    _require(type(flat) is list and len(flat) % 4 == 0, "state batches are a flat int array of 4-tuples")
    for i in range(0, len(flat), 4):
        first, last, state, count = flat[i : i + 4]
        _require(_int_in(first, (0, _INT64[1])), "a state batch's first_offset must be an int64 >= 0")
        _require(_int_in(last, (first, _INT64[1])), "a state batch's last_offset must be >= its first_offset")
        _require(_int_in(state, _INT8), "delivery_state must be an int8")
        _require(_int_in(count, (0, _INT16[1])), "delivery_count must be an int16 >= 0")
