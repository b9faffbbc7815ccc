"""Type stub of the Cython twin (`_native/tracker.pyx`): it claims `sharegroup.tracker.InFlightTrackerProtocol`.

The pure twin `sharegroup.tracker._in_flight.InFlightTracker` has the same names, signatures and behaviour.
"""

from typing import Sequence, final

from sharegroup.tracker import InFlightTrackerProtocol
from sharegroup.types import AcquiredRecords, RecordView, StateBatch, TrackerWrite

__all__ = ["InFlightTracker"]

def record_state_ids() -> tuple[int, int, int, int]:
    """The record state ids compiled into the module, in `RecordState` order."""

def acknowledge_type_ids() -> tuple[int, int, int, int, int]:
    """The acknowledge type ids compiled into the module, in `AcknowledgeType` order."""

@final
class InFlightTracker(InFlightTrackerProtocol):
    """In-flight records of one share-partition: acquisition, acknowledgement, locks, SPSO/SPEO.

    The offsets and counts are read-only properties here, as in the pure twin.
    """

    def __init__(
        self,
        start_offset: int = 0,
        *,
        record_lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        partition_max_record_locks: int = 2_000,
        record_limit_mode: bool = False,
    ) -> None: ...
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def in_flight_count(self) -> int: ...
    @property
    def delivery_complete_count(self) -> int: ...
    @property
    def pending_transitions(self) -> int: ...
    @property
    def record_lock_duration_ms(self) -> int: ...
    @property
    def delivery_count_limit(self) -> int: ...
    def reset(self, start_offset: int) -> None: ...
    def load(self, start_offset: int, state_batches: Sequence[Sequence[int]]) -> None: ...
    def next_fetch_offset(self) -> int: ...
    def next_lock_deadline_ms(self) -> int: ...
    def record_state(self, offset: int) -> RecordView | None: ...
    def state_batches(self) -> list[StateBatch]: ...
    def acquire(
        self,
        member_id: str,
        fetched: Sequence[Sequence],
        max_records: int,
        now_ms: int,
        fetch_offset: int = -1,
        batch_size: int = 0,
        aborted_transactions: Sequence = (),
        read_committed: bool = False,
    ) -> list[AcquiredRecords]: ...
    def begin_acknowledge(self, member_id: str, batches: Sequence[Sequence], now_ms: int) -> TrackerWrite: ...
    def begin_release(self, member_id: str, now_ms: int) -> TrackerWrite: ...
    def complete(self, transition_id: int, committed: bool, now_ms: int) -> None: ...
    def expire_locks(self, now_ms: int) -> tuple[int, TrackerWrite]: ...
    def update_log_start_offset(self, log_start_offset: int) -> None: ...
    def _check(self) -> None: ...
