"""Long polling, the lock timer service and the coordinator's events, all on a ManualClock: a fetch that
acquired nothing waits for an append, a release, a lock expiry or MaxWaitMs; one timer expires exactly
what is due; member leave, group deletion, offsets deletion and close."""

from __future__ import annotations

import asyncio

from sharegroup import Errors, RecordState
from sharegroup.manager import DelayedFetchPurgatory, ManagerObserver, WaitOutcome

from .conftest import run
from .manager_harness import (
    ACCEPT,
    GROUP,
    LOCK_MS,
    RELEASE,
    T1,
    T2,
    Harness,
    ack_request,
    acquired,
    fetch_request,
    answer,
    until,
)


class Events(ManagerObserver):
    def __init__(self):
        self.expired_fetches = 0
        self.lock_timeouts = []
        self.fetch_latencies = []

    def fetches_expired(self, count):
        self.expired_fetches += count

    def locks_expired(self, group_id, topic_id, partition, records):
        self.lock_timeouts.append((group_id, partition, records))

    def share_fetch_done(self, request, response, latency_ms):
        self.fetch_latencies.append(latency_ms)


async def opened(h, member, parts, group=GROUP):
    r = await h.mgr.share_fetch(fetch_request(member, 0, parts, group=group))
    assert r.error_code is Errors.NONE
    return r


def test_a_waiting_fetch_is_woken_by_an_append_on_its_partition_only():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        h.partition(T2, 0)
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, max_wait_ms=10_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.append(T2, 0, 3)  # another partition: nobody waits on it
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done()
            h.append(T1, 0, 2)
            r = await answer(task)
            assert acquired(r, T1, 0) == [(0, 1, 1)] and mgr.waiting_fetch_count == 0
            mgr._check()

    run(main())


def test_max_wait_ms_timeout_answers_an_empty_response_exactly_at_the_deadline():
    async def main():
        events = Events()
        h = Harness(observer=events)
        h.partition(T1, 0)
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, max_wait_ms=500)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.clock.advance(499)
            await asyncio.sleep(0)
            assert not task.done()
            h.clock.advance(1)
            r = await answer(task)
            assert (r.error_code, r.responses) == (Errors.NONE, [])
            assert events.expired_fetches == 1 and events.fetch_latencies[-1] == 500
            mgr._check()

    run(main())


def test_a_waiting_fetch_is_woken_by_another_members_release():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            r = await opened(h, "m2", [(T1, 0)])
            assert acquired(r, T1, 0) == []
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m2", 1, max_wait_ms=10_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            r = await mgr.share_acknowledge(ack_request("m1", 1, [(T1, 0, [(0, 1, RELEASE), (2, 3, ACCEPT)])]))
            assert r.partition(T1, 0).error_code is Errors.NONE
            r = await answer(task)
            assert acquired(r, T1, 0) == [(0, 1, 2)]

    run(main())


