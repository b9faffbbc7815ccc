"""Spec tests of the in-flight tracker, written once and run against both twins."""

from __future__ import annotations

import pytest

from sharegroup import AbortedTransaction as Abort
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import AcquiredRecords as Acq
from sharegroup import Errors, RecordState, RecordView, ShareError
from sharegroup import FetchedBatch as FB
from sharegroup import StateBatch as SB

ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4
LOCK = 1000


@pytest.fixture
def t(make_tracker):
    return make_tracker(0, record_lock_duration_ms=LOCK)


def snapshot(tr):
    return (tr.start_offset, tr.end_offset, tr.state_batches(), tr.delivery_complete_count,
            tr.next_fetch_offset(), tr.pending_transitions)


def ack(tr, member, batches, now=0, commit=True):
    w = tr.begin_acknowledge(member, batches, now)
    if w.transition_id:
        tr.complete(w.transition_id, commit, now)
    tr._check()
    return w


def expect_error(tr, code, fn, *args):
    before = snapshot(tr)
    with pytest.raises(ShareError) as info:
        fn(*args)
    assert info.value.error == code, info.value
    assert snapshot(tr) == before, "a refused call must leave state unchanged"
    tr._check()
    return info.value


# ---------------------------------------------------------------- acquisition


def test_new_tracker_is_an_empty_window(t):
    assert (t.start_offset, t.end_offset, t.in_flight_count) == (0, 0, 0)
    assert t.state_batches() == [] and t.next_fetch_offset() == 0 and t.record_state(0) is None
    t._check()


def test_acquire_whole_producer_batches_and_move_speo(t):
    got = t.acquire("a", [FB(0, 9), FB(10, 14)], 500, 0)
    assert got == [Acq(0, 14, 1)]
    assert (t.start_offset, t.end_offset, t.in_flight_count) == (0, 15, 15)
    assert t.record_state(3) == RecordView(RecordState.ACQUIRED, 1, "a")
    assert t.state_batches() == [SB(0, 14, 1, 1)]
    assert t.next_fetch_offset() == 15
    t._check()


def test_max_records_is_soft_rounded_up_to_the_producer_batch(t):
    got = t.acquire("a", [FB(0, 9), FB(10, 19), FB(20, 29)], 12, 0)
    assert got == [Acq(0, 19, 1)]  # 12 falls inside the second batch, which is taken whole
    assert t.end_offset == 20


def test_record_limit_mode_makes_max_records_a_hard_cap(make_tracker):
    t = make_tracker(0, record_limit_mode=True)
    assert t.acquire("a", [FB(0, 9)], 4, 0) == [Acq(0, 3, 1)]
    assert t.end_offset == 10  # the entry spans the producer batch; the rest waits AVAILABLE
    assert t.record_state(4) == RecordView(RecordState.AVAILABLE, 0, "")
    assert t.next_fetch_offset() == 4
    assert t.acquire("b", [FB(0, 9)], 4, 0) == [Acq(4, 7, 1)]
    t._check()


def test_batch_size_cuts_new_ranges_at_producer_batch_boundaries(t):
    got = t.acquire("a", [FB(0, 3), FB(4, 7), FB(8, 11), FB(12, 15)], 500, 0, -1, 6)
    assert got == [Acq(0, 7, 1), Acq(8, 15, 1)]
    w = t.begin_acknowledge("a", [Ack(0, 7, (ACCEPT,))], 0)
    t.complete(w.transition_id, True, 0)
    assert t.start_offset == 8
    t._check()


def test_partition_max_record_locks_limits_new_records_only(make_tracker):
    t = make_tracker(0, partition_max_record_locks=10, record_lock_duration_ms=LOCK)
    assert t.acquire("a", [FB(0, 5), FB(6, 11)], 500, 0) == [Acq(0, 11, 1)]  # soft: 12 > 10
    assert t.acquire("a", [FB(12, 20)], 500, 0) == []  # window full: nothing new
    ack(t, "a", [Ack(3, 3, (RELEASE,))])
    # inside the window AVAILABLE records can still be acquired
    assert t.acquire("b", [FB(0, 5), FB(6, 11), FB(12, 20)], 500, 0) == [Acq(3, 3, 2)]


