"""Kafka's acquisition rules around offset holes, run against both tracker twins.

A *hole* is a stretch of offsets inside the in-flight window that no cached entry covers: a natural gap
(compaction, or fetches that skipped it) or, after loading persisted state, an offset whose fate the
last leader never wrote (the persisted-gap window). Each test is named after the rule it pins and
checks the exact acquired ranges, delivery counts, start offset, end offset and next fetch offset.
"""

from __future__ import annotations

from sharegroup import AbortedTransaction as Abort
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import AcquiredRecords as Acq
from sharegroup import FetchedBatch as FB
from sharegroup import RecordState, RecordView
from sharegroup import StateBatch as SB

GAP, ACCEPT, RELEASE = 0, 1, 2
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
LOCK = 1000


def offsets(tr):
    """(start offset, end offset, next fetch offset, in-flight count)."""
    return tr.start_offset, tr.end_offset, tr.next_fetch_offset(), tr.in_flight_count


def accept(tr, member, first, last):
    w = tr.begin_acknowledge(member, [Ack(first, last, (ACCEPT,))], 0)
    tr.complete(w.transition_id, True, 0)
    tr._check()


def acquired(tr, offset, member, dc=1):
    return tr.record_state(offset) == RecordView(RecordState.ACQUIRED, dc, member)


# ---------------------------------------------------------------- rule 1: fetches wholly inside a hole


def test_fetch_wholly_inside_a_hole_between_entries_is_acquired_as_a_new_range(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    assert t.acquire("a", [FB(0, 4)], 500, 0) == [Acq(0, 4, 1)]
    assert t.acquire("a", [FB(20, 24)], 500, 0) == [Acq(20, 24, 1)]  # 5-19: a natural hole
    assert t.acquire("b", [FB(5, 7), FB(8, 10)], 500, 0) == [Acq(5, 10, 1)]
    assert offsets(t) == (0, 25, 25, 25)  # the end offset does not move for a range below it
    assert acquired(t, 5, "b") and acquired(t, 10, "b") and t.record_state(11) is None
    assert t.state_batches() == [SB(0, 10, 1, 1), SB(20, 24, 1, 1)]
    t._check()
    # The new range is an entry like any other: it expires, and acknowledging it all moves the SPSO.
    accept(t, "a", 0, 4)
    accept(t, "b", 5, 10)
    accept(t, "a", 20, 24)
    assert offsets(t) == (25, 25, 25, 0)


def test_fetch_inside_a_hole_follows_the_soft_max_records_and_batch_size_rules(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(30, 34)], 500, 0)
    # max_records 4 falls inside the second producer batch, which is taken whole; batch_size 3 cuts.
    got = t.acquire("b", [FB(5, 6), FB(8, 10), FB(11, 12), FB(13, 20)], 4, 0, -1, 3)
    assert got == [Acq(5, 7, 1), Acq(8, 10, 1)]
    assert offsets(t) == (0, 35, 35, 35)
    assert acquired(t, 7, "b")  # the hole before the cut belongs to the earlier range
    assert t.record_state(11) is None
    t._check()


def test_fetch_inside_a_hole_in_record_limit_mode_leaves_the_rest_of_the_range_available(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK, record_limit_mode=True)
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(20, 24)], 500, 0)
    assert offsets(t) == (0, 25, 25, 25)
    assert t.acquire("b", [FB(5, 9)], 2, 0) == [Acq(5, 6, 1)]  # max_records is a hard cap here
    assert t.record_state(7) == RecordView(RecordState.AVAILABLE, 0, "")
    assert offsets(t) == (0, 25, 7, 25)  # the next fetch goes back into the new range
    t._check()


