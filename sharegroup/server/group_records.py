"""A durable `RecordSink` for the group coordinator: its share-group records in one append-only file.

`sharegroup serve` keeps the coordinator's records (member metadata, epochs, target and current
assignments, share-partition lifecycle; the same for KIP-848 consumer groups) under `DIR/groups/records.log`, so a restarted broker rebuilds
every group with `GroupCoordinator.load()`. One `append(records)` call is one frame, written and
fsync'd before the call returns, so a group change either survives a crash whole or not at all:

    frame = length:uint32 | crc32(payload):uint32 | payload (UTF-8 JSON: a list of [key, value])

At open every frame is replayed; a torn or corrupt tail (a crash in the middle of a write) is cut off,
since the append it belonged to never returned. Keys and values are the coordinator's frozen
dataclasses and NamedTuples of str, int, UUID and tuples; they are written with their class name and
fields (bytes as base64), and a name that is not a record class is refused (ValueError), never guessed.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any, Sequence

from ..coordinator import records as rec
from ..coordinator.classic import records as classic_records
from ..coordinator.consumer import records as consumer_records
from ..coordinator.share import records as share_records

__all__ = ["FileRecordSink", "encode_records", "decode_records"]

FILE_NAME = "records.log"
_HEADER = struct.Struct(">II")
_MAX_FRAME_BYTES = 64 << 20  # a larger length is corruption, not a record list

_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (*share_records.SHARE_VALUE_TYPES, *share_records.SHARE_VALUE_TYPES.values(), rec.TopicPartitions,
                share_records.TopicMetadata,
                *classic_records.CLASSIC_VALUE_TYPES, *classic_records.CLASSIC_VALUE_TYPES.values(),
                *classic_records.NESTED_TYPES,
                *consumer_records.CONSUMER_VALUE_TYPES, *consumer_records.CONSUMER_VALUE_TYPES.values())
}


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, uuid.UUID):
        return {"u": value.hex}
    if isinstance(value, bytes):  # a classic member's protocol metadata and assignment
        return {"b": base64.b64encode(value).decode()}
    name = type(value).__name__
    if name in _CLASSES:
        if dataclasses.is_dataclass(value):
            return {"t": name, "f": [_encode(getattr(value, f.name)) for f in dataclasses.fields(value)]}
        return {"t": name, "f": [_encode(item) for item in value]}
    if isinstance(value, tuple):
        return {"l": [_encode(item) for item in value]}
    raise TypeError(f"cannot encode {value!r} in a group record")


def _decode(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if isinstance(data, dict):
        if "u" in data:
            return uuid.UUID(hex=data["u"])
        if "l" in data:
            return tuple(_decode(item) for item in data["l"])
        if "b" in data:
            return base64.b64decode(data["b"], validate=True)
        cls = _CLASSES.get(data.get("t", ""))
        if cls is None:
            raise ValueError(f"not a group record class: {data.get('t')!r}")
        return cls(*(_decode(item) for item in data["f"]))
    raise ValueError(f"not a group record field: {data!r}")


def encode_records(records: Sequence[rec.Record]) -> bytes:
    payload = json.dumps([[_encode(r.key), _encode(r.value)] for r in records], separators=(",", ":")).encode()
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_records(payload: bytes) -> list[rec.Record]:
    return [rec.Record(_decode(key), _decode(value)) for key, value in json.loads(payload)]


class FileRecordSink:
    """Group records in `directory/records.log`; open with `FileRecordSink.open(directory)`."""

    def __init__(self, path: Path, records: list[rec.Record], fsync: bool = True) -> None:
        self.path = path
        self._records = records
        self._fsync = fsync
        self._lock = asyncio.Lock()
        self._file = open(path, "ab")  # noqa: SIM115 - kept open for the sink's life
        self.appends = 0

    @classmethod
    def open(cls, directory: str | os.PathLike, *, fsync: bool = True) -> "FileRecordSink":
        """Replay `directory/records.log` (created if missing), cutting off a torn tail."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILE_NAME
        records: list[rec.Record] = []
        good = 0
        if path.exists():
            data = path.read_bytes()
            while good + _HEADER.size <= len(data):
                length, crc = _HEADER.unpack_from(data, good)
                end = good + _HEADER.size + length
                if length > _MAX_FRAME_BYTES or end > len(data):
                    break
                payload = data[good + _HEADER.size:end]
                if zlib.crc32(payload) != crc:
                    break
                records.extend(decode_records(payload))
                good = end
            if good < len(data):
                with open(path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
        return cls(path, records, fsync)

    async def append(self, records: Sequence[rec.Record]) -> None:
        """Write one frame with `records` and make it durable; none of them count if this raises."""
        frame = encode_records(records)
        async with self._lock:
            await asyncio.to_thread(self._write, frame)
            self._records.extend(records)
            self.appends += 1

    def _write(self, frame: bytes) -> None:
        position = self._file.tell()
        try:
            self._file.write(frame)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError:
            self._file.truncate(position)  # a failed append leaves nothing behind
            raise

    def read_all(self) -> list[rec.Record]:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def close(self) -> None:
        self._file.close()