def test_re_acquire_available_records_inside_the_window(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    ack(t, "a", [Ack(0, 9, (RELEASE,))])
    assert t.next_fetch_offset() == 0
    assert t.acquire("b", [FB(0, 9), FB(10, 12)], 500, 0) == [Acq(0, 9, 2), Acq(10, 12, 1)]
    assert t.record_state(0) == RecordView(RecordState.ACQUIRED, 2, "b")


def test_partially_covered_cached_batch_switches_to_per_offset(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    ack(t, "a", [Ack(0, 9, (RELEASE,))])
    got = t.acquire("b", [FB(5, 9)], 500, 0)
    assert got == [Acq(5, 9, 2)]
    assert t.record_state(4) == RecordView(RecordState.AVAILABLE, 1, "")
    assert t.state_batches() == [SB(0, 4, 0, 1), SB(5, 9, 1, 2)]
    t._check()


def test_acquire_skips_records_below_the_start_offset(make_tracker):
    t = make_tracker(100)
    assert t.acquire("a", [FB(90, 104)], 500, 0) == [Acq(100, 104, 1)]


def test_new_range_after_a_gap_starts_the_window_when_empty(make_tracker):
    t = make_tracker(100)
    assert t.acquire("a", [FB(120, 129)], 500, 0) == [Acq(120, 129, 1)]
    assert (t.start_offset, t.end_offset) == (120, 130)


def test_natural_gaps_between_batches_are_skipped_by_the_spso(t):
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(8, 9)], 500, 0)  # 5-7 never were records (e.g. compacted away)
    ack(t, "a", [Ack(0, 4, (ACCEPT,))])
    assert t.start_offset == 8
    assert t.record_state(6) is None


def test_fetch_offset_before_the_fetched_data_archives_vanished_records(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    ack(t, "a", [Ack(0, 9, (RELEASE,))])
    # the log now starts the read at 5: offsets 0-4 were compacted away
    assert t.acquire("b", [FB(5, 9)], 500, 0, 0) == [Acq(5, 9, 2)]
    assert t.start_offset == 5
    t._check()


def test_acquire_refuses_malformed_fetched_batches(t):
    expect_error(t, Errors.INVALID_REQUEST, t.acquire, "a", [FB(5, 4)], 10, 0)
    expect_error(t, Errors.INVALID_REQUEST, t.acquire, "a", [FB(0, 4), FB(3, 6)], 10, 0)
    expect_error(t, Errors.INVALID_REQUEST, t.acquire, "a", [FB(-1, 4)], 10, 0)
    expect_error(t, Errors.INVALID_REQUEST, t.acquire, "", [FB(0, 4)], 10, 0)


def test_acquire_with_no_records_or_no_budget_is_empty(t):
    assert t.acquire("a", [], 10, 0) == []
    assert t.acquire("a", [FB(0, 4)], 0, 0) == []
    assert t.end_offset == 0


# ---------------------------------------------------------------- acknowledgement


@pytest.mark.parametrize(
    "ack_type,state", [(ACCEPT, RecordState.ACKNOWLEDGED), (REJECT, RecordState.ARCHIVED),
                       (GAP, RecordState.ARCHIVED), (RELEASE, RecordState.AVAILABLE)]
)
def test_each_acknowledge_type_moves_the_record(t, ack_type, state):
    t.acquire("a", [FB(0, 9)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(5, 9, (ack_type,))], 0)
    assert w.state_batches == [SB(5, 9, int(state), 1)]
    assert t.record_state(5).state == state  # visible at once, before the write answers
    t.complete(w.transition_id, True, 0)
    assert t.record_state(5) == RecordView(state, 1, "")
    t._check()


def test_accept_whole_window_advances_spso_and_empties_it(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 9, (ACCEPT,))], 0)
    assert (w.start_offset, w.delivery_complete_count) == (10, 0)  # as it will be once durable
    assert t.start_offset == 0
    t.complete(w.transition_id, True, 0)
    assert (t.start_offset, t.end_offset, t.in_flight_count) == (10, 10, 0)
    assert t.state_batches() == []


