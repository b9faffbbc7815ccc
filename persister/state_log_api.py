"""The record log the share coordinator writes to: the `RecordLog` and `BulkRecordLog` protocols,
`LogEntry`, `CorruptLogError` and `LogWriteError`.

The coordinator owns the rules and the decision of which offset is redundant; a log only stores framed
records at increasing offsets, says when they are durable and deletes prefixes. `MemoryLog`
keeps them in a list; the durable segment log keeps them in checksummed segment files.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Protocol, Sequence, runtime_checkable

from .frame_rows import KeyTable
from .state_records import ShareRecord, StateKey

__all__ = ["LogEntry", "RecordLog", "BulkRecordLog", "AppendCallback", "CorruptLogError", "LogWriteError"]

AppendCallback = Callable[[int | None, BaseException | None], None]
"""Hears an enqueued append's outcome: (first offset, None) once durable, or (None, the error)."""


class LogWriteError(OSError):
    """A storage fault of a log (Kafka's KAFKA_STORAGE_ERROR): an append or prune that failed, its group
    commit not written or not fsync'd (nothing of it stays in the log), or the log offline after such a
    fault, or closed."""


class LogEntry(NamedTuple):
    """One record of the log at its offset; `record` None is a tombstone."""

    offset: int
    key: StateKey
    record: ShareRecord


@runtime_checkable
class RecordLog(Protocol):
    """An append-only log of (key, record) pairs at consecutive offsets from `start_offset`."""

    @property
    def start_offset(self) -> int:
        """Offset of the first record still held (everything below was deleted)."""
        ...

    @property
    def end_offset(self) -> int:
        """Offset the next appended record will get (exclusive end of the log)."""
        ...

    async def append(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Append the entries in order, all or none; resolve with their offsets once they are durable."""
        ...

    def read_all(self) -> Iterator[LogEntry]:
        """Every record from `start_offset` to `end_offset` (as of the call), in offset order."""
        ...

    async def delete_below(self, offset: int) -> int:
        """Delete records below `offset` (a log may keep some, e.g. whole segments); return the new
        `start_offset`, which never exceeds `offset` and never moves backwards."""
        ...

    async def close(self) -> None:
        """Release the log; later appends fail."""
        ...


@runtime_checkable
class BulkRecordLog(RecordLog, Protocol):
    """The fast paths of a RecordLog that the share coordinator uses when a log offers them (`MemoryLog`
    and `SegmentLog` do): queueing an append without a coroutine, and replaying from decoded rows.

    The coordinator takes `enqueue` only when `type(log).append.enqueue_equivalent` is true: a subclass
    that overrides `append` (to delay or fail it, say) keeps the generic path through `append`.
    """

    def enqueue(
        self, entries: Sequence[tuple[StateKey, ShareRecord]], frames: list[bytes], callback: AppendCallback
    ) -> bool:
        """Queue `frames` (the encoded `entries`) as one append, all or none; `callback` hears the
        outcome exactly once, possibly before this returns. False when the log is full: nothing was
        queued; await `wait_for_room()` and call again. Raises when the log refuses appends (closed
        or failed); then the callback is not called."""
        ...

    async def wait_for_room(self) -> None:
        """Wait until `enqueue` may succeed again (backpressure)."""
        ...

    def read_rows(self, keys: KeyTable) -> Iterator[tuple[int, list]]:
        """`read_all` as batches (first offset, decoded rows) in the layout of `persister.frame_rows`,
        their keys collected in `keys`; what the coordinator replays on open."""
        ...


class CorruptLogError(Exception):
    """A record in the log that fails its checks and is not a torn tail; recovery refuses to go on."""

    def __init__(self, path: str | None, offset: int | None, reason: str = "") -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        where = f"{path}" if path is not None else "the log"
        at = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"corrupt record in {where}{at}" + (f": {reason}" if reason else ""))

    def __reduce__(self):  # keep .path and .offset across pickling (multiprocessing, Spark)
        return (CorruptLogError, (self.path, self.offset, self.reason))