def test_a_fetch_carrying_acknowledgements_waits_like_any_fetch_and_its_response_carries_their_outcome():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            sp = mgr.share_partition(GROUP, T1, 0)
            # The acknowledgements are applied (and durable) at once; the fetch then waits for records.
            task = asyncio.ensure_future(
                mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, ACCEPT)])], max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done() and sp.start_offset == 4
            h.append(T1, 0, 2)
            r = await answer(task)
            assert r.partition(T1, 0).acknowledge_error_code is Errors.NONE and acquired(r, T1, 0) == [(4, 5, 1)]
            # Nothing new: the fetch waits out MaxWaitMs, then answers the acknowledgement's outcome alone.
            task = asyncio.ensure_future(
                mgr.share_fetch(fetch_request("m1", 2, [(T1, 0, [(4, 5, ACCEPT)])], max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.clock.advance(59_999)
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done()
            h.clock.advance(1)
            r = await answer(task)
            assert r.partition(T1, 0).acknowledge_error_code is Errors.NONE and acquired(r, T1, 0) == []
            assert sp.start_offset == 6

    run(main())


def test_lock_expiry_wakes_a_waiting_fetch_through_the_timer_service():
    async def main():
        events = Events()
        h = Harness(observer=events)
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            await opened(h, "m2", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m2", 1, max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.clock.advance(LOCK_MS - 1)
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done()
            h.clock.advance(1)  # the lock timer fires: m1's records become available again
            r = await answer(task)
            assert acquired(r, T1, 0) == [(0, 3, 2)]
            assert events.lock_timeouts == [(GROUP, 0, 4)]
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).member_id == "m2"

    run(main())


def test_the_lock_timer_expires_exactly_the_share_partitions_that_are_due():
    async def main():
        h = Harness()
        for p in range(3):
            h.partition(T1, p, batches=[2])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            h.clock.advance(1000)
            await opened(h, "m2", [(T1, 1)])
            await opened(h, "m3", [(T1, 2)])
            await mgr.share_acknowledge(ack_request("m3", 1, [(T1, 2, [(0, 1, ACCEPT)])]))
            assert mgr.lock_timer.next_deadline_ms == 1_000_000 + LOCK_MS
            assert h.clock.pending_timers == 1  # one clock timer for every lock of the manager
            h.clock.advance(LOCK_MS - 1000)
            await until(lambda: mgr.lock_timer.expired_total == 2)
            sps = [mgr.share_partition(GROUP, T1, p) for p in range(3)]
            assert [sps[0].record_state(0).state, sps[1].record_state(0).state] == [
                RecordState.AVAILABLE, RecordState.ACQUIRED]
            assert mgr.lock_timer.next_deadline_ms == 1_001_000 + LOCK_MS
            h.clock.advance(1000)
            await until(lambda: mgr.lock_timer.expired_total == 4)
            assert sps[1].record_state(1)[:3] == (RecordState.AVAILABLE, 1, "")
            assert sps[2].start_offset == 2  # accepted records never expire
            assert len(mgr.lock_timer) == 0
            mgr._check()

    run(main())


def test_member_leave_releases_its_records_keeping_delivery_counts_and_wakes_waiters():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3])
        h.partition(T1, 1, batches=[2])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0), (T1, 1)])
            await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 2, RELEASE)])], max_records=0))
            r = await mgr.share_fetch(fetch_request("m1", 2))
            assert acquired(r, T1, 0) == [(0, 2, 2)]
            await opened(h, "m2", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m2", 1, max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            await mgr.on_member_left(GROUP, "m1")
            assert mgr.sessions.get(GROUP, "m1") is None
            r = await answer(task)
            # the delivery count was kept (2 deliveries before); on its last allowed delivery (the group's
            # limit is 3) a record is delivered alone
            assert acquired(r, T1, 0) == [(0, 0, 3)]
            sp1 = mgr.share_partition(GROUP, T1, 1)
            assert sp1.record_state(0)[:3] == (RecordState.AVAILABLE, 1, "")
            assert h.persister.state_of(GROUP, T1, 1).state_batches == [(0, 1, 0, 1)]

    run(main())


def test_group_deleted_drops_sessions_and_share_partitions_and_offsets_deleted_reinitializes():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T2, 0, batches=[4])
        h.persister.seed("g2", T1, 0, state_epoch=0, start_offset=0, state_batches=[])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0), (T2, 0)])
            await opened(h, "x1", [(T1, 0)], group="g2")
            await mgr.on_offsets_deleted(GROUP, [T2])
            assert mgr.share_partition(GROUP, T2, 0) is None and mgr.share_partition(GROUP, T1, 0) is not None
            h.persister.seed(GROUP, T2, 0, state_epoch=1, start_offset=2, state_batches=[])  # offsets reset
            r = await mgr.share_fetch(fetch_request("m1", 1))
            assert acquired(r, T2, 0) == [(2, 3, 1)]  # re-read: the new start offset
            await mgr.on_group_deleted(GROUP)
            assert mgr.sessions.get(GROUP, "m1") is None and mgr.sessions.get("g2", "x1") is not None
            assert mgr.share_partition(GROUP, T1, 0) is None and mgr.share_partition("g2", T1, 0) is not None
            assert mgr.share_partition_count == 1
            mgr._check()

    run(main())


def test_close_answers_waiters_releases_every_acquired_record_and_stops_the_timer():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1)
        mgr = h.mgr
        await mgr.start()
        await opened(h, "m1", [(T1, 0)])
        await opened(h, "m2", [(T1, 1)])
        task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m2", 1, max_wait_ms=60_000)))
        await until(lambda: mgr.waiting_fetch_count == 1)
        await mgr.close()
        r = await answer(task)
        assert (r.error_code, r.responses) == (Errors.NONE, [])
        sp = mgr.share_partition(GROUP, T1, 0)
        assert sp.record_state(0)[:3] == (RecordState.AVAILABLE, 1, "")
        assert h.persister.state_of(GROUP, T1, 0).state_batches == [(0, 3, 0, 1)]
        assert len(mgr.sessions) == 0 and mgr.waiting_fetch_count == 0 and h.clock.pending_timers == 0
        r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
        assert r.error_code is Errors.UNKNOWN_SERVER_ERROR

    run(main())


def test_a_cancelled_waiting_fetch_leaves_nothing_behind():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert mgr.waiting_fetch_count == 0
            mgr._check()

    run(main())