def test_per_offset_acknowledge_types(t):
    t.acquire("a", [FB(0, 4)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 4, (ACCEPT, RELEASE, REJECT, GAP, ACCEPT))], 0)
    assert w.state_batches == [SB(0, 0, 2, 1), SB(1, 1, 0, 1), SB(2, 3, 4, 1), SB(4, 4, 2, 1)]
    t.complete(w.transition_id, True, 0)
    assert t.start_offset == 1
    assert t.delivery_complete_count == 3  # 2, 3 and 4 are terminal above the SPSO
    t._check()


def test_uniform_per_offset_types_keep_the_batch_whole(t):
    t.acquire("a", [FB(0, 3)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 3, (ACCEPT,) * 4)], 0)
    assert w.state_batches == [SB(0, 3, 2, 1)]
    t.complete(w.transition_id, True, 0)
    assert t.start_offset == 4


def test_renew_restarts_the_lock_and_persists_nothing(t):
    t.acquire("a", [FB(0, 4)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 4, (RENEW,))], 800)
    assert w.transition_id == 0 and w.state_batches == []
    assert t.expire_locks(1500)[0] == 0  # the old lock (due at 1000) no longer applies
    assert t.record_state(0).state == RecordState.ACQUIRED
    assert t.expire_locks(1800)[0] == 5
    t._check()


def test_renew_mixed_with_accept_per_offset(t):
    t.acquire("a", [FB(0, 3)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 3, (ACCEPT, RENEW, RENEW, ACCEPT))], 500)
    assert w.state_batches == [SB(0, 0, 2, 1), SB(3, 3, 2, 1)]
    t.complete(w.transition_id, True, 500)
    assert t.expire_locks(1200)[0] == 0
    assert t.expire_locks(1500)[0] == 2


def test_release_at_the_delivery_limit_archives(make_tracker):
    t = make_tracker(0, delivery_count_limit=2)
    t.acquire("a", [FB(0, 0)], 500, 0)
    ack(t, "a", [Ack(0, 0, (RELEASE,))])
    t.acquire("a", [FB(0, 0)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 0, (RELEASE,))], 0)
    assert w.state_batches == [SB(0, 0, 4, 2)]
    t.complete(w.transition_id, True, 0)
    assert t.start_offset == 1


def test_acks_wholly_below_the_spso_succeed_without_effect(make_tracker):
    t = make_tracker(100)
    w = t.begin_acknowledge("a", [Ack(10, 20, (ACCEPT,))], 0)
    assert w.transition_id == 0 and w.state_batches == []


def test_natural_gaps_inside_an_ack_range_are_ignored(t):
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(8, 9)], 500, 0)
    w = ack(t, "a", [Ack(0, 9, (ACCEPT,))])
    assert w.state_batches == [SB(0, 4, 2, 1), SB(8, 9, 2, 1)]
    assert t.start_offset == 10


# One test per validation error, each leaving state untouched.


@pytest.fixture
def held(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    t.acquire("b", [FB(10, 19)], 500, 0)
    return t


def test_invalid_request_first_offset_after_last(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(5, 4, (ACCEPT,))], 0)


def test_invalid_request_batches_not_ascending(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a",
                 [Ack(5, 6, (ACCEPT,)), Ack(0, 1, (ACCEPT,))], 0)


def test_invalid_request_batches_overlapping(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a",
                 [Ack(0, 5, (ACCEPT,)), Ack(5, 6, (ACCEPT,))], 0)


def test_invalid_request_empty_types(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(0, 5, ())], 0)


def test_invalid_request_types_length_differs_from_range(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(0, 5, (ACCEPT, ACCEPT))], 0)


@pytest.mark.parametrize("bad", [5, -1, 3.0, "1", None, True])
def test_invalid_request_unknown_type(held, bad):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(0, 0, (bad,))], 0)


def test_invalid_request_offsets_past_the_window(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(5, 20, (ACCEPT,))], 0)
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(25, 30, (ACCEPT,))], 0)


def test_invalid_request_negative_offset(held):
    expect_error(held, Errors.INVALID_REQUEST, held.begin_acknowledge, "a", [Ack(-1, 3, (ACCEPT,))], 0)


