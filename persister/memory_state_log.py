"""`MemoryLog`: a RecordLog in a list, for InMemoryPersister and tests (no disk, durable at once).

Records are kept as encoded frames, exactly the bytes a durable log would hold, so everything that goes
through a MemoryLog also proves that it survives encoding; `read_all` decodes them again.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from .frame_codec import KeyTable, frame_codec
from .state_log_api import LogEntry
from .state_records import ShareRecord, StateKey, decode_record, encode_record

__all__ = ["MemoryLog", "AppendHook"]

# Called with the entries before an append; returning an exception makes that append fail with it.
AppendHook = Callable[[Sequence[tuple[StateKey, ShareRecord]]], BaseException | None]


class MemoryLog:
    """A RecordLog whose records live in a Python list; appends never suspend and are durable at once.

    `fail_hook`, when set, is asked before every `append`; if it returns an exception, the append raises
    it and stores nothing (InMemoryPersister uses this for its failure controls).
    """

    def __init__(self, *, fail_hook: AppendHook | None = None) -> None:
        self.fail_hook = fail_hook
        self._frames: list[bytes] = []  # frame of offset start_offset + i at index i
        self._start_offset = 0
        self._closed = False

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        return self._start_offset + len(self._frames)

    @property
    def closed(self) -> bool:
        return self._closed

    async def append(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Append all entries or none (the failure hook, then encoding, may refuse) and return their offsets."""
        self._check_open()
        if self.fail_hook is not None:
            failure = self.fail_hook(entries)
            if failure is not None:
                raise failure
        return self.append_now(entries)

    append.enqueue_equivalent = True  # `enqueue` does what `append` does (the coordinator checks this)

    async def wait_for_room(self) -> None:  # never needed: a MemoryLog is never full
        return None

    def enqueue(self, entries: Sequence[tuple[StateKey, ShareRecord]], frames: list[bytes], callback) -> bool:
        """`append` without the coroutine (the share coordinator's write path), for `frames` already
        encoded from `entries`: asks the failure hook, stores the frames and calls
        `callback(first_offset, None)`, or `callback(None, failure)`, before returning True (a
        MemoryLog is never full)."""
        self._check_open()
        if self.fail_hook is not None:
            failure = self.fail_hook(entries)
            if failure is not None:
                callback(None, failure)
                return True
        first = self.end_offset
        self._frames.extend(frames)
        callback(first, None)
        return True

    def append_now(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Synchronous append that bypasses the failure hook (for test set-up such as seeding)."""
        self._check_open()
        frames = [encode_record(key, record) for key, record in entries]  # encode all before storing any
        first = self.end_offset
        self._frames.extend(frames)
        return list(range(first, first + len(frames)))

    def read_all(self) -> Iterator[LogEntry]:
        """Decode every record held, as of the call, in offset order."""
        start, frames = self._start_offset, self._frames[:]
        for i, frame in enumerate(frames):
            key, record, _ = decode_record(frame)
            yield LogEntry(start + i, key, record)

    def read_rows(self, keys: KeyTable) -> Iterator[tuple[int, list]]:
        """`read_all` as one batch of decoded rows (first offset, rows), for the coordinator's replay;
        their keys are collected in `keys`."""
        start, buf = self._start_offset, b"".join(self._frames)
        rows, stop = frame_codec().decode_frames(buf, 0, len(buf), keys)
        if stop != len(buf):
            decode_record(buf, stop)  # raises the reason
            raise AssertionError(f"the frame codec refused a valid frame at byte {stop}")
        yield start, rows

    async def delete_below(self, offset: int) -> int:
        """Delete the records below `offset` (clamped to the log end); return the new start offset."""
        self._check_open()
        target = min(int(offset), self.end_offset)
        if target > self._start_offset:
            del self._frames[: target - self._start_offset]
            self._start_offset = target
        return self._start_offset

    def size_bytes(self) -> int:
        """Bytes of the frames held (what a durable log would keep on disk)."""
        return sum(map(len, self._frames))

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the MemoryLog is closed")

    def __len__(self) -> int:
        return len(self._frames)
