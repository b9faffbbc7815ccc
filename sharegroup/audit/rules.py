"""The audit's invariants over one share-partition's record stream, written once and run everywhere.

`KeyAuditor` replays one key's checkpoints, deltas and tombstones in log order with the share
coordinator's own replay (`persister.apply_record` on a `persister.KeyState`: there is one set of
replay rules, shared), and checks the invariants (`Rule`) around each record: before applying it
against the state so far, and after it where the rule is about the result (a terminal offset that
becomes AVAILABLE or ACQUIRED again, too many deltas since a checkpoint). The Spark executors and the
single-process replay (`single_process.py`) both feed it the rows that `decode.py` produces, so every rule
exists once.

A row is `(log_offset, record)`: a `persister.ShareCheckpoint`, a `persister.ShareDelta`, or None for a
tombstone, as `persister.state_records.decode_record` returns them.

The replay never refuses a record: a record that breaks a rule is reported and then applied the way
the coordinator applies it, so the replayed final state equals the coordinator's recovery of the same
log even when the log is wrong (only a corrupt frame stops the coordinator from opening it).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Iterable, NamedTuple, Sequence

from persister.state_records import ShareCheckpoint, ShareDelta
from persister.state_replay import KeyState, apply_record
from persister.request_validation import RECORDS_PER_SNAPSHOT_DEFAULT, RECORDS_PER_SNAPSHOT_MAX
from sharegroup.types import DELIVERY_COUNT_MAX, RECORD_STATE_IDS, TERMINAL_STATE_IDS, RecordState, StateBatch

_NOT_TERMINAL_STATE_IDS = RECORD_STATE_IDS - TERMINAL_STATE_IDS
_ARCHIVING_STATE_IDS = frozenset({int(RecordState.ARCHIVING)})
# States a record leaves its terminal or ARCHIVING state for only through a bug: AVAILABLE and ACQUIRED.
_LIVE_STATE_IDS = frozenset({int(RecordState.AVAILABLE), int(RecordState.ACQUIRED)})

__all__ = [
    "Rule",
    "RULE_DESCRIPTIONS",
    "AuditOptions",
    "FinalState",
    "KeyResult",
    "KeyAuditor",
    "audit_key",
    "DELIVERY_COUNT_LIMIT_DEFAULT",
    "RECORDS_PER_SNAPSHOT_DEFAULT",
]


# Kafka's group.share.delivery.count.limit is at most 10, so a valid log passes under any valid group
# configuration with the default; pass the group's own limit for a tighter check.
DELIVERY_COUNT_LIMIT_DEFAULT = 10

# A key's start-offset progress keeps at most this many points for the picture (every change is kept
# until then; beyond it the series is thinned evenly, always keeping the last point).
PROGRESS_POINTS_MAX = 512


class Rule(enum.StrEnum):
    """The name of each invariant; a Violation carries one."""

    FRAME = "frame"
    RECORD = "record"
    SEGMENTS = "segments"
    CHECKPOINT_EPOCH = "checkpoint-epoch"
    DELTA_EPOCH = "delta-epoch"
    START_OFFSET = "start-offset"
    STATE_EPOCH = "state-epoch"
    LEADER_EPOCH = "leader-epoch"
    BATCHES = "batches"
    DELIVERY_COUNT = "delivery-count"
    TERMINAL = "terminal-available"
    DELTAS_BETWEEN_CHECKPOINTS = "deltas-between-checkpoints"


RULE_DESCRIPTIONS: dict[Rule, str] = {
    Rule.FRAME: "every frame has a valid length, CRC, type and version (a torn tail of the last segment "
    "is tolerated, as recovery truncates it)",
    Rule.RECORD: "every well-framed record decodes to a checkpoint, delta or tombstone",
    Rule.SEGMENTS: "segment files follow each other without gaps and the log start offset is readable and "
    "inside the log",
    Rule.CHECKPOINT_EPOCH: "a key's checkpoint epochs never decrease",
    Rule.DELTA_EPOCH: "every delta belongs to its key's current checkpoint epoch",
    Rule.START_OFFSET: "the start offset never moves backwards, except at a re-initialization",
    Rule.STATE_EPOCH: "the state epoch never decreases",
    Rule.LEADER_EPOCH: "the leader epoch never decreases, except at a re-initialization",
    Rule.BATCHES: "state batches are sorted, disjoint and carry a record state (0, 1, 2, 3 or 4)",
    Rule.DELIVERY_COUNT: "delivery counts stay within the delivery count limit",
    Rule.TERMINAL: "an ACKNOWLEDGED or ARCHIVED offset never becomes AVAILABLE, ACQUIRED or ARCHIVING again, "
    "and an ARCHIVING one (awaiting its dead-letter write) only becomes ARCHIVED (until a re-initialization "
    "resets the share-partition)",
    Rule.DELTAS_BETWEEN_CHECKPOINTS: "no more than N deltas lie between two checkpoints of a key",
}


@dataclasses.dataclass(frozen=True, slots=True)
class AuditOptions:
    """The limits the audit checks against.

    `delivery_count_limit` is the share group's `group.share.delivery.count.limit` (Kafka allows
    2..10; the default 10 passes every valid configuration); `snapshot_update_records_per_snapshot` is
    the coordinator's N (0..500, default 500): the most deltas allowed between two checkpoints.
    """

    delivery_count_limit: int = DELIVERY_COUNT_LIMIT_DEFAULT
    snapshot_update_records_per_snapshot: int = RECORDS_PER_SNAPSHOT_DEFAULT

    def __post_init__(self) -> None:
        limit = self.delivery_count_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= DELIVERY_COUNT_MAX:
            raise ValueError(f"delivery_count_limit must be an int in [1, {DELIVERY_COUNT_MAX}], not {limit!r}")
        n = self.snapshot_update_records_per_snapshot
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= RECORDS_PER_SNAPSHOT_MAX:
            raise ValueError(
                f"snapshot_update_records_per_snapshot must be an int in [0, {RECORDS_PER_SNAPSHOT_MAX}], not {n!r}"
            )


class FinalState(NamedTuple):
    """A live key's state after replay, in a plain comparable form (no timestamps)."""

    checkpoint_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]

    @classmethod
    def from_checkpoint(cls, checkpoint) -> FinalState:
        """The same form from a `persister.ShareCheckpoint` (e.g. `ShareCoordinator.state(key)`)."""
        return cls(
            checkpoint.checkpoint_epoch,
            checkpoint.state_epoch,
            checkpoint.leader_epoch,
            checkpoint.start_offset,
            checkpoint.delivery_complete_count,
            tuple(StateBatch(*b) for b in checkpoint.state_batches),
        )