def test_invalid_record_state_not_acquired(held):
    ack(held, "a", [Ack(0, 0, (RELEASE,))])
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "a", [Ack(0, 0, (ACCEPT,))], 0)


def test_invalid_record_state_already_acknowledged(held):
    ack(held, "a", [Ack(1, 1, (ACCEPT,))])
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "a", [Ack(1, 1, (ACCEPT,))], 0)


def test_invalid_record_state_owned_by_another_member(held):
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "b", [Ack(0, 3, (ACCEPT,))], 0)
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "stranger", [Ack(0, 3, (ACCEPT,))], 0)


def test_invalid_record_state_in_pending_transition(held):
    w = held.begin_acknowledge("a", [Ack(0, 3, (ACCEPT,))], 0)
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "a", [Ack(3, 3, (REJECT,))], 0)
    held.complete(w.transition_id, True, 0)


def test_invalid_record_state_no_batch_covers_the_start(t):
    t.acquire("a", [FB(0, 4)], 500, 0)
    t.acquire("a", [FB(8, 9)], 500, 0)
    expect_error(t, Errors.INVALID_RECORD_STATE, t.begin_acknowledge, "a", [Ack(6, 8, (ACCEPT,))], 0)


def test_all_or_nothing_a_later_bad_batch_undoes_nothing_earlier(held):
    expect_error(held, Errors.INVALID_RECORD_STATE, held.begin_acknowledge, "a",
                 [Ack(0, 4, (ACCEPT,)), Ack(12, 12, (ACCEPT,))], 0)
    assert held.record_state(0) == RecordView(RecordState.ACQUIRED, 1, "a")


# ---------------------------------------------------------------- two-phase persistence


def test_rollback_restores_acquired_for_the_owner(held):
    w = held.begin_acknowledge("a", [Ack(0, 4, (ACCEPT,))], 0)
    held.complete(w.transition_id, False, 10)
    assert held.record_state(0) == RecordView(RecordState.ACQUIRED, 1, "a")
    assert held.start_offset == 0
    held._check()


def test_rollback_after_lock_expired_makes_records_available(held):
    w = held.begin_acknowledge("a", [Ack(0, 4, (ACCEPT,))], 0)
    assert held.expire_locks(LOCK)[0] == 15  # 5-9 and 10-19 expire; 0-4 await their write
    assert held.record_state(0).state == RecordState.ACKNOWLEDGED
    held.complete(w.transition_id, False, LOCK + 1)
    assert held.record_state(0) == RecordView(RecordState.AVAILABLE, 1, "")
    assert held.next_fetch_offset() == 0
    held._check()


def test_rollback_after_lock_expired_at_the_limit_archives(make_tracker):
    t = make_tracker(0, delivery_count_limit=2, record_lock_duration_ms=LOCK)
    t.acquire("a", [FB(0, 0)], 500, 0)
    ack(t, "a", [Ack(0, 0, (RELEASE,))])
    t.acquire("a", [FB(0, 0)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 0, (ACCEPT,))], 0)
    t.complete(w.transition_id, False, LOCK)
    assert t.start_offset == 1  # archived, so the SPSO moves past it


def test_commit_advances_only_past_committed_records(held):
    w1 = held.begin_acknowledge("a", [Ack(0, 4, (ACCEPT,))], 0)
    w2 = held.begin_acknowledge("a", [Ack(5, 9, (ACCEPT,))], 0)
    assert w1.start_offset == 5 and w2.start_offset == 0  # w2 may not claim what w1 has not made durable
    held.complete(w2.transition_id, True, 0)
    assert held.start_offset == 0
    held.complete(w1.transition_id, True, 0)
    assert held.start_offset == 10


def test_complete_unknown_transition_is_refused(t):
    with pytest.raises(ShareError) as info:
        t.complete(12345, True, 0)
    assert info.value.error == Errors.INVALID_REQUEST


# ---------------------------------------------------------------- release, expiry, limits


def test_member_release_keeps_the_delivery_count(held):
    w = held.begin_release("a", 0)
    assert w.state_batches == [SB(0, 9, 0, 1)]
    held.complete(w.transition_id, True, 0)
    assert held.record_state(0) == RecordView(RecordState.AVAILABLE, 1, "")
    assert held.record_state(10) == RecordView(RecordState.ACQUIRED, 1, "b")
    assert held.begin_release("nobody", 0).transition_id == 0


