"""The pure-Python twin of the bulk frame codec: scan and decode runs of record frames in one buffer.

Recovery reads millions of frames; `records.check_frame` and `records.decode_record` handle one frame
per call and raise on the first bad one, which is what a reader of single records wants. These two
functions walk a whole buffer instead and stop, without raising, at the first frame that is not whole
and valid; the caller asks `check_frame` / `decode_record` why, so the errors stay those of state_records.py.
The Cython twin (`_native/records.pyx`, built as `persister._native_records`) has the same contract;
`persister.frame_codec` picks one. Both accept exactly the frames `decode_record` accepts.

A decoded row is a flat tuple of ints (nothing in it for the garbage collector to trace once it has
seen it, which matters when recovery decodes millions):

    checkpoint  (key id, KIND_CHECKPOINT, checkpoint_epoch, state_epoch, leader_epoch, start_offset,
                 delivery_complete_count, create_timestamp_ms, write_timestamp_ms, batches)
    delta       (key id, KIND_DELTA, checkpoint_epoch, leader_epoch, start_offset,
                 delivery_complete_count, batches)
    tombstone   (key id, KIND_TOMBSTONE)

`batches` is a tuple (first, last, state, count, first, last, ...) of the record's state batches in
stored order. The key id indexes `keys.keys`, a `persister.frame_rows.KeyTable` the caller passes to
every call for one log, so a key is decoded, checked and built once however many records it has.
"""

from __future__ import annotations

import struct
import uuid

import crc32c
import msgpack

from .frame_rows import KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE, KeyTable
from .state_records import (
    FORMAT_VERSION,
    MAX_FRAME_BYTES,
    RECORD_TYPE_CHECKPOINT,
    RECORD_TYPE_DELTA,
    RecordDecodeError,
    StateKey,
    _check_checkpoint,
    _check_delta,
    check_encoded_key,
    encode_delta_frame,
)

__all__ = ["scan_frames", "decode_frames", "encode_delta_frame", "NATIVE"]

NATIVE = False

# `encode_delta_frame` (the write path's delta encoding) is records.encode_delta_frame itself here.

_PREFIX = struct.Struct(">II")
_HEADER = _PREFIX.size
_BODY_MIN_BYTES = 3


def scan_frames(buf, pos: int, end: int, max_count: int = -1) -> tuple[int, int]:
    """Check the framing (length range, CRC32C, type, version) of consecutive frames in buf[pos:end],
    at most `max_count` of them (-1: no limit); return (frames checked, position after the last one).
    The position is `end` when every byte was a whole valid frame, else where the first frame that is
    cut off by `end` or invalid begins. Runtime complexity: O(end - pos)."""
    _check_bounds(buf, pos, end)
    view = memoryview(buf)
    unpack_prefix = _PREFIX.unpack_from
    crc = crc32c.crc32c
    count = 0
    while pos < end and count != max_count:
        if end - pos < _HEADER:
            break
        length, expected = unpack_prefix(view, pos)
        if length > MAX_FRAME_BYTES or length < _BODY_MIN_BYTES:
            break
        body = pos + _HEADER
        frame_end = body + length
        if frame_end > end:
            break
        if crc(view[body:frame_end], crc(view[pos : pos + 4])) != expected:
            break
        if view[body + 1] != FORMAT_VERSION or view[body] > RECORD_TYPE_DELTA:
            break
        count += 1
        pos = frame_end
    return count, pos


def decode_frames(buf, pos: int, end: int, keys: KeyTable) -> tuple[list, int]:
    """Decode consecutive frames in buf[pos:end] into rows (see the module docstring); return (rows,
    position after the last decoded frame), stopping where `scan_frames` would and also at a frame
    whose payload `decode_record` would refuse. Runtime complexity: O(end - pos)."""
    _check_bounds(buf, pos, end)
    view = memoryview(buf)
    unpack_prefix = _PREFIX.unpack_from
    crc = crc32c.crc32c
    unpackb = msgpack.unpackb
    ids = keys.ids
    rows: list = []
    append = rows.append
    while pos < end:
        if end - pos < _HEADER:
            break
        length, expected = unpack_prefix(view, pos)
        if length > MAX_FRAME_BYTES or length < _BODY_MIN_BYTES:
            break
        body = pos + _HEADER
        frame_end = body + length
        if frame_end > end:
            break
        if crc(view[body:frame_end], crc(view[pos : pos + 4])) != expected:
            break
        record_type = view[body]
        if view[body + 1] != FORMAT_VERSION or record_type > RECORD_TYPE_DELTA:
            break
        try:
            payload = unpackb(view[body + 2 : frame_end], raw=False, use_list=True, strict_map_key=True)
            if type(payload) is not list or len(payload) != 2:
                raise RecordDecodeError("a payload is a 2-element array [key, value]")
            encoded_key, fields = payload
            # A cached key was checked when it was stored; the partition's type is checked again
            # because a bool or a float can equal an int (the native twin caches the exact bytes).
            cache_key = tuple(encoded_key) if type(encoded_key) is list else None
            key_id = None
            if cache_key is not None and len(cache_key) == 3 and type(cache_key[2]) is int:
                key_id = ids.get(cache_key)
            if key_id is None:
                key_id = _new_key(keys, encoded_key, cache_key)
            if fields is None:
                if record_type != RECORD_TYPE_CHECKPOINT:
                    raise RecordDecodeError("a tombstone must have the checkpoint record type")
                append((key_id, KIND_TOMBSTONE))
            elif record_type == RECORD_TYPE_CHECKPOINT:
                _check_checkpoint(fields)
                fields[7] = tuple(fields[7])
                append((key_id, KIND_CHECKPOINT, *fields))
            else:
                _check_delta(fields)
                fields[4] = tuple(fields[4])
                append((key_id, KIND_DELTA, *fields))
        except Exception:  # RecordDecodeError or whatever msgpack raises: decode_record tells which
            break
        pos = frame_end
    return rows, pos


def _new_key(keys: KeyTable, encoded_key, cache_key) -> int:
    check_encoded_key(encoded_key)
    group_id, topic_bytes, partition = encoded_key
    return keys.add(cache_key, StateKey(group_id, uuid.UUID(bytes=topic_bytes), partition))


def _check_bounds(buf, pos: int, end: int) -> None:
    if not 0 <= pos <= end <= len(buf):
        raise ValueError(f"range [{pos}, {end}) outside a buffer of {len(buf)} bytes")
