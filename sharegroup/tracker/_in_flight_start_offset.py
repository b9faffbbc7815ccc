"""The start offset (SPSO) advance of the pure tracker (the Cython twin's counterpart is
`_native/in_flight_start_offset.pxi`): the leading run of terminal records, the holes it may or may not
skip (the persisted-gap window), and dropping wholly terminal leading entries. Layer 1.
"""

from __future__ import annotations


from ._in_flight_entry import ACKNOWLEDGED, ARCHIVED, entry_done, terminal
from ._tracker_state import TrackerState



def _scan_start(self: TrackerState, allowed: list[tuple[int, int]] | None) -> int:
    """Where the SPSO lands after the leading run of terminal records (natural gaps skipped).

    Records awaiting a write stop the run, except those inside `allowed` (the ranges of the
    transition whose write is being prepared: once it is durable they are done).
    """
    pos = self._spso
    entries = self._entries
    i = self._index_from(pos)
    allowed = allowed or []
    allowed_index = 0
    allowed_count = len(allowed)
    while i < len(entries):
        e = entries[i]
        if e.first > pos:
            hole = _blocking_hole(self, pos, e.first)
            if hole >= 0:
                return hole
            pos = e.first
        if e.offset_states is None:
            if terminal(e.state):
                if not e.flags:
                    pos = e.last + 1
                    i += 1
                    continue
                while allowed_index < allowed_count and allowed[allowed_index][1] < pos:
                    allowed_index += 1
                if (allowed_index < allowed_count and allowed[allowed_index][0] <= pos
                        and allowed[allowed_index][1] >= e.last):
                    pos = e.last + 1
                    i += 1
                    continue
            return pos
        offset_states, offset_flags = e.offset_states, e.offset_flags
        k = pos - e.first
        size = e.last - e.first + 1
        while k < size:
            s = offset_states[k]
            if s != ACKNOWLEDGED and s != ARCHIVED:
                return e.first + k
            if offset_flags[k]:
                off = e.first + k
                while allowed_index < allowed_count and allowed[allowed_index][1] < off:
                    allowed_index += 1
                if not (allowed_index < allowed_count and allowed[allowed_index][0] <= off):
                    return off
            k += 1
        pos = e.last + 1
        i += 1
    if pos < self._speo:
        hole = _blocking_hole(self, pos, self._speo)
        if hole >= 0:
            return hole
    return max(pos, self._speo)

def _blocking_hole(self: TrackerState, pos: int, end: int) -> int:
    """Where the SPSO must stop inside the hole [pos, end), or -1 when it may skip the hole.

    Natural gaps are skipped. While the persisted-gap window is open, the SPSO stops at a leading
    hole (one that starts at the SPSO: nothing covers it yet) and at the first hole offset at or
    above the window's gap start (it may still be acquired).
    """
    if self._gap_end < 0:
        return -1
    if pos == self._spso:
        return pos
    if self._gap_start < end:
        return max(pos, self._gap_start)
    return -1

def _advance(self: TrackerState, acquisition: bool = False) -> None:
    """Move the SPSO over the leading terminal run and drop wholly terminal leading entries.

    After an `acquisition` an SPSO that no entry covers (a leading hole of the persisted-gap window
    that the read did not acquire) stays where it is, as in Kafka, even when the window has just
    closed; the next acknowledgement, release, lock expiry or log start move passes it.
    """
    _close_gap_window_when_done(self)
    if not (acquisition and not _covered(self, self._spso)):
        start = _scan_start(self, None)
        if start > self._spso:
            self._spso = start
    spso = self._spso
    drop = 0
    for e in self._entries:
        if e.last >= spso or not entry_done(e):
            break
        self._terminal_total -= e.last - e.first + 1  # a done entry is terminal throughout
        drop += 1
    if drop:
        del self._entries[:drop]
        del self._firsts[:drop]
    if not self._entries:
        self._speo = max(self._speo, self._spso)
        if not self._transitions:
            self._heap.clear()
    _close_gap_window_when_done(self)

def _covered(self: TrackerState, offset: int) -> bool:
    """Whether an entry covers `offset`."""
    i = self._index_from(offset)
    return i < len(self._entries) and self._entries[i].first <= offset

def _close_gap_window_when_done(self: TrackerState) -> None:
    """Close the persisted-gap window once the SPEO moved past the last persisted batch (or the SPSO
    reached it); the holes left then are natural gaps."""
    if self._gap_end >= 0 and (self._speo != self._gap_end or self._spso >= self._gap_end):
        self._gap_end = -1
