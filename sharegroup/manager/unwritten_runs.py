"""Runs of failed one-phase writes of a share-partition (lock expiry, archiving after a dead-letter write),
kept until a later successful write carries or supersedes them. Layer 3; used by `share_partition`.
"""

from __future__ import annotations

from typing import Sequence

from ..types import RecordState, StateBatch

__all__ = ["UnwrittenRuns", "coalesce"]


def _durable_form(state: int, delivery_count: int) -> tuple[int, int]:
    """How a record in `state` is persisted: ACQUIRED is never written, so an acquired record's durable
    form is AVAILABLE with the count before this delivery (what a new leader must see after failover)."""
    if state == RecordState.ACQUIRED:
        return int(RecordState.AVAILABLE), delivery_count - 1
    return state, delivery_count


class UnwrittenRuns:
    """Runs of failed lock-expiry writes, kept until a successful write carries or supersedes them.

    Held as sorted, disjoint pieces `[first, last, state, delivery_count, sequence]`; a later failed
    expiry replaces the earlier pieces it overlaps (its state is newer). `sequence` numbers each `add`
    so that a write only forgets the pieces that existed when it started. There is at most one piece
    per offset of the window, so the memory is bounded by the window however long the persister fails.
    """

    __slots__ = ("_pieces", "sequence")

    def __init__(self) -> None:
        self._pieces: list[list[int]] = []
        self.sequence = 0

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def batches(self) -> list[StateBatch]:
        return [StateBatch(p[0], p[1], p[2], p[3]) for p in self._pieces]

    def add(self, runs: Sequence[StateBatch]) -> None:
        """Keep the runs of a failed expiry write; they replace older pieces of the same offsets."""
        if not runs:
            return
        self.sequence += 1
        self._cut(runs, self.sequence)
        self._pieces += [[r[0], r[1], r[2], r[3], self.sequence] for r in runs]
        self._pieces.sort()

    def still_current(self, current: Sequence[StateBatch], own: Sequence[StateBatch], start_offset: int) -> list[StateBatch]:
        """The parts of the pieces, at or above `start_offset` and outside `own`'s offsets, whose
        (state, count) equal the durable form of the current state (`current`: the window's runs)."""
        out: list[StateBatch] = []
        j = 0
        for first, last, state, count, _sequence in self._pieces:
            first = max(first, start_offset)
            if first > last:
                continue
            while j < len(current) and current[j][1] < first:
                j += 1
            k = j
            while k < len(current) and current[k][0] <= last:
                run = current[k]
                if _durable_form(run[2], run[3]) == (state, count):
                    out += _minus(max(first, run[0]), min(last, run[1]), own, state, count)
                k += 1
        return out

    def needs_write(self, current: Sequence[StateBatch], start_offset: int) -> bool:
        """Whether a write would make something durable: a piece that is still current, or one below the
        start offset (a write's start offset makes it durable by pruning)."""
        if not self._pieces:
            return False
        return self._pieces[0][0] < start_offset or bool(self.still_current(current, (), start_offset))

    def forget(self, written: Sequence[StateBatch], start_offset: int, sequence: int) -> None:
        """A write succeeded: forget the pieces of sequence <= `sequence` below `start_offset` or inside
        `written`'s offsets."""
        covered = [StateBatch(-1, start_offset - 1, 0, 0), *written] if start_offset > 0 else written
        self._cut(covered, sequence)

    def _cut(self, ranges: Sequence[StateBatch], sequence: int) -> None:
        """Remove the offsets of `ranges` from every piece whose sequence is <= `sequence`."""
        kept: list[list[int]] = []
        for piece in self._pieces:
            if piece[4] > sequence:
                kept.append(piece)
                continue
            kept += [[b.first_offset, b.last_offset, piece[2], piece[3], piece[4]]
                     for b in _minus(piece[0], piece[1], ranges, piece[2], piece[3])]
        self._pieces = kept

    def _check(self) -> None:
        for a, b in zip(self._pieces, self._pieces[1:]):
            assert a[1] < b[0], f"unwritten expiry runs overlap: {a} {b}"
        for p in self._pieces:
            assert p[0] <= p[1] and 1 <= p[4] <= self.sequence, p
            assert p[2] in (RecordState.AVAILABLE, RecordState.ARCHIVING, RecordState.ARCHIVED), p


def coalesce(runs: list[StateBatch]) -> list[StateBatch]:
    """Sorted single-offset runs as maximal runs of equal (state, count)."""
    out: list[StateBatch] = []
    for run in runs:
        if out and out[-1].last_offset + 1 == run.first_offset and out[-1][2:] == run[2:]:
            out[-1] = out[-1]._replace(last_offset=run.last_offset)
        else:
            out.append(run)
    return out


def _minus(first: int, last: int, ranges: Sequence[Sequence[int]], state: int, count: int) -> list[StateBatch]:
    """[first, last] without the offsets of `ranges` (any order), as runs of (state, count).
    O(len(ranges)); the ranges of one write are few."""
    out: list[StateBatch] = []
    lo = first
    for r_first, r_last, *_ in sorted(r for r in ranges if r[1] >= first and r[0] <= last):
        if r_first > lo:
            out.append(StateBatch(lo, r_first - 1, state, count))
        lo = max(lo, r_last + 1)
        if lo > last:
            return out
    if lo <= last:
        out.append(StateBatch(lo, last, state, count))
    return out
