"""The per-key append pipeline of the share coordinator: key holds, appends, and replay on durability.

Operations on one key are serialised by a hold taken before validation and given up only once the
operation's record has been replayed (or its append failed), so two concurrent writes never both
validate against the same state, and a record that may be durable is always replayed before another
operation on the key validates. The pipeline holds no rules: the coordinator validates and builds the
record; the pipeline appends it, calls the coordinator's replay once it is durable, releases the key
and answers the caller.

It is built for many concurrent share-partitions on one event loop: a hold is a dict entry (a FIFO of
futures only when contended), and over a `BulkRecordLog` whose `enqueue` does what `append` does
(`MemoryLog`, `SegmentLog`) the record is queued with a callback that replays it and passes the hold on
as soon as it is durable, whether or not its caller is still waiting (no task per write). Over any
other RecordLog a shielded task per append does the same.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from typing import Callable

from sharegroup.errors import Errors, ShareError

from .state_log_api import BulkRecordLog, LogWriteError, RecordLog
from .state_records import ShareCheckpoint, ShareRecord, StateKey

__all__ = ["AppendPipeline", "write_error"]

Replay = Callable[[int, StateKey, ShareRecord, object], "ShareCheckpoint | None"]
Encode = Callable[[StateKey, ShareRecord, object], bytes]


class AppendPipeline:
    """Key holds and durable appends over one RecordLog, replaying each record with `replay(offset,
    key, record, key_state)` (which returns the key's state after it; `key_state` is what the caller of
    `append_and_replay` passed, or None) once the record is durable. `encode(key,
    record, key_state)` builds a record's frame for the fast path.

    `held` maps each held key to None, or to a FIFO of the futures of operations waiting for it;
    `append_floors` maps each append in flight to the log end offset when it began (pruning must stay
    below them); `queued` counts records enqueued and not yet replayed or failed.
    """

    def __init__(self, log: RecordLog, replay: Replay, encode: Encode) -> None:
        self._log = log
        self._replay = replay
        self._encode = encode
        self.held: dict[StateKey, collections.deque | None] = {}
        self.append_floors: dict[int, int] = {}  # token -> log end offset when that append began
        self._next_token = 0
        self._tasks: set[asyncio.Future] = set()  # append tasks over a log without the fast path
        self.queued = 0
        self._drained: asyncio.Future | None = None  # `drain` waits on it while `queued` > 0
        # The log's synchronous queueing entry point, used when it promises to do just what `append`
        # does (a subclass that overrides `append`, say to delay it, keeps the generic path).
        fast = isinstance(log, BulkRecordLog) and getattr(type(log).append, "enqueue_equivalent", False)
        self.enqueue = log.enqueue if fast else None

    @property
    def lowest_floor(self) -> int | None:
        """The lowest log end offset any append in flight began at, None when none is in flight."""
        return min(self.append_floors.values()) if self.append_floors else None

    # -- holding keys --------------------------------------------------------------------------------

    async def hold(self, key: StateKey) -> None:
        """Take the hold on `key`, waiting behind the operations that hold or await it (FIFO). The
        holder gives it up with `release`, or passes it to `append_and_replay`, which releases it once
        the record has been replayed or its append failed."""
        if key in self.held:
            await self.wait_for_key(key)
        else:
            self.held[key] = None

    async def wait_for_key(self, key: StateKey) -> None:
        """Queue behind the current holder of `key` (which must be held) until the hold is handed over."""
        waiters = self.held[key]
        if waiters is None:
            waiters = self.held[key] = collections.deque()
        waiter = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(key)  # the hold was handed over just as this waiter was cancelled: pass it on
            raise  # a cancelled waiter stays queued, done; `release` skips it

    def release(self, key: StateKey) -> None:
        """Give up the hold on `key`: hand it to the first waiter still waiting, or drop the entry."""
        waiters = self.held.pop(key)
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.held[key] = waiters
                return

    # -- appending and replaying -------------------------------------------------------------------

    async def append_and_replay(self, key: StateKey, record: ShareRecord, key_state=None) -> ShareCheckpoint | None:
        """Append `record` for `key`, whose hold the caller passes on; once it is durable, replay it and
        return the key's state after the replay. The hold is released only after the replay (or the
        failure of the append), even when the caller is cancelled meanwhile: a record that may be
        durable is always replayed before another operation on the key validates against the state.
        `key_state` is the key's current state, when the caller has it at hand (for `encode` and
        `replay`).
        """
        enqueue = self.enqueue
        if enqueue is None:
            return await self._append_in_task(key, record)
        token = -1
        try:
            frames = [self._encode(key, record, key_state)]
            waiter = asyncio.get_running_loop().create_future()
            token = self._next_token
            self._next_token = token + 1
            self.append_floors[token] = self._log.end_offset
            self.queued += 1
            entries = [(key, record)]
            appended = functools.partial(self._appended, key, record, token, waiter, key_state)
            queued = enqueue(entries, frames, appended)
        except BaseException as exc:
            self._unqueue(key, token)
            raise write_error(exc)
        if not queued:  # backpressure: the log's queue is full
            await self._enqueue_when_room(key, token, entries, frames, appended)
        # The frame of this coroutine keeps the write's objects until its caller resumes, so they are
        # freed one write at a time rather than all at once when the group commit completes, which
        # keeps the garbage collector's young generation (and its full collections) quiet under load.
        return await waiter

    async def _enqueue_when_room(self, key: StateKey, token: int, entries: list, frames: list, appended) -> None:
        """Wait for room in the log's queue and queue the record (`append_and_replay` under backpressure)."""
        try:
            while True:
                await self._log.wait_for_room()
                if self.enqueue(entries, frames, appended):
                    return
        except BaseException as exc:
            self._unqueue(key, token)
            raise write_error(exc)

    def _unqueue(self, key: StateKey, token: int) -> None:
        """Undo `append_and_replay`'s bookkeeping for a record that was not queued and release the key;
        nothing, when the log called back before raising (the callback released the key)."""
        if token == -1 or token in self.append_floors:
            if token != -1:
                del self.append_floors[token]
                self.queued -= 1
            self.release(key)

    def _appended(
        self,
        key: StateKey,
        record: ShareRecord,
        token: int,
        waiter: asyncio.Future,
        key_state,
        first_offset: int | None,
        error: BaseException | None,
    ) -> None:
        """The log's callback for a record queued by `append_and_replay`: replay it if it is durable,
        release the key and answer the caller, if it still waits."""
        state = None
        try:
            if error is None:
                state = self._replay(first_offset, key, record, key_state)
        except BaseException as exc:  # a replay that fails is a bug; the write must not look successful
            error = exc
        finally:
            del self.append_floors[token]
            self.release(key)
            self.queued -= 1
            if self.queued == 0 and self._drained is not None and not self._drained.done():
                self._drained.set_result(None)
        if waiter.done():  # the caller was cancelled: it asked not to hear the outcome
            return
        if error is None:
            waiter.set_result(state)
        elif isinstance(error, asyncio.CancelledError):
            waiter.cancel()
        else:
            waiter.set_exception(write_error(error))

    async def _append_in_task(self, key: StateKey, record: ShareRecord) -> ShareCheckpoint | None:
        """`append_and_replay` over a log without the fast path: a task appends, replays and releases
        the key; it is shielded, and a cancelled caller still waits for it before it lets go."""
        task = asyncio.ensure_future(self._commit(key, record))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            while not task.done():
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    pass
            if not task.cancelled():
                task.exception()  # retrieved: the caller's cancellation is what it asked for
            raise

    async def _commit(self, key: StateKey, record: ShareRecord) -> ShareCheckpoint | None:
        token = self._next_token
        self._next_token += 1
        self.append_floors[token] = self._log.end_offset
        try:
            try:
                offsets = await self._log.append([(key, record)])
            except Exception as exc:
                raise write_error(exc)
            if len(offsets) != 1:
                raise AssertionError(f"log returned {len(offsets)} offsets for 1 record")
            return self._replay(offsets[0], key, record, None)
        finally:
            del self.append_floors[token]
            self.release(key)

    async def drain(self) -> None:
        """Wait until every append in flight has been replayed or has failed."""
        while self.queued:
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _check(self, log_start_offset: int) -> None:
        """Assert the pipeline's invariants (the coordinator's `_check` calls it)."""
        assert all(floor >= log_start_offset for floor in self.append_floors.values()), "pruned past an append"
        for key, waiters in self.held.items():
            assert waiters is None or type(waiters) is collections.deque, (key, waiters)
        assert self.queued >= 0 and (self.enqueue is not None or self.queued == 0)
        assert len(self.append_floors) >= self.queued


def write_error(exc: BaseException) -> BaseException:
    """How a failed append reaches the caller: a ShareError as it is; a storage fault of the log
    (LogWriteError) as NOT_COORDINATOR, as Kafka's share coordinator answers KAFKA_STORAGE_ERROR from
    its state topic (the share-partition leader then reports COORDINATOR_NOT_AVAILABLE); any other
    error as UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, ShareError) or not isinstance(exc, Exception):
        return exc
    if isinstance(exc, LogWriteError):
        error = ShareError(Errors.NOT_COORDINATOR, f"Unable to write share group state: KAFKA_STORAGE_ERROR: {exc}")
    else:
        error = ShareError(Errors.UNKNOWN_SERVER_ERROR, f"Unable to write share group state: {exc!r}")
    error.__cause__ = exc
    return error
