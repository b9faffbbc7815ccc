"""The consumer embedded protocol: what Kafka consumers put in JoinGroup metadata and SyncGroup assignments.

A classic group with protocol type "consumer" carries, per member, a ConsumerProtocolSubscription
(version int16, topics array of string, user data, then version-dependent fields: owned partitions
v1+, generation v2+, rack v3+) and gets back a ConsumerProtocolAssignment (version int16, array of
(topic, partitions int32 array), user data). The coordinator itself only needs the subscribed topic
names (OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC for them); the encoders serve tests and tools.
Encoding is big-endian and non-flexible in every version (int16-length strings, int32-count arrays).
"""

from __future__ import annotations

import struct
from typing import Iterable, Mapping

__all__ = ["encode_assignment", "encode_subscription", "decode_assignment", "subscribed_topics"]

_MAX_TOPICS = 1 << 20  # a count beyond this is garbage, not a subscription


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol data is truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise ValueError("a topic name cannot be null")
        return self.take(length).decode("utf-8")

    def count(self) -> int:
        n = self.int32()
        if not 0 <= n <= _MAX_TOPICS:
            raise ValueError(f"bad array length {n}")
        return n


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topic names of a ConsumerProtocolSubscription; ValueError when it does not decode."""
    reader = _Reader(bytes(metadata))
    version = reader.int16()
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    return [reader.string() for _ in range(reader.count())]


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """topic -> partitions of a ConsumerProtocolAssignment (empty bytes: no assignment)."""
    if not data:
        return {}
    reader = _Reader(bytes(data))
    reader.int16()
    out: dict[str, list[int]] = {}
    for _ in range(reader.count()):
        topic = reader.string()
        out[topic] = [reader.int32() for _ in range(reader.count())]
    return out


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription v0 (topics and user data)."""
    names = list(topics)
    out = struct.pack(">hi", version, len(names)) + b"".join(_string(t) for t in names)
    return out + (struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)


def encode_assignment(assignment: Mapping[str, Iterable[int]], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(assignment))
    for topic, partitions in assignment.items():
        parts = list(partitions)
        out += _string(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + (struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)
