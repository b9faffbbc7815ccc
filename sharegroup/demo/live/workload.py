"""What the live demo's clients produce and how its consumers treat each record (plain data, no I/O).

The producer writes orders: key `order-NNNNNN`, a JSON value and three headers. A record's kind is a
pure function of (seed, sequence number), and a consumer decides its acknowledgement from the record's
content and delivery count alone, as an application would, so every process decides the same way:

- a normal order is accepted;
- a "flaky" order fails on its first delivery (a transient failure: RELEASE) and is accepted later;
- a malformed record (a value that is not JSON) is rejected at once (REJECT: never delivered again);
- a "poison" order fails every time (RELEASE), until the broker archives it at the delivery count limit.

`record_digest` is what producer and consumers compare to check keys, values and headers byte-exact.
"""

from __future__ import annotations

import enum
import json
import zlib
from typing import Any, Sequence

from ...types import AcknowledgeType
from ..hashing import rate_threshold, stable_hash64

__all__ = ["LiveRates", "RecordKind", "ack_for", "kind_of", "make_record", "record_digest"]

_SALT_KIND = 11  # keeps this hash apart from the simulated demo's decisions


class RecordKind(enum.IntEnum):
    NORMAL = 0
    FLAKY = 1  # released on its first delivery, accepted on a later one
    MALFORMED = 2  # rejected
    POISON = 3  # released on every delivery: archived at the delivery count limit


class LiveRates:
    """How often each kind occurs (fractions of the records produced)."""

    def __init__(self, flaky: float = 0.03, malformed: float = 0.01, poison: float = 0.002) -> None:
        for name, rate in (("flaky", flaky), ("malformed", malformed), ("poison", poison)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} rate must be in [0, 1], got {rate!r}")
        if flaky + malformed + poison > 1.0:
            raise ValueError("the rates add up to more than 1")
        self.flaky = flaky
        self.malformed = malformed
        self.poison = poison

    def __repr__(self) -> str:
        return f"LiveRates(flaky={self.flaky}, malformed={self.malformed}, poison={self.poison})"


def kind_of(seed: int, sequence: int, rates: LiveRates) -> RecordKind:
    """The kind of the record with this sequence number (the same in every process and run)."""
    h = stable_hash64(seed, _SALT_KIND, sequence)
    limit = 0
    for kind, rate in ((RecordKind.POISON, rates.poison), (RecordKind.MALFORMED, rates.malformed),
                       (RecordKind.FLAKY, rates.flaky)):
        limit += rate_threshold(rate)
        if h < limit:
            return kind
    return RecordKind.NORMAL


def make_record(sequence: int, kind: RecordKind) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of one order."""
    key = b"order-%06d" % sequence
    if kind == RecordKind.MALFORMED:
        value = b"\xff\xfe not an order %d" % sequence
    else:
        order: dict[str, Any] = {"order": sequence, "customer": sequence % 997, "amount_cents": 100 + sequence % 9_900}
        if kind == RecordKind.FLAKY:
            order["note"] = "flaky"
        elif kind == RecordKind.POISON:
            order["note"] = "poison"
        value = json.dumps(order, separators=(",", ":")).encode()
    headers = [("source", b"sharegroup-demo"), ("sequence", b"%d" % sequence), ("kind", kind.name.lower().encode())]
    return key, value, headers


def ack_for(value: bytes | None, delivery_count: int) -> AcknowledgeType:
    """The consumer application's decision: decided from the record as delivered, never from the seed."""
    try:
        order = json.loads(value) if value is not None else None
    except (UnicodeDecodeError, ValueError):
        return AcknowledgeType.REJECT
    if not isinstance(order, dict):
        return AcknowledgeType.REJECT
    note = order.get("note")
    if note == "poison" or (note == "flaky" and delivery_count <= 1):
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def record_digest(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> int:
    """A CRC-32 over key, value and headers, with lengths, so that any change of any byte shows."""
    crc = 0
    for part in (key, value):
        crc = zlib.crc32(b"-" if part is None else b"%d:" % len(part) + part, crc)
    for name, data in headers or ():
        crc = zlib.crc32(name.encode() + (b"=-" if data is None else b"=%d:" % len(data) + data), crc)
    return crc
