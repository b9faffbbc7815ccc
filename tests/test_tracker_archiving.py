"""ARCHIVING (KIP-1191) in both tracker twins: REJECT and the delivery count limit with a dead-letter queue."""

from __future__ import annotations

import pytest

from sharegroup import AcknowledgementBatch as Ack
from sharegroup import Errors, RecordState, ShareError
from sharegroup import FetchedBatch as FB
from sharegroup import StateBatch as SB

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0
ARCHIVING, ARCHIVED = int(RecordState.ARCHIVING), int(RecordState.ARCHIVED)
LOCK = 1000


@pytest.fixture
def t(make_tracker):
    return make_tracker(0, record_lock_duration_ms=LOCK, delivery_count_limit=2, dead_letter_queue=True)


def ack(tr, member, batches, now=0, commit=True):
    w = tr.begin_acknowledge(member, batches, now)
    if w.transition_id:
        tr.complete(w.transition_id, commit, now)
    tr._check()
    return w


def test_reject_moves_to_archiving_which_holds_the_start_offset_and_is_not_fetchable(t):
    t.acquire("a", [FB(0, 4)], 10, 0)
    w = ack(t, "a", [Ack(0, 1, (REJECT,)), Ack(2, 4, (ACCEPT,))])
    assert w.state_batches == [SB(0, 1, ARCHIVING, 1), SB(2, 4, 2, 1)]
    assert w.start_offset == 0 and w.delivery_complete_count == 3  # ARCHIVING is not delivery-complete
    assert t.record_state(0).state is RecordState.ARCHIVING
    assert (t.start_offset, t.next_fetch_offset(), t.delivery_complete_count) == (0, 5, 3)
    assert t.acquire("b", [FB(0, 4)], 10, 0) == []  # never acquirable again
    assert t.expire_locks(10 * LOCK)[0] == 0  # never times out


def test_complete_archiving_archives_and_lets_the_start_offset_pass(t):
    t.acquire("a", [FB(0, 4)], 10, 0)
    ack(t, "a", [Ack(0, 1, (REJECT,)), Ack(2, 4, (ACCEPT,))])
    w = t.complete_archiving(0, 0)
    assert w == (0, [SB(0, 0, ARCHIVED, 1)], 1, 3)
    t._check()
    w = t.complete_archiving(0, 9)  # offsets that are not ARCHIVING are left alone
    assert w == (0, [SB(1, 1, ARCHIVED, 1)], 5, 0)
    assert t.complete_archiving(0, 9).state_batches == []
    t._check()


def test_release_at_the_limit_and_lock_expiry_at_the_limit_go_to_archiving(t):
    t.acquire("a", [FB(0, 1)], 10, 0)
    ack(t, "a", [Ack(0, 1, (RELEASE,))])
    t.acquire("a", [FB(0, 1)], 1, 0)  # delivery 2 of 2: offset 0 alone (last attempt)
    w = ack(t, "a", [Ack(0, 0, (RELEASE,))])
    assert w.state_batches == [SB(0, 0, ARCHIVING, 2)]
    t.acquire("a", [FB(0, 1)], 10, 0)
    n, w = t.expire_locks(LOCK)
    assert n == 1 and w.state_batches == [SB(1, 1, ARCHIVING, 2)]
    t._check()


def test_member_leave_at_the_limit_goes_to_archiving(t):
    t.acquire("a", [FB(0, 0)], 10, 0)
    ack(t, "a", [Ack(0, 0, (RELEASE,))])
    t.acquire("a", [FB(0, 0)], 10, 0)
    w = t.begin_release("a", 0)
    assert w.state_batches == [SB(0, 0, ARCHIVING, 2)]


def test_gap_and_the_gate_off_archive_directly(t):
    t.acquire("a", [FB(0, 2)], 10, 0)
    w = ack(t, "a", [Ack(0, 0, (GAP,))])
    assert w.state_batches == [SB(0, 0, ARCHIVED, 1)]
    t.dead_letter_queue = False
    assert not t.dead_letter_queue
    w = ack(t, "a", [Ack(1, 1, (REJECT,))])
    assert w.state_batches == [SB(1, 1, ARCHIVED, 1)]
    t.dead_letter_queue = True
    w = ack(t, "a", [Ack(2, 2, (REJECT,))])
    assert w.state_batches == [SB(2, 2, ARCHIVING, 1)]


def test_rollback_restores_acquired_and_archiving_waits_for_its_write(t):
    t.acquire("a", [FB(0, 2)], 10, 0)
    w = t.begin_acknowledge("a", [Ack(0, 2, (REJECT,))], 0)
    assert t.complete_archiving(0, 2).state_batches == []  # still awaiting the write that made it ARCHIVING
    t.complete(w.transition_id, False, 0)
    assert t.record_state(0).state is RecordState.ACQUIRED
    t._check()


def test_persisted_archiving_is_loaded_as_archiving(t):
    t.load(10, [SB(10, 12, ARCHIVING, 3), SB(13, 14, 0, 1)])
    assert t.start_offset == 10 and t.next_fetch_offset() == 13
    assert [b for b in t.state_batches() if b.delivery_state == ARCHIVING] == [SB(10, 12, ARCHIVING, 3)]
    assert t.complete_archiving(10, 12) == (0, [SB(10, 12, ARCHIVED, 3)], 13, 0)
    t._check()


@pytest.mark.parametrize("first,last", [(-1, 3), (5, 4)])
def test_complete_archiving_refuses_a_bad_range(t, first, last):
    with pytest.raises(ShareError) as info:
        t.complete_archiving(first, last)
    assert info.value.error == Errors.INVALID_REQUEST


def test_split_entries_count_archiving_as_not_terminal(make_tracker):
    # Many offsets in one split entry exercise the word-at-a-time terminal count of the native twin.
    tr = make_tracker(0, dead_letter_queue=True)
    tr.acquire("a", [FB(0, 39)], 100, 0)
    types = tuple((REJECT, ACCEPT, GAP, ACCEPT)[k % 4] for k in range(40))
    ack(tr, "a", [Ack(0, 39, types)])
    assert tr.delivery_complete_count == 30 and tr.start_offset == 0
    tr.update_log_start_offset(17)
    assert tr.start_offset == 20  # 17-19 are done; 20 is ARCHIVING
    assert tr.delivery_complete_count == sum(1 for k in range(20, 40) if k % 4) == 15
    assert tr.complete_archiving(0, 39).start_offset == 40  # those below the start offset are archived too
    tr._check()