def test_lock_expiry_makes_records_available_then_archived_at_the_limit(make_tracker):
    t = make_tracker(0, delivery_count_limit=2, record_lock_duration_ms=LOCK)
    t.acquire("a", [FB(0, 4)], 500, 0)
    assert t.next_lock_deadline_ms() == LOCK
    assert t.expire_locks(LOCK - 1)[0] == 0
    n, w = t.expire_locks(LOCK)
    assert n == 5 and w.state_batches == [SB(0, 4, 0, 1)] and w.transition_id == 0
    t.acquire("b", [FB(0, 4)], 500, 2 * LOCK)
    n, w = t.expire_locks(3 * LOCK)
    assert n == 5 and w.state_batches == [SB(0, 4, 4, 2)]
    assert (t.start_offset, w.start_offset) == (5, 5)
    t._check()


def test_expiry_storm_touches_only_due_locks(t):
    for i in range(100):
        t.acquire("a", [FB(i * 10, i * 10 + 9)], 500, i)
    n, w = t.expire_locks(LOCK + 49)
    assert n == 500 and w.state_batches == [SB(0, 499, 0, 1)]
    t._check()


def test_log_start_move_archives_available_but_not_acquired(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    ack(t, "a", [Ack(0, 4, (RELEASE,))])
    t.update_log_start_offset(7)
    assert t.start_offset == 7
    assert t.record_state(7) == RecordView(RecordState.ACQUIRED, 1, "a")
    # acks below the SPSO are ignored; the ACQUIRED records below it archive on expiry
    assert t.begin_acknowledge("a", [Ack(5, 6, (ACCEPT,))], 0).transition_id == 0
    n, w = t.expire_locks(LOCK)
    assert n == 5 and SB(5, 6, 4, 1) in w.state_batches
    t._check()


def test_log_start_move_past_the_window(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    ack(t, "a", [Ack(0, 9, (ACCEPT,))])
    t.update_log_start_offset(50)
    assert (t.start_offset, t.end_offset) == (50, 50)
    t.update_log_start_offset(20)  # never backwards
    assert t.start_offset == 50


def test_log_start_move_archives_records_awaiting_a_release_write(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 9, (RELEASE,))], 0)
    t.update_log_start_offset(10)
    t.complete(w.transition_id, False, 0)  # the rollback cannot bring back what the log dropped
    assert (t.start_offset, t.end_offset) == (10, 10)
    t._check()


# ---------------------------------------------------------------- read_committed


def test_read_committed_archives_aborted_transactions_and_control_batches(t):
    fetched = [FB(0, 4), FB(5, 9, 7, True), FB(10, 10, 7, True, True), FB(11, 15)]
    got = t.acquire("a", fetched, 500, 0, -1, 0, [Abort(7, 5)], True)
    assert got == [Acq(0, 4, 1), Acq(11, 15, 1)]
    assert t.record_state(5).state == RecordState.ARCHIVED
    assert t.record_state(10).state == RecordState.ARCHIVED
    t._check()


def test_read_committed_keeps_committed_transactions(t):
    fetched = [FB(0, 4, 7, True), FB(5, 5, 7, True, True)]
    assert t.acquire("a", fetched, 500, 0, -1, 0, [], True) == [Acq(0, 4, 1)]


def test_read_uncommitted_delivers_aborted_records(t):
    fetched = [FB(0, 4, 7, True)]
    assert t.acquire("a", fetched, 500, 0, -1, 0, [Abort(7, 0)], False) == [Acq(0, 4, 1)]


# ---------------------------------------------------------------- poison-record isolation


def _redeliver(t, member, times, fetched, now=0):
    for _ in range(times):
        got = t.acquire(member, fetched, 500, now)
        ack(t, member, [Ack(g.first_offset, g.last_offset, (RELEASE,)) for g in got])
    return t