def test_purgatory_wakes_only_the_watchers_of_one_partition_and_one_group():
    async def main():
        from sharegroup.clock import ManualClock

        clock = ManualClock(0)
        purgatory = DelayedFetchPurgatory(clock)
        waiters = [purgatory.watch("g" if i % 2 else "h", [(T1, i % 5)], 1000 + i) for i in range(10)]
        assert len(purgatory) == 10 and clock.pending_timers == 1
        assert purgatory.wake_share_partition("g", T1, 3) == 1  # waiter 3 (group g); 8 is group h
        assert waiters[3].future.result() is WaitOutcome.WOKEN and not waiters[8].future.done()
        assert purgatory.wake_partition(T1, 3) == 1 and waiters[8].future.result() is WaitOutcome.WOKEN
        clock.advance(1001)
        assert [w.future.done() for w in waiters] == [True, True, False, True, False, False, False, False, True, False]
        purgatory._check()
        assert purgatory.close() == 6 and waiters[9].future.result() is WaitOutcome.CLOSED

    run(main())


def test_concurrent_waiting_fetches_of_one_partition_never_share_a_record():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            members = [f"m{i}" for i in range(4)]
            for m in members:
                await opened(h, m, [(T1, 0)])
            tasks = [asyncio.ensure_future(mgr.share_fetch(fetch_request(m, 1, max_wait_ms=10_000, max_records=2)))
                     for m in members]
            await until(lambda: mgr.waiting_fetch_count == 4)
            for _ in range(3):
                h.append(T1, 0, 2)  # three producer batches: three of the four fetches get one each
            await until(lambda: sum(t.done() for t in tasks) == 3 and mgr.waiting_fetch_count == 1)
            got = {m: acquired(t.result(), T1, 0) for m, t in zip(members, tasks) if t.done()}
            assert sorted(r for rs in got.values() for r in rs) == [(0, 1, 1), (2, 3, 1), (4, 5, 1)]
            sp = mgr.share_partition(GROUP, T1, 0)
            for m, ranges in got.items():
                assert all(sp.record_state(o).member_id == m for f, l, _dc in ranges for o in range(f, l + 1))
            last = next(t for t in tasks if not t.done())
            h.append(T1, 0, 1)
            assert acquired(await answer(last), T1, 0) == [(6, 6, 1)]
            mgr._check()

    run(main())


def test_a_fetch_waiting_when_its_member_leaves_answers_session_not_found_without_acquiring():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0)])
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, max_wait_ms=10_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            await mgr.on_member_left(GROUP, "m1")
            h.append(T1, 0, 2)
            r = await answer(task)
            assert (r.error_code, r.responses) == (Errors.SHARE_SESSION_NOT_FOUND, [])
            assert mgr.share_partition(GROUP, T1, 0).record_state(0) is None  # nothing acquired for it

    run(main())


def test_a_late_accept_after_lock_expiry_is_invalid_record_state_whether_available_again_or_acquired_by_another():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1, batches=[4])
        async with h.mgr as mgr:
            await opened(h, "m1", [(T1, 0), (T1, 1)])
            await opened(h, "m2", [(T1, 1)])
            h.clock.advance(LOCK_MS)  # m1's locks expire on both partitions
            await until(lambda: mgr.lock_timer.expired_total == 8)
            sp0, sp1 = mgr.share_partition(GROUP, T1, 0), mgr.share_partition(GROUP, T1, 1)
            assert sp0.record_state(0).state is RecordState.AVAILABLE
            r = await mgr.share_fetch(fetch_request("m2", 1))  # partition 1's records go to m2
            assert acquired(r, T1, 1) == [(0, 3, 2)]
            # m1 accepts late: partition 0's records are available again, partition 1's are m2's.
            r = await mgr.share_acknowledge(ack_request("m1", 1, [(T1, 0, [(0, 3, ACCEPT)]),
                                                                  (T1, 1, [(0, 3, ACCEPT)])]))
            assert r.partition(T1, 0).error_code is Errors.INVALID_RECORD_STATE
            assert r.partition(T1, 1).error_code is Errors.INVALID_RECORD_STATE
            assert sp0.record_state(0) == (RecordState.AVAILABLE, 1, "")
            assert sp1.record_state(0) == (RecordState.ACQUIRED, 2, "m2") and sp1.start_offset == 0
            # The same late ACCEPT piggy-backed on a fetch answers it as the partition's acknowledge error.
            r = await mgr.share_fetch(fetch_request("m1", 2, [(T1, 1, [(0, 3, ACCEPT)])], max_wait_ms=0))
            assert r.partition(T1, 1).acknowledge_error_code is Errors.INVALID_RECORD_STATE
            assert sp1.record_state(3) == (RecordState.ACQUIRED, 2, "m2")
            # Once m2 has accepted them the start offset passed them: as Kafka, an acknowledgement wholly
            # below the start offset is skipped without error (there is nothing left to refuse).
            r = await mgr.share_acknowledge(ack_request("m2", 2, [(T1, 1, [(0, 3, ACCEPT)])]))
            assert r.partition(T1, 1).error_code is Errors.NONE and sp1.start_offset == 4
            r = await mgr.share_acknowledge(ack_request("m1", 3, [(T1, 1, [(0, 3, ACCEPT)])]))
            assert r.partition(T1, 1).error_code is Errors.NONE

    run(main())
