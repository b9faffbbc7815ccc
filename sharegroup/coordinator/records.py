"""The group coordinator's records and where they go (Kafka's group records in __consumer_offsets).

Every change of a group is a list of `Record(key, value)` appended to a `RecordSink`; applying the
records is the only way the coordinator's in-memory state moves, so rebuilding from `read_all()` after
a restart is the same code path as normal operation. A `value` of None is a tombstone: it deletes what
its key names. As in Kafka's `__consumer_offsets`, the state is a function of the latest record of each
key, so a sink may compact: keep only the latest record of every key, in the order of those latest
records, and drop tombstones (`compact`); replaying the compacted records builds the same groups. Keys and values are immutable tuples of plain data (str, int, UUID, tuples), so a
durable sink can encode them as they are. Each key carries Kafka's record type (`record_type`, the
apiKey of the record in __consumer_offsets); keys are frozen dataclasses rather than tuples so that
keys of different record types never compare equal. Each group type defines its own keys and values:
`share/records.py`, `consumer/records.py`, `classic/records.py` (classic groups and committed offsets).
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Iterable, NamedTuple, Protocol, Sequence, runtime_checkable

from ..errors import Errors, ShareError

__all__ = [
    "TopicPartitions",
    "RecordKey",
    "Record",
    "RecordSink",
    "MemoryRecordSink",
    "compact",
]


class TopicPartitions(NamedTuple):
    """Partitions of one topic, ascending (an assignment entry)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


class RecordKey(Protocol):
    """What every record key is: a frozen dataclass naming its group, with Kafka's record type."""

    record_type: ClassVar[int]

    @property
    def group_id(self) -> str: ...


class Record(NamedTuple):
    """One change: a key and its new value (a NamedTuple of the key's value type), or None (a tombstone)."""

    key: RecordKey
    value: tuple | None


# -- sinks ---------------------------------------------------------------------------------------------


def compact(records: Iterable[Record]) -> list[Record]:
    """The latest record of every key, in the order those latest records were appended, tombstones
    dropped: what Kafka's log cleaner leaves of `__consumer_offsets` once a deletion is compacted."""
    latest: dict[Any, Record] = {}
    for record in records:
        latest.pop(record.key, None)  # re-inserted below: the dict keeps the order of latest appends
        if record.value is not None:
            latest[record.key] = record
    return list(latest.values())


@runtime_checkable
class RecordSink(Protocol):
    """Where the coordinator's records go. `append` completes once the records are durable (for a
    durable sink) and raises on failure, in which case none of them count (a failed disk raises
    ShareError(KAFKA_STORAGE_ERROR); the coordinator answers with Kafka's code for it). `read_all`
    returns what replays to the current state: every appended record in order, or, for a compacting
    sink, `compact` of them."""

    async def append(self, records: Sequence[Record]) -> None: ...

    def read_all(self) -> list[Record]: ...


class MemoryRecordSink:
    """Records kept in a list; `fail_next_appends` makes appends fail for tests."""

    def __init__(self) -> None:
        self._records: list[Record] = []
        self._failures_left = 0
        self._failure = Errors.UNKNOWN_SERVER_ERROR
        self.appends = 0  # successful append calls, for tests and benchmarks

    async def append(self, records: Sequence[Record]) -> None:
        if self._failures_left > 0:
            self._failures_left -= 1
            raise ShareError(self._failure, "injected record append failure")
        self._records.extend(records)
        self.appends += 1

    def read_all(self) -> list[Record]:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def fail_next_appends(self, n: int, error: Errors | int = Errors.KAFKA_STORAGE_ERROR) -> None:
        """The next `n` appends fail with ShareError(error) and store nothing."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        self._failures_left, self._failure = n, Errors(error)
