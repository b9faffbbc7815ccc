"""What the demo's simulated clients do: `ConsumerBehaviour` (the rates) and `Workload`, whose every
decision is a pure function of the seed and of what it decides about.

Decisions are hashes, not draws from a shared random stream, so one decision never shifts another:
a record's kind depends only on (seed, partition, offset), a consumer's acknowledgement of it only on
(seed, partition, offset, delivery count), a crash only on (seed, consumer, incarnation, poll). Two runs
with the same seed therefore make the same decisions whatever order their tasks happen to run in.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import uuid

from ...types import AcknowledgeType
from ..hashing import rate_threshold, stable_hash64

__all__ = ["ConsumerBehaviour", "RecordKind", "Workload"]

GROUP_ID = "demo-group"
TOPIC_NAME = "demo-orders"

# The simulated clients' timing, in simulated milliseconds. Wake-ups are rounded up to TICK_MS, so
# consumers that finish at about the same time acknowledge together and their writes share a group commit.
TICK_MS = 20
PRODUCE_INTERVAL_MS = 20
PRODUCER_BATCH_MAX_RECORDS = 16
RECORD_SIZE_BYTES = 100  # each record's share of its batch's size in the log
MAX_POLL_RECORDS = 500  # the consumer's max.poll.records
POLL_OVERHEAD_MS = 4
RECORD_PROCESSING_US = 100
FETCH_MAX_WAIT_MS = 500  # the consumer's fetch.max.wait.ms: how long the broker may hold a fetch
RESTART_DELAY_MS = 3_000  # a crashed consumer comes back as a new member after this


class _Salt(enum.IntEnum):
    """Keeps the hashes of different decisions about the same thing independent."""

    RECORD_KIND = 1
    RELEASE = 2
    POISON_CRASH = 3
    CONSUMER_CRASH = 4
    MEMBER_ID = 5
    PRODUCER = 6


class RecordKind(enum.IntEnum):
    """What a produced record is, for the consumers that process it."""

    NORMAL = 0
    POISON = 1  # processing always fails: released on every delivery (or it crashes the consumer)
    MALFORMED = 2  # rejected at once


@dataclasses.dataclass(frozen=True)
class ConsumerBehaviour:
    """How the simulated consumers treat records; decisions are a function of the seed and the record.

    - `release_rate`: a delivery fails transiently and the consumer releases the record (redelivered);
    - `malformed_rate`: records a consumer rejects at once (archived, reason "rejected");
    - `poison_rate`: records whose processing always fails: released on every delivery, so they reach
      the delivery count limit and are archived ("delivery_limit");
    - `poison_crash_rate`: the chance that a delivery of a poison record crashes the consumer instead
      (then the lock expires; on the last allowed delivery the record is archived, "lock_expiry");
    - `crash_rate`: the chance that a consumer crashes while it processes what a poll returned.
    """

    release_rate: float = 0.02
    malformed_rate: float = 0.002
    poison_rate: float = 0.001
    poison_crash_rate: float = 0.1
    crash_rate: float = 0.002

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{field.name} must be a number in [0, 1], got {value!r}")
        if self.malformed_rate + self.poison_rate > 1.0:
            raise ValueError("malformed_rate + poison_rate must not exceed 1")


class Workload:
    """The decisions of the demo's producer and consumers for one seed. Every method is O(1)."""

    def __init__(self, seed: int, behaviour: ConsumerBehaviour) -> None:
        self.seed = seed
        self.behaviour = behaviour
        self._poison_below = rate_threshold(behaviour.poison_rate)
        self._malformed_below = self._poison_below + rate_threshold(behaviour.malformed_rate)
        self._release_below = rate_threshold(behaviour.release_rate)
        self._poison_crash_below = rate_threshold(behaviour.poison_crash_rate)
        self._consumer_crash_below = rate_threshold(behaviour.crash_rate)

    def producer_random(self) -> random.Random:
        """The producer's random stream (batch sizes): it runs alone, so a stream is deterministic."""
        return random.Random(stable_hash64(self.seed, _Salt.PRODUCER))

    def record_kind(self, partition: int, offset: int) -> RecordKind:
        h = stable_hash64(self.seed, _Salt.RECORD_KIND, partition, offset)
        if h < self._poison_below:
            return RecordKind.POISON
        if h < self._malformed_below:
            return RecordKind.MALFORMED
        return RecordKind.NORMAL

    def acknowledge_type(self, kind: int, partition: int, offset: int, delivery_count: int) -> AcknowledgeType:
        """How a consumer that processed this delivery acknowledges it."""
        if kind == RecordKind.POISON:
            return AcknowledgeType.RELEASE
        if kind == RecordKind.MALFORMED:
            return AcknowledgeType.REJECT
        h = stable_hash64(self.seed, _Salt.RELEASE, partition, offset, delivery_count)
        return AcknowledgeType.RELEASE if h < self._release_below else AcknowledgeType.ACCEPT

    def poison_crashes_consumer(self, partition: int, offset: int, delivery_count: int) -> bool:
        """Whether this delivery of a poison record crashes the consumer processing it."""
        h = stable_hash64(self.seed, _Salt.POISON_CRASH, partition, offset, delivery_count)
        return h < self._poison_crash_below

    def consumer_crashes(self, consumer: int, incarnation: int, poll: int) -> bool:
        """Whether a consumer crashes while it processes what its `poll`-th share fetch returned."""
        h = stable_hash64(self.seed, _Salt.CONSUMER_CRASH, consumer, incarnation, poll)
        return h < self._consumer_crash_below

    def member_id(self, consumer: int, incarnation: int) -> str:
        """The member id a consumer joins with (a UUID, as Kafka's clients generate), new per incarnation."""
        high = stable_hash64(self.seed, _Salt.MEMBER_ID, consumer, incarnation)
        low = stable_hash64(self.seed, _Salt.MEMBER_ID, consumer, incarnation, 1)
        return str(uuid.UUID(int=(high << 64) | low, version=4))