@dataclasses.dataclass(slots=True)
class KeyResult:
    """What auditing one key's stream produced; small, so it travels back from a Spark executor.

    `key` is the decoded `persister.StateKey`; `violations` are (log_offset, rule, detail) tuples in log
    order; `final` is None when the key ends deleted; `replay` is everything the replay derived,
    `persister.KeyState.dump()` (for cross-checks with the coordinator's recovery); `progress` is
    (log_offset, start_offset) points for the picture.
    """

    key: tuple
    records: int = 0
    checkpoints: int = 0
    deltas: int = 0
    tombstones: int = 0
    first_offset: int = -1
    last_offset: int = -1
    violations: list = dataclasses.field(default_factory=list)
    final: FinalState | None = None
    replay: tuple | None = None
    progress: list = dataclasses.field(default_factory=list)
    delivery_counts_written: dict = dataclasses.field(default_factory=dict)  # count -> offsets in delta batches


def _state_name(state: int) -> str:
    return RecordState(state).name if state in RECORD_STATE_IDS else str(state)


def _describe(batch: Sequence[int]) -> str:
    first, last, state, count = batch
    return f"[{first}..{last} state {state} count {count}]"


class KeyAuditor:
    """Replays one key's records in log order, checking every invariant around each record.

    The replayed state is a `persister.KeyState` (None while the key has no state) changed only by
    `persister.apply_record`, the coordinator's own replay, so the audit's final state and everything
    replay derives (`KeyState.dump()`) equal the coordinator's recovery by construction. `log_start_offset`
    is the offset the log starts at: only a pruned log (start > 0) may begin a key with a delta.

    Runtime complexity: O(b log b) per record for a state of b batches (the combiner).
    """

    __slots__ = (
        "_limit",
        "_records_per_checkpoint",
        "_log_start_offset",
        "_result",
        "key_state",
        "deleted",
        "_progress_stride",
        "_progress_changes",
        "_progress_last",
    )

    def __init__(self, key: tuple, options: AuditOptions, log_start_offset: int) -> None:
        self._limit = options.delivery_count_limit
        self._records_per_checkpoint = options.snapshot_update_records_per_snapshot
        self._log_start_offset = log_start_offset
        self._result = KeyResult(key)
        self._progress_stride = 1
        self._progress_changes = 0
        self._progress_last: tuple | None = None
        self.key_state: KeyState | None = None
        self.deleted = False  # a tombstone was replayed (a later delta cannot belong to a live state)

    @property
    def live(self) -> bool:
        """Whether the key has a state (initialized and not deleted since)."""
        return self.key_state is not None

    # -- feeding ------------------------------------------------------------------------------------

    def apply_all(self, rows: Iterable[tuple]) -> KeyResult:
        """Apply rows (already in log order) and return the result."""
        for row in rows:
            self.apply(row)
        return self.result()

    def apply(self, row: tuple) -> None:
        """Check and apply one row `(log_offset, record)` (see the module docstring)."""
        offset, record = row
        r = self._result
        assert offset > r.last_offset, f"rows must come in log order: {offset} after {r.last_offset}"
        if r.records == 0:
            r.first_offset = offset
        r.records += 1
        r.last_offset = offset
        before = self.key_state
        if record is None:
            r.tombstones += 1
            self.deleted = True
        elif type(record) is ShareDelta:
            r.deltas += 1
            self._check_delta(offset, record)
        elif type(record) is ShareCheckpoint:
            r.checkpoints += 1
            self._check_checkpoint(offset, record)
        else:
            raise ValueError(f"unknown record {record!r} at log offset {offset}")
        old_batches = None if before is None else before.state.state_batches
        self.key_state = after = apply_record(before, offset, record)
        if after is None:
            return
        if type(record) is ShareDelta:
            if old_batches is not None and any(b[2] not in TERMINAL_STATE_IDS for b in record.state_batches):
                self._check_terminal(offset, old_batches, after.state.state_batches)
            self._check_deltas_between_checkpoints(offset)
        self._track_progress(offset)

    def result(self) -> KeyResult:
        """The result so far: final state and replay dump are those of the rows applied."""
        r = self._result
        key_state = self.key_state
        last = self._progress_last
        if last is not None and (not r.progress or r.progress[-1] != last):
            r.progress.append(last)
        if key_state is not None and r.progress and r.progress[-1][0] < r.last_offset:
            r.progress.append((r.last_offset, key_state.state.start_offset))  # the series runs to the last record
        if key_state is not None:
            r.final = FinalState.from_checkpoint(key_state.state)
            r.replay = key_state.dump()
        else:
            r.final = r.replay = None
        return r

    # -- records ------------------------------------------------------------------------------------

    def _violation(self, offset: int, rule: Rule, detail: str) -> None:
        self._result.violations.append((offset, rule, detail))

    def _check_checkpoint(self, offset: int, checkpoint: ShareCheckpoint) -> None:
        """The rules a checkpoint must meet against the state before it."""
        batches = checkpoint.state_batches
        self._check_batches(offset, batches)
        if self.key_state is None:
            return  # a new key, or a new life after a tombstone: nothing to compare with
        current = self.key_state.state
        # A re-initialization (initialize_state: alter or reset offsets) writes a fresh checkpoint of the
        # next epoch with leader epoch 0, no batches and equal create and write times; it may move the
        # start offset anywhere and resets the leader epoch.
        reinitialized = (
            checkpoint.checkpoint_epoch > current.checkpoint_epoch
            and checkpoint.leader_epoch == 0
            and not batches
            and checkpoint.create_timestamp_ms == checkpoint.write_timestamp_ms
        )
        if checkpoint.checkpoint_epoch < current.checkpoint_epoch:
            self._violation(
                offset,
                Rule.CHECKPOINT_EPOCH,
                f"checkpoint epoch {checkpoint.checkpoint_epoch} is below the current {current.checkpoint_epoch}",
            )
        if checkpoint.state_epoch < current.state_epoch:
            self._violation(
                offset,
                Rule.STATE_EPOCH,
                f"state epoch {checkpoint.state_epoch} is below the current {current.state_epoch}",
            )
        if reinitialized:
            return
        if checkpoint.leader_epoch < current.leader_epoch:
            self._violation(
                offset,
                Rule.LEADER_EPOCH,
                f"checkpoint leader epoch {checkpoint.leader_epoch} is below the current {current.leader_epoch}",
            )
        if current.start_offset != -1 and checkpoint.start_offset < current.start_offset:
            self._violation(
                offset,
                Rule.START_OFFSET,
                f"checkpoint start offset {checkpoint.start_offset} is below the current {current.start_offset}",
            )
        if batches:
            self._check_terminal(offset, current.state_batches, batches)

    def _check_delta(self, offset: int, delta: ShareDelta) -> None:
        """The rules a delta must meet against the state before it (those about the combined result
        are checked after it is applied, in `apply`)."""
        self._check_batches(offset, delta.state_batches, self._result.delivery_counts_written)
        if self.key_state is None:
            if self.deleted:
                self._violation(offset, Rule.DELTA_EPOCH, "a delta for a key deleted by an earlier tombstone")
            elif self._log_start_offset == 0:
                # Only a pruned log may have lost a key's checkpoint; an unpruned one starts every key
                # with the checkpoint that initialize_state wrote.
                self._violation(offset, Rule.DELTA_EPOCH, "a delta before the key's first checkpoint")
            return
        current = self.key_state.state
        if delta.checkpoint_epoch != current.checkpoint_epoch:
            self._violation(
                offset,
                Rule.DELTA_EPOCH,
                f"delta of checkpoint epoch {delta.checkpoint_epoch} while the current checkpoint epoch is "
                f"{current.checkpoint_epoch}",
            )
        if delta.leader_epoch != -1 and delta.leader_epoch < current.leader_epoch:
            self._violation(
                offset,
                Rule.LEADER_EPOCH,
                f"delta leader epoch {delta.leader_epoch} is below the current {current.leader_epoch}",
            )
        if delta.start_offset != -1 and current.start_offset != -1 and delta.start_offset < current.start_offset:
            self._violation(
                offset,
                Rule.START_OFFSET,
                f"delta start offset {delta.start_offset} is below the current {current.start_offset}",
            )

    # -- checks -------------------------------------------------------------------------------------

    def _check_deltas_between_checkpoints(self, offset: int) -> None:
        # Reported once per run of deltas: at the first delta beyond N.
        key_state = self.key_state
        if key_state.deltas_since_checkpoint == self._records_per_checkpoint + 1:
            self._violation(
                offset,
                Rule.DELTAS_BETWEEN_CHECKPOINTS,
                f"more than {self._records_per_checkpoint} deltas since the key's latest checkpoint"
                + f" (at log offset {key_state.checkpoint_offset})",
            )

    def _check_batches(self, offset: int, batches: tuple, histogram: dict | None = None) -> None:
        """Sorted, disjoint, persisted delivery states and counts within the limit; one violation per
        rule per record, naming the first offending batch. Adds the batches' offsets to `histogram`
        (delivery count -> offsets) when given."""
        previous = None
        bad_order = bad_state = bad_count = None
        limit = self._limit
        for batch in batches:
            first, last, state, count = batch
            if histogram is not None:
                histogram[count] = histogram.get(count, 0) + last - first + 1
            if previous is not None and first <= previous[1] and bad_order is None:
                bad_order = (previous, batch)
            if state not in RECORD_STATE_IDS and bad_state is None:
                bad_state = batch
            if count > limit and bad_count is None:
                bad_count = batch
            previous = batch
        if bad_order is not None:
            a, b = bad_order
            how = "overlaps" if b[0] >= a[0] else "comes before"
            self._violation(offset, Rule.BATCHES, f"state batch {_describe(b)} {how} {_describe(a)}")
        if bad_state is not None:
            self._violation(
                offset, Rule.BATCHES, f"state batch {_describe(bad_state)} has a delivery state that is no record state"
            )
        if bad_count is not None:
            self._violation(
                offset,
                Rule.DELIVERY_COUNT,
                f"state batch {_describe(bad_count)} exceeds the delivery count limit {limit}",
            )

    def _check_terminal(self, offset: int, old: Sequence, new: Sequence) -> None:
        """Report the first offset that is terminal in `old` and not in `new`, or ARCHIVING in `old` and
        AVAILABLE or ACQUIRED in `new` (one violation per record). O(b log b)."""
        if not self._first_regression(offset, old, new, TERMINAL_STATE_IDS, _NOT_TERMINAL_STATE_IDS):
            self._first_regression(offset, old, new, _ARCHIVING_STATE_IDS, _LIVE_STATE_IDS)

    def _first_regression(self, offset: int, old: Sequence, new: Sequence, was_states: frozenset,
                          bad_states: frozenset) -> bool:
        """Report the first offset whose state is in `was_states` in `old` and in `bad_states` in `new`."""
        was_ranges = sorted((b[0], b[1]) for b in old if b[2] in was_states)
        if not was_ranges:
            return False
        bad_ranges = sorted((b[0], b[1]) for b in new if b[2] in bad_states)
        i = j = 0
        while i < len(was_ranges) and j < len(bad_ranges):
            t_first, t_last = was_ranges[i]
            a_first, a_last = bad_ranges[j]
            lo, hi = max(t_first, a_first), min(t_last, a_last)
            if lo <= hi:
                was = next(b for b in old if b[2] in was_states and b[0] <= lo <= b[1])
                now = next(b for b in new if b[2] in bad_states and b[0] <= lo <= b[1])
                self._violation(
                    offset,
                    Rule.TERMINAL,
                    f"offsets {lo}..{hi} were {RecordState(was[2]).name} (count {was[3]}) and become "
                    f"{_state_name(now[2])} again",
                )
                return True
            if t_last < a_last:
                i += 1
            else:
                j += 1
        return False

    def _track_progress(self, offset: int) -> None:
        """Remember (log offset, start offset) where the start offset changes, thinned to at most
        PROGRESS_POINTS_MAX points: past that, every other point goes and only every 2nd (4th, ...)
        later change is kept. The latest change is always kept aside so the series ends where the key
        does."""
        start_offset = self.key_state.state.start_offset
        if self._progress_last is not None and self._progress_last[1] == start_offset:
            return
        point = (offset, start_offset)
        self._progress_last = point
        self._progress_changes += 1
        if (self._progress_changes - 1) % self._progress_stride:
            return
        progress = self._result.progress
        progress.append(point)
        if len(progress) > PROGRESS_POINTS_MAX:
            del progress[1::2]
            self._progress_stride *= 2


def audit_key(key: tuple, rows: list[tuple], options: AuditOptions, log_start_offset: int) -> KeyResult:
    """Audit one key: sort its rows `(log_offset, record)` by log offset and replay them (what each
    Spark group runs)."""
    rows.sort(key=_row_offset)
    return KeyAuditor(key, options, log_start_offset).apply_all(rows)


def _row_offset(row: tuple) -> int:
    return row[0]
