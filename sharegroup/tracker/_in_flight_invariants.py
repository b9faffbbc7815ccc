"""The invariant check of the pure tracker (the Cython twin's counterpart is
`_native/in_flight_invariants.pxi`). Tests call `InFlightTracker._check()` after every step.
"""

from __future__ import annotations


from ._in_flight_entry import ACKNOWLEDGED, ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, entry_done, terminal
from ._in_flight_start_offset import _covered, _scan_start
from ._tracker_state import TrackerState



def _check_invariants(self: TrackerState) -> None:
    """`InFlightTracker._check` (see its docstring)."""
    assert 0 <= self._spso <= self._speo, (self._spso, self._speo)
    if self._gap_end >= 0:
        assert self._gap_end == self._speo and self._spso < self._gap_end, \
            (self._gap_start, self._gap_end, self._spso, self._speo)
    assert len(self._entries) == len(self._firsts)
    prev_last = -1
    flagged = False
    heap_min: dict[int, int] = {}
    for d, f in self._heap:
        if d < heap_min.get(f, 1 << 62):
            heap_min[f] = d
    terminal_total = 0
    for idx, e in enumerate(self._entries):
        assert self._firsts[idx] == e.first
        assert e.first <= e.last < self._speo, (e.first, e.last, self._speo)
        assert e.first > prev_last, "entries overlap or are unsorted"
        prev_last = e.last
        n = e.last - e.first + 1
        if e.offset_states is None:
            recs = [(e.first, e.state, e.flags, e.delivery_count, e.member, e.deadline)]
        else:
            assert len(e.offset_states) == len(e.offset_flags) == len(e.offset_delivery_counts) == n
            assert len(e.offset_members) == len(e.offset_deadlines) == n
            recs = [(e.first + k, e.offset_states[k], e.offset_flags[k], e.offset_delivery_counts[k],
                     e.offset_members[k], e.offset_deadlines[k])
                    for k in range(n)]
            assert e.terminal_count == sum(1 for r in recs if terminal(r[1])), f"entry {e.first}: stale terminal count"
        terminal_total += sum((e.last - e.first + 1) if e.offset_states is None else 1 for r in recs if terminal(r[1]))
        for off, s, fl, delivery_count, mem, dl in recs:
            assert s in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED), s
            assert 0 <= mem < len(self._member_names)
            if s == ACQUIRED:
                assert mem != 0 and delivery_count >= 1 and not fl, (off, s, mem, delivery_count, fl)
                assert heap_min.get(e.first, 1 << 62) <= dl, f"acquired offset {off} has no lock timer"
            else:
                assert mem == 0, (off, s, mem)
            flagged = flagged or bool(fl)
            if s == AVAILABLE:
                assert off >= self._spso, f"offset {off} below the SPSO is AVAILABLE"
        if e.last < self._spso:
            assert not entry_done(e) or idx > 0, "a done entry below the SPSO should have been dropped"
    assert terminal_total == self._terminal_total, \
        f"terminal total {self._terminal_total} is stale (actual {terminal_total})"
    # Pending transitions name real members and well-formed ranges; flagged records imply one.
    for owner, ranges in self._transitions.values():
        assert 0 < owner < len(self._member_names)
        prev_b = -1
        for a, b in ranges:
            assert prev_b < a <= b, ranges  # ascending and disjoint (complete relies on it)
            prev_b = b
    if flagged:
        assert self._transitions, "records in transition without a pending transition"
    # The next-fetch walk may start where it does: nothing fetchable lies below its start.
    assert self._next_fetch_offset_from(self._spso) == \
        self._next_fetch_offset_from(max(self._spso, self._fetch_scan_from)), "next-fetch walk starts too late"
    # The SPSO is fully advanced: the record at the SPSO (if any) is not done. An acquisition leaves an
    # SPSO that no entry covers where it is (see `_advance`).
    assert _scan_start(self, None) <= self._spso or not _covered(self, self._spso), \
        "SPSO not advanced over a terminal run"