def test_holes_inside_a_fetch_that_overlaps_cached_entries_stay_unacquired(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(20, 24)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 4, (RELEASE,))], 0)
    t.complete(w.transition_id, True, 0)
    assert t.next_fetch_offset() == 0
    # The read returns 0-24 with records at 8-9 in the hole: only the cached batch is re-acquired.
    assert t.acquire("b", [FB(0, 4), FB(8, 9), FB(20, 24)], 500, 0) == [Acq(0, 4, 2)]
    assert t.record_state(8) is None
    assert offsets(t) == (0, 25, 25, 25)
    t._check()


# ---------------------------------------------------------------- rule 2: batch_size cuts keep the holes


def test_batch_size_cuts_keep_the_holes_before_each_cut_in_the_earlier_range(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    got = t.acquire("a", [FB(0, 2), FB(5, 7), FB(10, 12)], 500, 0, -1, 4)
    assert got == [Acq(0, 4, 1), Acq(5, 9, 1), Acq(10, 12, 1)]
    assert offsets(t) == (0, 13, 13, 13)
    assert acquired(t, 3, "a") and acquired(t, 9, "a")
    accept(t, "a", 0, 4)
    assert offsets(t) == (5, 13, 13, 8)  # each cut range is its own entry
    t._check()


def test_batch_size_cut_rule_holds_after_aborted_batches_are_cut_out(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    fetched = [FB(0, 2), FB(3, 5, 7, True), FB(8, 10), FB(13, 15), FB(16, 16, 7, True, True)]
    got = t.acquire("a", fetched, 500, 0, -1, 4, [Abort(7, 3)], True)
    # Cut ranges 0-7, 8-12, 13-16; the aborted batch 3-5 and its abort marker 16 are taken out.
    assert got == [Acq(0, 2, 1), Acq(6, 7, 1), Acq(8, 12, 1), Acq(13, 15, 1)]
    assert t.record_state(4) == RecordView(RecordState.ARCHIVED, 1, "")
    assert t.record_state(16) == RecordView(RecordState.ARCHIVED, 1, "")
    assert acquired(t, 7, "a") and acquired(t, 12, "a")
    assert offsets(t) == (0, 17, 17, 17)
    t._check()


# ---------------------------------------------------------------- rule 3: the persisted-gap window


def test_persisted_gap_holes_follow_the_soft_max_records_rule(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.load(0, [SB(10, 14, AVAILABLE, 2), SB(20, 24, AVAILABLE, 1)])
    assert offsets(t) == (0, 25, 0, 25)
    got = t.acquire("a", [FB(0, 3), FB(4, 7), FB(8, 14)], 5, 0)
    assert got == [Acq(0, 7, 1)]  # 5 falls inside the second producer batch, taken whole
    assert offsets(t) == (0, 25, 8, 25)
    t._check()


def test_persisted_gap_acquisition_never_extends_past_the_hole_into_the_next_persisted_batch(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.load(0, [SB(10, 14, AVAILABLE, 2)])
    assert t.acquire("a", [FB(0, 12)], 3, 0) == [Acq(0, 9, 1)]  # the producer batch is cut at the hole's end
    assert t.record_state(10) == RecordView(RecordState.AVAILABLE, 2, "")
    assert offsets(t) == (0, 15, 10, 15)
    # With room to spare the same read takes the rest of the hole and the persisted batch (dc 2 -> 3).
    t2 = make_tracker(0, record_lock_duration_ms=LOCK)
    t2.load(0, [SB(10, 14, AVAILABLE, 2), SB(20, 24, AVAILABLE, 1)])
    assert t2.acquire("a", [FB(8, 14)], 500, 0) == [Acq(8, 9, 1), Acq(10, 14, 3)]
    assert offsets(t2) == (8, 25, 15, 17)  # 8-9 is the lowest in flight: 0-7 dropped; 15-19 next
    t2._check()


def test_persisted_gap_holes_become_natural_gaps_once_the_end_offset_passes_the_last_persisted_batch(
        make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.load(0, [SB(5, 9, AVAILABLE, 1), SB(15, 19, AVAILABLE, 1)])
    assert offsets(t) == (0, 20, 0, 20)
    # 0-4 and 10-14 were compacted away: a short read from 0 returns 5-9, the next one (from the hole
    # 10) returns 15-19 and goes on past the last persisted batch.
    assert t.acquire("a", [FB(5, 9)], 500, 0, 0) == [Acq(5, 9, 2)]
    assert offsets(t) == (0, 20, 10, 20)
    got = t.acquire("a", [FB(15, 19), FB(20, 24)], 500, 0, 10)
    assert got == [Acq(15, 19, 2), Acq(20, 24, 1)]
    # The holes 0-4 and 10-14 are natural gaps now: the next fetch offset skips them, they hold
    # nothing in flight, and the SPSO passes the leading one with the next acknowledgement.
    assert offsets(t) == (0, 25, 25, 25)
    t._check()
    w = t.begin_acknowledge("a", [Ack(5, 9, (RELEASE,)), Ack(15, 19, (RELEASE,))], 0)
    t.complete(w.transition_id, True, 0)
    assert offsets(t) == (5, 25, 5, 20)
    # A read that overlaps the cached entries does not acquire the records it finds in a natural gap.
    assert t.acquire("b", [FB(5, 9), FB(11, 12), FB(15, 19)], 500, 0) == [Acq(5, 9, 3), Acq(15, 19, 3)]
    assert t.record_state(11) is None and t.record_state(2) is None
    accept(t, "b", 5, 9)
    assert offsets(t) == (15, 25, 25, 10)  # the natural gap 10-14 does not hold the SPSO back
    t._check()


def test_persisted_gap_start_offset_stays_at_an_uncovered_leading_hole(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.load(0, [SB(5, 9, AVAILABLE, 1)])
    # Re-acquiring the persisted batch leaves the leading hole 0-4 uncovered: the SPSO stays at 0
    # while the window is open, though the next fetch offset has passed the hole.
    assert t.acquire("a", [FB(5, 9)], 500, 0) == [Acq(5, 9, 2)]
    accept(t, "a", 5, 9)
    assert offsets(t) == (0, 10, 10, 10)
    assert t.delivery_complete_count == 5
    t._check()
    # Moving the end offset past the last persisted batch closes the window: 0-4 is a natural gap,
    # which the SPSO passes with the next acknowledgement (an acquisition leaves it, as in Kafka).
    assert t.acquire("a", [FB(10, 11)], 500, 0) == [Acq(10, 11, 1)]
    assert offsets(t) == (0, 12, 12, 12)
    t._check()
    accept(t, "a", 10, 11)
    assert offsets(t) == (12, 12, 12, 0)
    t._check()


def test_persisted_gap_acquisition_above_the_leading_hole_start_moves_the_start_offset(make_tracker):
    t = make_tracker(0, record_lock_duration_ms=LOCK)
    t.load(0, [SB(5, 9, ACKNOWLEDGED, 1)])
    assert offsets(t) == (0, 10, 0, 10)
    assert t.delivery_complete_count == 5
    # The read finds records only at 2-3: the new range is the lowest in flight, 0-1 are dropped.
    assert t.acquire("a", [FB(2, 3)], 500, 0) == [Acq(2, 3, 1)]
    assert offsets(t) == (2, 10, 4, 8)
    accept(t, "a", 2, 3)
    assert offsets(t) == (4, 10, 4, 6)  # stops at the hole 4, which may still be acquired
    assert t.acquire("a", [FB(4, 4)], 500, 0) == [Acq(4, 4, 1)]
    accept(t, "a", 4, 4)
    assert offsets(t) == (10, 10, 10, 0)
    t._check()


def test_persisted_gap_next_fetch_offset_points_at_the_first_hole_not_yet_passed(make_tracker):
    t = make_tracker(100, record_lock_duration_ms=LOCK)
    t.load(100, [SB(100, 104, ACKNOWLEDGED, 1), SB(110, 114, AVAILABLE, 2), SB(120, 124, AVAILABLE, 1)])
    assert offsets(t) == (105, 125, 105, 20)  # the SPSO stops at the hole 105-109
    assert t.acquire("a", [FB(105, 106)], 500, 0) == [Acq(105, 106, 1)]
    assert offsets(t) == (105, 125, 107, 20)
    assert t.acquire("a", [FB(107, 109), FB(110, 114), FB(115, 118)], 500, 0) == [
        Acq(107, 109, 1), Acq(110, 114, 3), Acq(115, 118, 1)]
    assert offsets(t) == (105, 125, 119, 20)  # 119 is still a hole of the window
    assert t.acquire("b", [FB(120, 126)], 500, 0) == [Acq(120, 124, 2), Acq(125, 126, 1)]
    assert offsets(t) == (105, 127, 127, 22)  # the window is closed: 119 is a natural gap
    accept(t, "a", 105, 118)
    assert offsets(t) == (120, 127, 127, 7)
    t._check()


# ---------------------------------------------------------------- rule 4: Kafka's persisted-gap scenarios


def test_persisted_gap_hole_between_persisted_batches_is_acquired_though_no_fetched_batch_covers_it(make_tracker):
    # Kafka's SharePartitionTest scenario: start 5; persisted 15-18 AVAILABLE (dc 2), 20-22 ARCHIVED,
    # 26-30 AVAILABLE (dc 1); the log read returns producer batches 7-8, 10-11, 13-18 and 20-27.
    t = make_tracker(5, record_lock_duration_ms=LOCK)
    t.load(5, [SB(15, 18, AVAILABLE, 2), SB(20, 22, ARCHIVED, 1), SB(26, 30, AVAILABLE, 1)])
    assert offsets(t) == (5, 31, 5, 26)
    got = t.acquire("a", [FB(7, 8), FB(10, 11), FB(13, 18), FB(20, 27)], 500, 0, 5)
    # 19 lies between two persisted batches and no fetched batch holds it: still acquired (the client
    # answers a GAP for it), like the holes 9, 12 and 23-25 of the window.
    assert got == [Acq(7, 14, 1), Acq(15, 18, 3), Acq(19, 19, 1), Acq(23, 25, 1), Acq(26, 27, 2)]
    assert acquired(t, 19, "a") and acquired(t, 9, "a") and acquired(t, 24, "a")
    assert offsets(t) == (7, 31, 28, 24)  # 7-14 is the lowest in flight; 28-30 wait AVAILABLE
    t._check()
    w = t.begin_acknowledge("a", [Ack(7, 18, (ACCEPT,)), Ack(19, 19, (GAP,)), Ack(23, 27, (ACCEPT,))], 0)
    t.complete(w.transition_id, True, 0)
    assert offsets(t) == (28, 31, 28, 3)
    t._check()


def test_acquisition_keeps_the_start_offset_at_a_leading_hole_it_did_not_acquire(make_tracker):
    # Kafka's SharePartitionTest scenario: start 11; persisted 21-30 ACKNOWLEDGED, 41-50 ARCHIVED; 11-20
    # were compacted away, so the log read from 11 returns 21-35 and 36-60.
    t = make_tracker(11, record_lock_duration_ms=LOCK)
    t.load(11, [SB(21, 30, ACKNOWLEDGED, 1), SB(41, 50, ARCHIVED, 1)])
    assert offsets(t) == (11, 51, 11, 40)
    assert t.acquire("a", [FB(21, 35), FB(36, 60)], 500, 0, 11) == [Acq(31, 40, 1), Acq(51, 60, 1)]
    # The end offset passed the last persisted batch (the window is closed), but an acquisition does
    # not move the start offset over the hole 11-20, as in Kafka: it stays until an acknowledgement.
    assert offsets(t) == (11, 61, 61, 50)
    assert t.delivery_complete_count == 20
    t._check()
    accept(t, "a", 31, 40)
    assert offsets(t) == (51, 61, 61, 10)  # 11-20 is a natural gap now; 21-50 are all terminal
    assert t.delivery_complete_count == 0
    t._check()
