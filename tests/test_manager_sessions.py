"""Share-session rules of the SharePartitionManager (Kafka's ShareSessionCache and share-session
contexts): open, next epoch, wrong epoch, unknown session, final epoch, the session limit, member
leave freeing a slot, forgotten partitions and which partitions a response lists."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import Errors, RecordState
from sharegroup.config import BrokerConfig
from sharegroup.manager import ShareSessionCache, next_epoch
from sharegroup.share_messages import ShareFetchRequest

from .conftest import run
from .manager_harness import (
    ACCEPT,
    GROUP,
    LOCK_MS,
    T1,
    T2,
    Harness,
    ack_request,
    acquired,
    fetch_request,
    listed,
    answer,
    until,
)

MAX = 2**31 - 1


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert [next_epoch(e) for e in (0, 1, 41, MAX - 1, MAX, -1)] == [1, 2, 42, MAX, 1, -1]


def test_cache_epoch_rules_and_wrap_around():
    cache = ShareSessionCache(2)
    ctx = cache.new_fetch_context("g", "m", 0, [(T1, 0)], [], False)
    session = ctx.session
    assert (ctx.kind.value, session.epoch, ctx.fetch_partitions) == ("full", 1, [(T1, 0)])
    session.epoch = MAX
    ctx = cache.new_fetch_context("g", "m", MAX, [], [], False)
    assert (ctx.kind.value, session.epoch) == ("subsequent", 1)
    with pytest.raises(Exception) as info:
        cache.new_fetch_context("g", "m", MAX, [], [], False)
    assert info.value.error is Errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge_session_update("g", "m", 1) is session and session.epoch == 2
    cache._check()


def test_open_lists_every_requested_partition_and_next_epoch_advances():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1)
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T1, 1)]))
            assert r.error_code is Errors.NONE and r.acquisition_lock_timeout_ms == LOCK_MS
            assert listed(r) == [(T1, 0), (T1, 1)]  # full response: the empty partition is listed too
            assert acquired(r, T1, 0) == [(0, 3, 1)] and acquired(r, T1, 1) == []
            assert mgr.sessions.get(GROUP, "m1").epoch == 1
            r = await mgr.share_fetch(fetch_request("m1", 1))
            assert (r.error_code, listed(r)) == (Errors.NONE, [])  # nothing changed: nothing listed
            assert mgr.sessions.get(GROUP, "m1").epoch == 2
            mgr._check()

    run(main())


def test_wrong_epoch_and_unknown_session_are_top_level_errors():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 3, [(T1, 0)]))
            assert (r.error_code, r.responses, r.acquisition_lock_timeout_ms) == (Errors.SHARE_SESSION_NOT_FOUND, [], 0)
            r = await mgr.share_fetch(fetch_request("m1", -1))
            assert r.error_code is Errors.SHARE_SESSION_NOT_FOUND
            r = await mgr.share_fetch(fetch_request("m1", -2))
            assert r.error_code is Errors.SHARE_SESSION_NOT_FOUND
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            for epoch in (0 + 2, 5, -2, -(2**31)):  # below -1 is an epoch like any other, as in Kafka
                r = await mgr.share_fetch(fetch_request("m1", epoch))
                assert r.error_code is Errors.INVALID_SHARE_SESSION_EPOCH, epoch
            assert mgr.sessions.get(GROUP, "m1").epoch == 1  # refused requests change nothing
            assert h.mgr.share_partition(GROUP, T1, 0).record_state(0).state is RecordState.ACQUIRED

    run(main())


def test_acks_at_epoch_zero_are_invalid_and_the_old_session_survives():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0, [(0, 3, ACCEPT)])]))
            assert r.error_code is Errors.INVALID_REQUEST
            sp = mgr.share_partition(GROUP, T1, 0)
            assert sp.record_state(0).state is RecordState.ACQUIRED
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, ACCEPT)])]))
            assert r.error_code is Errors.NONE and r.partition(T1, 0).acknowledge_error_code is Errors.NONE
            assert sp.start_offset == 4

    run(main())


def test_reopening_at_epoch_zero_replaces_the_session_but_keeps_its_records_acquired():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            old = mgr.sessions.get(GROUP, "m1")
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            assert mgr.sessions.get(GROUP, "m1") is not old and len(mgr.sessions) == 1
            assert acquired(r, T1, 0) == []
            assert mgr.share_partition(GROUP, T1, 0).record_state(2).member_id == "m1"

    run(main())


def test_session_limit_waits_max_wait_then_refuses_and_a_leave_frees_a_slot():
    async def main():
        h = Harness(config=BrokerConfig(max_share_sessions=2))
        h.partition(T1, 0)
        async with h.mgr as mgr:
            for m in ("m1", "m2"):
                assert (await mgr.share_fetch(fetch_request(m, 0, [(T1, 0)]))).error_code is Errors.NONE
            assert (await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))).error_code is Errors.NONE  # re-open
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m3", 0, [(T1, 0)], max_wait_ms=500)))
            await until(lambda: mgr.waiting_fetch_count == 1, "the refusal to be held")
            h.clock.advance(499)
            await asyncio.sleep(0)
            assert not task.done()
            h.clock.advance(1)
            r = await answer(task)
            assert (r.error_code, r.responses) == (Errors.SHARE_SESSION_LIMIT_REACHED, [])
            assert mgr.sessions.get(GROUP, "m3") is None
            await mgr.on_member_left(GROUP, "m2")
            assert (await mgr.share_fetch(fetch_request("m3", 0, [(T1, 0)]))).error_code is Errors.NONE
            assert sorted(mgr.sessions.members_of(GROUP)) == ["m1", "m3"]
            mgr._check()

    run(main())


def test_final_epoch_fetch_applies_acks_then_closes_the_session_releasing_the_rest():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[2, 2])
        h.partition(T1, 1, batches=[3])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T1, 1)]))
            assert acquired(r, T1, 0) == [(0, 3, 1)] and acquired(r, T1, 1) == [(0, 2, 1)]
            r = await mgr.share_fetch(fetch_request("m1", -1, [(T1, 0, [(0, 1, ACCEPT)])]))
            assert r.error_code is Errors.NONE
            assert listed(r) == [(T1, 0)] and r.partition(T1, 0).acknowledge_error_code is Errors.NONE
            assert acquired(r, T1, 0) == []  # a final fetch acquires nothing
            assert mgr.sessions.get(GROUP, "m1") is None
            sp0, sp1 = mgr.share_partition(GROUP, T1, 0), mgr.share_partition(GROUP, T1, 1)
            assert sp0.start_offset == 2
            assert [sp0.record_state(o)[:2] for o in (2, 3)] == [(RecordState.AVAILABLE, 1)] * 2
            assert sp1.record_state(0)[:2] == (RecordState.AVAILABLE, 1)  # released, delivery count kept
            assert (await mgr.share_fetch(fetch_request("m1", 1))).error_code is Errors.SHARE_SESSION_NOT_FOUND
            mgr._check()

    run(main())


def test_share_acknowledge_epoch_rules():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T2, 0, batches=[1])
        async with h.mgr as mgr:
            r = await mgr.share_acknowledge(ack_request("m1", 0, []))
            assert r.error_code is Errors.INVALID_SHARE_SESSION_EPOCH  # epoch 0 first, even without a session
            r = await mgr.share_acknowledge(ack_request("m1", 1, []))
            assert r.error_code is Errors.SHARE_SESSION_NOT_FOUND
            r = await mgr.share_acknowledge(ack_request("m1", -2, []))
            assert r.error_code is Errors.SHARE_SESSION_NOT_FOUND  # below -1: an epoch like any other
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            for epoch in (2, -2):
                r = await mgr.share_acknowledge(ack_request("m1", epoch, [(T1, 0, [(0, 0, ACCEPT)])]))
                assert r.error_code is Errors.INVALID_SHARE_SESSION_EPOCH, epoch
            assert mgr.share_partition(GROUP, T1, 0).start_offset == 0  # refused: nothing applied
            r = await mgr.share_acknowledge(ack_request("m1", 1, [(T1, 0, [(0, 0, ACCEPT)]), (T2, 0, [])]))
            assert r.error_code is Errors.NONE and r.partition(T1, 0).error_code is Errors.NONE
            assert r.partition(T2, 0).error_code is Errors.NONE  # sent without batches: still answered
            assert r.acquisition_lock_timeout_ms == LOCK_MS
            assert mgr.sessions.get(GROUP, "m1").epoch == 2  # ShareAcknowledge advances the epoch too
            assert (await mgr.share_fetch(fetch_request("m1", 1))).error_code is Errors.INVALID_SHARE_SESSION_EPOCH
            r = await mgr.share_acknowledge(ack_request("m1", -1, [(T1, 0, [(1, 1, ACCEPT)])]))
            assert r.error_code is Errors.NONE and mgr.sessions.get(GROUP, "m1") is None
            sp = mgr.share_partition(GROUP, T1, 0)
            assert (sp.start_offset, sp.record_state(2)[:3]) == (2, (RecordState.AVAILABLE, 1, ""))

    run(main())


def test_forgotten_partitions_leave_the_session_and_are_no_longer_fetched():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        h.partition(T2, 0)
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T2, 0)]))
            r = await mgr.share_fetch(fetch_request("m1", 1, forgotten=[(T2, 0)]))
            assert list(mgr.sessions.get(GROUP, "m1").partitions) == [(T1, 0)]
            h.append(T2, 0, 5)
            r = await mgr.share_fetch(fetch_request("m1", 2))
            assert listed(r) == []
            h.append(T1, 0, 2)
            r = await mgr.share_fetch(fetch_request("m1", 3))
            assert listed(r) == [(T1, 0)] and acquired(r, T1, 0) == [(0, 1, 1)]

    run(main())


def test_subsequent_responses_list_records_additions_once_and_errors_until_one_update_after_recovery():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        h.partition(T1, 1)
        h.partition(T1, 2, seed=False)  # its durable state is not initialized yet
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 1)]))
            assert listed(r) == [(T1, 1)] and r.partition(T1, 1).error_code is Errors.NONE  # added: listed once
            r = await mgr.share_fetch(fetch_request("m1", 2))
            assert listed(r) == []
            r = await mgr.share_fetch(fetch_request("m1", 3, [(T1, 2)]))
            assert listed(r) == [(T1, 2)] and r.partition(T1, 2).error_code is Errors.UNKNOWN_SERVER_ERROR
            r = await mgr.share_fetch(fetch_request("m1", 4))
            assert listed(r) == [(T1, 2)]  # an error is listed every time
            h.persister.seed(GROUP, T1, 2, state_epoch=0, start_offset=0, state_batches=[])
            r = await mgr.share_fetch(fetch_request("m1", 5))
            assert listed(r) == [(T1, 2)] and r.partition(T1, 2).error_code is Errors.NONE  # recovered: once
            r = await mgr.share_fetch(fetch_request("m1", 6))
            assert listed(r) == []
            h.append(T1, 1, 3)
            r = await mgr.share_fetch(fetch_request("m1", 7))
            assert listed(r) == [(T1, 1)] and acquired(r, T1, 1) == [(0, 2, 1)]
            assert list(mgr.sessions.get(GROUP, "m1").partitions)[-1] == (T1, 1)  # records: moved to the end

    run(main())


def test_a_concurrent_request_moving_the_epoch_makes_a_waiting_fetch_answer_an_error_without_acquiring():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, max_wait_ms=1000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert (await mgr.share_acknowledge(ack_request("m1", 2, []))).error_code is Errors.NONE
            h.append(T1, 0, 3)
            r = await answer(task)
            assert (r.error_code, r.responses) == (Errors.INVALID_SHARE_SESSION_EPOCH, [])
            assert mgr.share_partition(GROUP, T1, 0).record_state(0) is None  # nothing acquired
            r = await mgr.share_fetch(fetch_request("m1", 3))
            assert acquired(r, T1, 0) == [(0, 2, 1)]

    run(main())


def test_malformed_requests_answer_invalid_request_and_change_nothing():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[2])
        async with h.mgr as mgr:
            bad = [
                ShareFetchRequest(GROUP, "", 0),
                ShareFetchRequest("", "m1", 0),
                ShareFetchRequest(GROUP, "m1", 0, max_records=-1),
                ShareFetchRequest(GROUP, "m1", 0, share_acquire_mode=7),
                ShareFetchRequest(GROUP, "m1", 0, is_renew_ack=True),  # a renew fetch must ask for nothing
                ShareFetchRequest(GROUP, "m1", 0, topics=("not a topic",)),
                ShareFetchRequest(GROUP, "m1", 2**31),
            ]
            for request in bad:
                r = await mgr.share_fetch(request)
                assert r.error_code is Errors.INVALID_REQUEST, request
            assert len(mgr.sessions) == 0 and mgr.share_partition_count == 0

    run(main())


def test_closing_a_connection_removes_only_the_sessions_it_owns():
    """Rule (Kafka's disconnect tracking): a session belongs to the connection that opened it; closing
    that connection removes it, closing any other connection does not, and a session re-opened on a new
    connection is the new connection's."""
    cache = ShareSessionCache(4)
    cache.new_fetch_context("g", "a", 0, [(T1, 0)], [], False, "c1")
    cache.new_fetch_context("g", "b", 0, [(T1, 0)], [], False, "c1")
    reopened = cache.new_fetch_context("g", "a", 0, [(T1, 0)], [], False, "c2").session
    cache._check()
    assert cache.connection_closed("c3") == []
    assert [s.key for s in cache.connection_closed("c1")] == [("g", "b")]  # "a" now belongs to c2
    assert cache.get("g", "a") is reopened and cache.get("g", "b") is None
    assert cache.connection_closed("c1") == []
    cache.remove("g", "a")  # left by other means: its connection no longer owns it
    assert cache.connection_closed("c2") == []
    cache._check()


def test_a_share_session_survives_its_member_reconnecting_quickly():
    """Rule: closing a connection removes only the sessions that connection owns. The member re-opens
    its session at epoch 0 on connection c2; while that fetch long-polls, the close of c1 (the old
    connection) arrives: the new session and the records the member holds survive, the waiting fetch
    is answered normally and the next epoch is served."""
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3])
        async with h.mgr as mgr:
            first = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]), connection_id="c1")
            assert acquired(first, T1, 0) == [(0, 2, 1)]
            waiting = asyncio.ensure_future(
                mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], max_wait_ms=5000), connection_id="c2"))
            await until(lambda: mgr.waiting_fetch_count == 1, "the epoch-0 fetch to long-poll")
            await mgr.on_connection_closed("c1")
            assert mgr.sessions.get(GROUP, "m1") is not None
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).member_id == "m1"  # not released
            h.append(T1, 0, 2)
            r = await answer(waiting)
            assert (r.error_code, acquired(r, T1, 0)) == (Errors.NONE, [(3, 4, 1)])
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 4, ACCEPT)])]))
            assert r.error_code is Errors.NONE and r.partition(T1, 0).acknowledge_error_code is Errors.NONE
            assert mgr.share_partition(GROUP, T1, 0).start_offset == 5
            await mgr.on_connection_closed("c2")  # the owner's close does end it and release the rest
            assert mgr.sessions.get(GROUP, "m1") is None
            mgr._check()

    run(main())
