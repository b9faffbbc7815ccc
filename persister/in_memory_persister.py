"""`InMemoryPersister`: the ShareCoordinator over a MemoryLog, with controls for tests.

It is the test double for everything above layer 2, and never a second copy of the rules: every call
goes through the same coordinator as the durable persister. The controls only decide *whether* and
*when* a request reaches it: injected failures, paused writes, a record of the write requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from typing import NamedTuple, Sequence

from sharegroup.clock import Clock, SystemClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import PartitionState, StateBatch, StateSummary

from .coordinator_persister import CoordinatorPersister
from .memory_state_log import MemoryLog
from .share_coordinator import ShareCoordinator
from .state_records import ShareRecord, StateKey

__all__ = ["InMemoryPersister", "WriteRequest"]

# The error an injected write failure makes the log append raise; set only for the duration of the
# write_state call it was drawn for (the coordinator's append task inherits the context).
_injected_write_error: contextvars.ContextVar[Errors | None] = contextvars.ContextVar(
    "sharegroup_injected_write_error", default=None
)


class WriteRequest(NamedTuple):
    """One write_state call as the persister received it (before validation, pause or failure)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch]
    delivery_complete_count: int


class _Failures:
    """The next `remaining` calls of one kind fail with `error`."""

    __slots__ = ("remaining", "error")

    def __init__(self) -> None:
        self.remaining = 0
        self.error = Errors.UNKNOWN_SERVER_ERROR

    def arm(self, n: int, error: Errors | int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        self.remaining, self.error = n, Errors(error)

    def take(self) -> Errors | None:
        if self.remaining == 0:
            return None
        self.remaining -= 1
        return self.error


class InMemoryPersister(CoordinatorPersister):
    """A Persister backed by a ShareCoordinator over a MemoryLog (no disk), with test controls.

    Controls: `seed` writes a checkpoint directly; `state_of` shows the durable state (completed
    writes only); `writes` lists every write_state request received, in order, including ones that
    later fail or wait; `fail_next_writes` makes the next n writes fail at the log append (after
    validation, so state is untouched); `fail_next_reads` makes the next n read_state/read_summary calls
    fail before reaching the coordinator; `pause_writes` holds writes received until `resume_writes`.
    """

    def __init__(
        self,
        snapshot_update_records_per_snapshot: int = 500,
        clock: Clock = SystemClock(),
        *,
        cold_checkpoint_interval_ms: int = 300_000,
    ) -> None:
        self.log = MemoryLog(fail_hook=self._fail_hook)
        self.coordinator = ShareCoordinator(
            self.log,
            snapshot_update_records_per_snapshot=snapshot_update_records_per_snapshot,
            cold_checkpoint_interval_ms=cold_checkpoint_interval_ms,
            clock=clock,
        )
        self._writes: list[WriteRequest] = []
        self._write_failures = _Failures()
        self._read_failures = _Failures()
        self._initialize_failures = _Failures()
        self._delete_failures = _Failures()
        self._paused = False
        self._pause_waiters: list[asyncio.Future] = []

    # -- the Persister protocol --------------------------------------------------------------------

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int, start_offset: int
    ) -> None:
        _raise_if(self._initialize_failures.take(), "initialize")
        await super().initialize_state(group_id, topic_id, partition, state_epoch=state_epoch,
                                       start_offset=start_offset)

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> PartitionState:
        _raise_if(self._read_failures.take(), "read")
        return await super().read_state(group_id, topic_id, partition, leader_epoch=leader_epoch)

    async def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: Sequence[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        self._writes.append(
            WriteRequest(
                group_id,
                topic_id,
                partition,
                state_epoch,
                leader_epoch,
                start_offset,
                _as_batches(state_batches),
                delivery_complete_count,
            )
        )
        error = self._write_failures.take()
        while self._paused:
            waiter = asyncio.get_running_loop().create_future()
            self._pause_waiters.append(waiter)
            await waiter
        token = _injected_write_error.set(error)
        try:
            await super().write_state(
                group_id,
                topic_id,
                partition,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                state_batches=state_batches,
                delivery_complete_count=delivery_complete_count,
            )
        finally:
            _injected_write_error.reset(token)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        _raise_if(self._delete_failures.take(), "delete")
        await super().delete_state(group_id, topic_id, partition)

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> StateSummary:
        _raise_if(self._read_failures.take(), "read")
        return await super().read_summary(group_id, topic_id, partition, leader_epoch=leader_epoch)

    async def close(self) -> None:
        """Close the coordinator and its log; later calls fail with COORDINATOR_NOT_AVAILABLE."""
        self.resume_writes()
        await self.coordinator.close()
        await self.log.close()

    # -- test controls -----------------------------------------------------------------------------

    def seed(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        state_epoch: int,
        start_offset: int,
        state_batches: Sequence[StateBatch],
        leader_epoch: int = 0,
        delivery_complete_count: int = -1,
    ) -> None:
        """Write a checkpoint of this state directly (no fencing, no controls); usable outside a loop."""
        self.coordinator._seed(
            group_id,
            topic_id,
            partition,
            state_epoch=state_epoch,
            start_offset=start_offset,
            state_batches=state_batches,
            leader_epoch=leader_epoch,
            delivery_complete_count=delivery_complete_count,
        )

    @property
    def writes(self) -> list[WriteRequest]:
        """Every write_state request received, in order (a list the test may clear)."""
        return self._writes

    def fail_next_writes(self, n: int, error: Errors | int = Errors.UNKNOWN_SERVER_ERROR) -> None:
        """The next `n` write_state calls fail with `error` when they append (replaces earlier arming)."""
        self._write_failures.arm(n, error)

    def fail_next_reads(self, n: int, error: Errors | int = Errors.UNKNOWN_SERVER_ERROR) -> None:
        """The next `n` read_state / read_summary calls fail with `error` before reaching the coordinator."""
        self._read_failures.arm(n, error)

    def fail_next_initializes(self, n: int, error: Errors | int = Errors.UNKNOWN_SERVER_ERROR) -> None:
        """The next `n` initialize_state calls fail with `error` before reaching the coordinator."""
        self._initialize_failures.arm(n, error)

    def fail_next_deletes(self, n: int, error: Errors | int = Errors.UNKNOWN_SERVER_ERROR) -> None:
        """The next `n` delete_state calls fail with `error` before reaching the coordinator."""
        self._delete_failures.arm(n, error)

    def pause_writes(self) -> None:
        """Hold every write_state received from now on (recorded in `writes`, pending) until resumed."""
        self._paused = True

    def resume_writes(self) -> None:
        """Let the held writes go on, in the order they were received."""
        self._paused = False
        waiters, self._pause_waiters = self._pause_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def paused(self) -> bool:
        return self._paused

    def _fail_hook(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> BaseException | None:
        error = _injected_write_error.get()
        return None if error is None else ShareError(error, "injected write failure")


def _raise_if(error: Errors | None, operation: str) -> None:
    if error is not None:
        raise ShareError(error, f"injected {operation} failure")


def _as_batches(batches) -> list:
    """The request's batches as StateBatch where they have that shape, else as given (for `writes`)."""
    try:
        return [batch if type(batch) is StateBatch else StateBatch(*batch) for batch in batches]
    except TypeError:
        return list(batches) if isinstance(batches, (list, tuple)) else batches