def test_deeply_redelivered_batches_shrink_and_the_last_attempt_goes_alone(make_tracker):
    t = make_tracker(0, delivery_count_limit=5)  # throttle limit max(2, ceil(5/2)) = 3
    fetched = [FB(0, 7)]
    _redeliver(t, "a", 3, fetched)  # delivery count 3 now
    assert t.acquire("a", fetched, 500, 0) == [Acq(0, 3, 4)]  # 8 >> 1 = 4 records
    ack(t, "a", [Ack(0, 3, (RELEASE,))])
    assert t.acquire("a", fetched, 500, 0) == [Acq(0, 0, 5)]  # last attempt: alone
    assert t.acquire("a", fetched, 500, 0) == [Acq(1, 1, 5)]
    t._check()


def test_throttled_records_are_not_added_after_others(make_tracker):
    t = make_tracker(0, delivery_count_limit=5)
    _redeliver(t, "a", 3, [FB(0, 1)])
    t.acquire("a", [FB(2, 3)], 500, 0)
    ack(t, "a", [Ack(2, 3, (RELEASE,))])
    # 0-1 are at count 3 (throttled), 2-3 at count 1: the fresh ones are not blocked, the deep ones wait
    assert t.acquire("b", [FB(0, 1), FB(2, 3)], 500, 0) == [Acq(0, 0, 4)]
    assert t.acquire("b", [FB(0, 1), FB(2, 3)], 500, 0) == [Acq(1, 1, 4)]
    assert t.acquire("b", [FB(0, 1), FB(2, 3)], 500, 0) == [Acq(2, 3, 2)]


# ---------------------------------------------------------------- loading persisted state


def test_load_builds_entries_gaps_and_drops_leading_terminal(tracker):
    tracker.load(100, [SB(100, 104, 2, 1), SB(105, 109, 0, 2), SB(115, 119, 4, 3)])
    assert (tracker.start_offset, tracker.end_offset) == (105, 120)
    assert tracker.record_state(110) is None  # a hole of the persisted-gap window, no record (yet)
    assert tracker.next_fetch_offset() == 105
    assert tracker.delivery_complete_count == 5
    tracker._check()


def test_load_of_an_empty_state(tracker):
    tracker.load(42, [])
    assert (tracker.start_offset, tracker.end_offset, tracker.state_batches()) == (42, 42, [])


@pytest.mark.parametrize("batches", [
    [SB(90, 104, 2, 1)],                      # below the start offset
    [SB(100, 104, 2, 1), SB(104, 106, 0, 1)],  # overlapping
    [SB(105, 104, 2, 1)],                     # first > last
    [SB(100, 104, 5, 1)],                     # unknown state
    [SB(100, 104, 0, -1)],                    # negative count
])
def test_load_refuses_unusable_state(tracker, batches):
    tracker.load(7, [])
    with pytest.raises(ShareError) as info:
        tracker.load(100, batches)
    assert info.value.error == Errors.UNKNOWN_SERVER_ERROR
    assert (tracker.start_offset, tracker.end_offset) == (7, 7)


# ---------------------------------------------------------------- regressions


def test_rollback_of_a_batch_straddling_a_moved_log_start(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 9, (ACCEPT,))], 0)
    t.update_log_start_offset(5)
    t.complete(w.transition_id, False, 2 * LOCK)  # lock gone: below the SPSO archives, the rest is available
    t._check()
    assert t.record_state(5) == RecordView(RecordState.AVAILABLE, 1, "")
    got = t.acquire("b", [FB(0, 9)], 500, 2 * LOCK)
    assert got == [Acq(5, 9, 2)]
    ack(t, "b", [Ack(5, 9, (ACCEPT,))], 2 * LOCK)
    assert (t.start_offset, t.end_offset, t.state_batches()) == (10, 10, [])


def test_rollback_with_an_earlier_clock_keeps_a_lock_timer(t):
    t.acquire("a", [FB(0, 9)], 500, 0)
    w = t.begin_acknowledge("a", [Ack(0, 0, (ACCEPT,))], 0)
    assert t.expire_locks(LOCK + 500)[0] == 9
    t.complete(w.transition_id, False, 500)  # the write answered "before" the expiry pass
    assert t.record_state(0) == RecordView(RecordState.ACQUIRED, 1, "a")
    t._check()
    assert t.expire_locks(10 ** 9)[0] == 1
