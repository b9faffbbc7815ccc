"""The ShareFetch path of the SharePartitionManager: acknowledgements before acquisition, one MaxRecords
budget across partitions in rotating order, the batches a response ships, acquire modes, renew acks,
MinBytes, lazily initialized share-partitions (never cached broken) and log start moves."""

from __future__ import annotations

import asyncio

from sharegroup import Errors, RecordState, ShareGroupConfig
from sharegroup.share_messages import ShareAcquireMode

from .conftest import run
from .manager_harness import (
    ACCEPT,
    GROUP,
    LOCK_MS,
    RELEASE,
    RENEW,
    START_MS,
    T1,
    T2,
    Configs,
    Harness,
    ack_request,
    acquired,
    fetch_request,
    listed,
    answer,
    until,
)


def test_piggybacked_acks_apply_before_acquiring_so_released_records_come_back_in_the_same_response():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            assert acquired(r, T1, 0) == [(0, 3, 1)]
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, RELEASE)])]))
            data = r.partition(T1, 0)
            assert data.acknowledge_error_code is Errors.NONE
            assert acquired(r, T1, 0) == [(0, 3, 2)]  # released first, then acquired again
            assert h.persister.state_of(GROUP, T1, 0).state_batches[0][:4] == (0, 3, 0, 1)

    run(main())


def test_ack_errors_are_per_partition_and_the_fetch_still_runs():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1, batches=[2])
        h.partition(T2, 0)
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            r = await mgr.share_fetch(fetch_request("m1", 1, [
                (T1, 0, [(0, 1, ACCEPT), (2, 2, 9)]),  # unknown type: nothing of the partition applied
                (T1, 1, [(0, 1, ACCEPT)]),  # the share-partition is not loaded yet
                (T2, 0, [(0, 0, RENEW)]),  # RENEW outside a renew-ack request
            ]))
            assert r.partition(T1, 0).acknowledge_error_code is Errors.INVALID_REQUEST
            assert r.partition(T2, 0).acknowledge_error_code is Errors.INVALID_REQUEST
            data = r.partition(T1, 1)
            assert data.acknowledge_error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION  # not loaded yet
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).state is RecordState.ACQUIRED
            assert acquired(r, T1, 1) == [(0, 1, 1)]  # the fetch ran: T1-1 joined the session
            r = await mgr.share_fetch(fetch_request("m2", 0, [(T1, 1)]))
            r = await mgr.share_fetch(fetch_request("m2", 1, [(T1, 1, [(0, 1, ACCEPT)])]))
            assert r.partition(T1, 1).acknowledge_error_code is Errors.INVALID_RECORD_STATE  # m1 holds them

    run(main())


def test_one_max_records_budget_across_partitions_visited_in_rotating_order():
    async def main():
        h = Harness()
        for p in range(3):
            h.partition(T1, p, batches=[1] * 10)  # one-record batches: no rounding up
        async with h.mgr as mgr:
            parts = [(T1, 0), (T1, 1), (T1, 2)]
            r = await mgr.share_fetch(fetch_request("m1", 0, parts, max_records=4))
            assert [acquired(r, T1, p) for p in range(3)] == [[(0, 3, 1)], [], []]
            # session order [0, 1, 2]; epoch 1 rotates by 1: 1 first
            r = await mgr.share_fetch(fetch_request("m1", 1, max_records=4))
            assert listed(r) == [(T1, 1)] and acquired(r, T1, 1) == [(0, 3, 1)]
            # session order [0, 2, 1] (records moved 1 to the end); epoch 2 rotates by 2: 1 first
            r = await mgr.share_fetch(fetch_request("m1", 2, max_records=4))
            assert listed(r) == [(T1, 1)] and acquired(r, T1, 1) == [(4, 7, 1)]
            # epoch 3: no rotation over [0, 2, 1]
            r = await mgr.share_fetch(fetch_request("m1", 3, max_records=4))
            assert listed(r) == [(T1, 0)] and acquired(r, T1, 0) == [(4, 7, 1)]
            # session [2, 1, 0]; epoch 4 rotates by 1: [1, 0, 2]; 1 has 2 left, 0 gets the other 2
            r = await mgr.share_fetch(fetch_request("m1", 4, max_records=4))
            assert listed(r) == [(T1, 1), (T1, 0)]
            assert acquired(r, T1, 1) == [(8, 9, 1)] and acquired(r, T1, 0) == [(8, 9, 1)]
            assert [mgr.share_partition(GROUP, T1, p).in_flight_count for p in range(3)] == [10, 10, 0]

    run(main())


def test_response_ships_exactly_the_log_batches_holding_acquired_offsets_as_the_logs_own_handles():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3, 3, 3, 3])
        async with h.mgr as mgr:
            log_batches = h.logs.read(T1, 0, 0, 10**6).batches
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], max_records=6))
            r = await mgr.share_fetch(fetch_request("m2", 0, [(T1, 0)], max_records=3))
            data = r.partition(T1, 0)
            assert acquired(r, T1, 0) == [(6, 8, 1)]
            assert data.records == (log_batches[2],) and data.records[0] is log_batches[2]
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 5, RELEASE)])], max_records=100))
            # released 0-5 come back (delivery 2) and 9-11 are new: batches 0, 1 and 3, not batch 2
            assert acquired(r, T1, 0) == [(0, 5, 2), (9, 11, 1)]
            assert r.partition(T1, 0).records == (log_batches[0], log_batches[1], log_batches[3])

    run(main())


def test_record_limit_acquire_mode_caps_max_records():
    async def main():
        record_limit = ShareGroupConfig(record_lock_duration_ms=LOCK_MS, acquire_mode="record_limit")
        h = Harness(coordinator=Configs(g2=record_limit))
        h.partition(T1, 0, batches=[5, 5, 5])
        h.persister.seed("g2", T1, 0, state_epoch=0, start_offset=0, state_batches=[])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], max_records=7))
            assert acquired(r, T1, 0) == [(0, 9, 1)]  # batch-optimized: rounded up to the batch end
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], group="g2", max_records=7))
            assert acquired(r, T1, 0) == [(0, 6, 1)]  # group in record-limit mode: a hard cap
            r = await mgr.share_fetch(fetch_request("m2", 0, [(T1, 0)], max_records=4,
                                                    share_acquire_mode=ShareAcquireMode.RECORD_LIMIT))
            # the partition is batch-optimized: the request gets only whole batches within its budget,
            # and the first one even when it is larger than the budget
            assert acquired(r, T1, 0) == [(10, 14, 1)]
            h.append(T1, 0, 2)
            h.append(T1, 0, 2)
            r = await mgr.share_fetch(fetch_request("m2", 1, max_records=3,
                                                    share_acquire_mode=ShareAcquireMode.RECORD_LIMIT))
            assert acquired(r, T1, 0) == [(15, 16, 1)]

    run(main())


def test_batch_size_cuts_acquired_ranges_at_producer_batch_boundaries():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[2, 2, 2])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], batch_size=2))
            assert acquired(r, T1, 0) == [(0, 1, 1), (2, 3, 1), (4, 5, 1)]

    run(main())


def test_renew_ack_fetch_restarts_locks_and_acquires_nothing():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        mgr = h.mgr  # not started: this test runs the lock timer's passes itself
        await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
        sp = mgr.share_partition(GROUP, T1, 0)
        h.clock.advance(20_000)
        h.append(T1, 0, 3)
        r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, RENEW)])], is_renew_ack=True,
                                                max_records=0, min_bytes=0, max_bytes=0))
        assert r.error_code is Errors.NONE and r.partition(T1, 0).acknowledge_error_code is Errors.NONE
        assert r.acquired_count == 0 and sp.end_offset == 4  # the renew fetch acquired nothing
        r = await mgr.share_acknowledge(ack_request("m1", 2, [(T1, 0, [(0, 0, RENEW)])]))
        assert r.partition(T1, 0).error_code is Errors.INVALID_REQUEST  # RENEW needs IsRenewAck
        h.clock.advance(10_000)  # the first lock's deadline: renewed, so nothing is due
        assert await mgr.expire_due_locks() == 0
        assert sp.record_state(0)[:3] == (RecordState.ACQUIRED, 1, "m1")
        r = await mgr.share_acknowledge(ack_request("m1", 3, [(T1, 0, [(0, 1, RENEW)])], is_renew_ack=True))
        assert r.partition(T1, 0).error_code is Errors.NONE
        h.clock.advance(20_000)  # the first renewal's deadline: 2-3 expire, 0-1 were renewed again
        assert await mgr.expire_due_locks() == 2
        states = [sp.record_state(o).state for o in range(4)]
        assert states == [RecordState.ACQUIRED] * 2 + [RecordState.AVAILABLE] * 2
        await mgr.close()

    run(main())


def test_min_bytes_holds_the_fetch_until_enough_bytes_or_max_wait():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 1, min_bytes=300, max_wait_ms=5000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.append(T1, 0, 5)  # 111 bytes
            h.append(T1, 0, 5)  # 222 bytes
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done() and mgr.share_partition(GROUP, T1, 0).end_offset == 0  # nothing acquired yet
            h.append(T1, 0, 5)  # 333 bytes
            r = await answer(task)
            assert acquired(r, T1, 0) == [(0, 14, 1)]
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 2, min_bytes=300, max_wait_ms=5000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.append(T1, 0, 1)
            await until(lambda: mgr.waiting_fetch_count == 1)
            h.clock.advance(5000)  # MaxWaitMs: take what there is
            r = await answer(task)
            assert acquired(r, T1, 0) == [(15, 15, 1)]

    run(main())


def test_uninitialized_and_failed_share_partitions_answer_their_code_and_are_retried_not_cached():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3], seed=False)
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            assert r.partition(T1, 0).error_code is Errors.UNKNOWN_SERVER_ERROR  # durable state not initialized
            assert mgr.share_partition_count == 0
            h.persister.seed(GROUP, T1, 0, state_epoch=0, start_offset=0, state_batches=[])
            h.persister.fail_next_reads(1, Errors.COORDINATOR_LOAD_IN_PROGRESS)
            r = await mgr.share_fetch(fetch_request("m1", 1))
            assert r.partition(T1, 0).error_code is Errors.COORDINATOR_NOT_AVAILABLE
            assert mgr.share_partition_count == 0
            r = await mgr.share_fetch(fetch_request("m1", 2))
            assert r.partition(T1, 0).error_code is Errors.NONE and acquired(r, T1, 0) == [(0, 2, 1)]
            assert mgr.share_partition_count == 1

    run(main())


def test_fenced_share_partitions_are_dropped_and_reinitialized_from_durable_state():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1, batches=[2], seed=False)
        h.persister.seed(GROUP, T1, 1, state_epoch=0, start_offset=0, state_batches=[], leader_epoch=3)
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T1, 1)]))
            assert r.partition(T1, 1).error_code is Errors.NOT_LEADER_OR_FOLLOWER  # a newer leader exists
            assert acquired(r, T1, 0) == [(0, 3, 1)]
            first = mgr.share_partition(GROUP, T1, 0)
            h.persister.fail_next_writes(1, Errors.FENCED_STATE_EPOCH)
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, ACCEPT)])]))
            assert r.partition(T1, 0).acknowledge_error_code is Errors.NOT_LEADER_OR_FOLLOWER
            # dropped, not cached broken: the fetch part of the same request re-created it from durable
            # state, where ACQUIRED is never persisted, so the records are offered again
            assert mgr.share_partition(GROUP, T1, 0) is not first
            assert r.partition(T1, 0).error_code is Errors.NONE and acquired(r, T1, 0) == [(0, 3, 1)]
            assert r.partition(T1, 1).error_code is Errors.NOT_LEADER_OR_FOLLOWER  # still fenced: retried

    run(main())


def test_unknown_topics_and_partitions():
    async def main():
        h = Harness()
        h.partition(T1, 0)
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T1, 5), (T2, 0)]))
            assert [(t, d.partition_index, d.error_code) for t, d in r.partitions()] == [
                (T1, 0, Errors.NONE), (T1, 5, Errors.UNKNOWN_TOPIC_OR_PARTITION), (T2, 0, Errors.UNKNOWN_TOPIC_ID)]
            assert mgr.share_partition_count == 1

    run(main())


def test_a_moved_log_start_is_pushed_into_the_share_partition_before_reading():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[2, 2, 2, 2])
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], max_records=4))
            assert acquired(r, T1, 0) == [(0, 3, 1)]
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 3, RELEASE)])], max_records=0))
            assert r.partition(T1, 0).acknowledge_error_code is Errors.NONE
            h.logs.log(T1, 0).delete_records(6)
            r = await mgr.share_fetch(fetch_request("m1", 2, max_records=100))
            assert acquired(r, T1, 0) == [(6, 7, 1)]
            sp = mgr.share_partition(GROUP, T1, 0)
            assert sp.start_offset == 6 and sp.record_state(1) is None

    run(main())


def test_read_committed_groups_get_no_aborted_or_open_transaction_records_and_no_markers():
    async def main():
        committed = ShareGroupConfig(record_lock_duration_ms=LOCK_MS, isolation_level="read_committed")
        h = Harness(coordinator=Configs(committed))
        h.partition(T1, 0)
        now = h.clock.now_ms()
        h.logs.append(T1, 0, 3, now, producer_id=7, is_transactional=True)  # 0-2, aborted below
        h.logs.end_transaction(T1, 0, 7, commit=False, timestamp_ms=now)  # marker at 3
        h.logs.append(T1, 0, 2, now)  # 4-5
        h.logs.append(T1, 0, 2, now, producer_id=8, is_transactional=True)  # 6-7, still open
        h.logs.append(T1, 0, 1, now)  # 8: above the last stable offset
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            data = r.partition(T1, 0)
            assert acquired(r, T1, 0) == [(4, 5, 1)]
            assert [(b.base_offset, b.last_offset) for b in data.records] == [(4, 5)]
            h.logs.end_transaction(T1, 0, 8, commit=True, timestamp_ms=now)  # marker at 9
            r = await mgr.share_fetch(fetch_request("m1", 1))
            assert acquired(r, T1, 0) == [(6, 8, 1)]
            sp = mgr.share_partition(GROUP, T1, 0)
            assert sp.start_offset == 4  # the aborted records and the marker were archived, never delivered

    run(main())


BATCH_BYTES = 71  # a one-record batch of the in-memory log


def test_max_bytes_stops_the_log_read_at_the_byte_limit_and_only_whole_batches_are_acquired():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[1] * 8)
        async with h.mgr as mgr:
            # 3.5 batches' worth: the 4th batch is cut off by the read, so it is neither shipped nor acquired.
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], max_bytes=3 * BATCH_BYTES + 35))
            assert acquired(r, T1, 0) == [(0, 2, 1)] and len(r.partition(T1, 0).records) == 3
            assert mgr.share_partition(GROUP, T1, 0).end_offset == 3
            # Exactly 2 batches' worth: both.
            r = await mgr.share_fetch(fetch_request("m1", 1, max_bytes=2 * BATCH_BYTES))
            assert acquired(r, T1, 0) == [(3, 4, 1)]

    run(main())


def test_max_bytes_is_split_uniformly_over_the_acquirable_partitions():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[1] * 8)
        h.partition(T2, 0, batches=[1] * 8)
        async with h.mgr as mgr:
            # 4.5 batches' worth over 2 partitions: 2.25 each, so 2 whole batches of each.
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T2, 0)], max_bytes=4 * BATCH_BYTES + 35))
            assert acquired(r, T1, 0) == [(0, 1, 1)] and acquired(r, T2, 0) == [(0, 1, 1)]

    run(main())


def test_the_first_partition_with_data_gets_one_batch_past_max_bytes_and_the_rest_nothing():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[10, 1])  # a 161-byte batch first
        h.partition(T2, 0, batches=[1] * 4)
        async with h.mgr as mgr:
            # 100 bytes: T1's first batch is larger than its 50 and is shipped whole (as Kafka's log read
            # always returns one batch to the first partition with data); that uses the request up.
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T2, 0)], max_bytes=100))
            assert acquired(r, T1, 0) == [(0, 9, 1)] and acquired(r, T2, 0) == []
            # Epoch 1 rotates: T2 is read first, gets 50 bytes (less than one batch), and still one batch.
            r = await mgr.share_fetch(fetch_request("m1", 1, max_bytes=100))
            assert acquired(r, T2, 0) == [(0, 0, 1)] and acquired(r, T1, 0) == []

    run(main())


def test_min_bytes_zero_answers_at_once_with_whatever_is_acquirable_even_nothing():
    async def main():
        h = Harness(coordinator=Configs(ShareGroupConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3,
                                                         partition_max_record_locks=100)))
        h.partition(T1, 0)
        async with h.mgr as mgr:
            # An acquirable share-partition with no records: answered without waiting (bounded turns).
            task = asyncio.ensure_future(
                mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)], min_bytes=0, max_wait_ms=60_000)))
            r = await answer(task)
            assert r.error_code is Errors.NONE and acquired(r, T1, 0) == []
            assert h.clock.now_ms() == START_MS and mgr.waiting_fetch_count == 0
            h.append(T1, 0, 100)
            r = await mgr.share_fetch(fetch_request("m1", 1, min_bytes=0, max_wait_ms=60_000))
            assert acquired(r, T1, 0) == [(0, 99, 1)]
            # At the in-flight limit nothing is acquirable: as Kafka's delayed share fetch, it waits.
            h.append(T1, 0, 1)
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 2, min_bytes=0, max_wait_ms=60_000)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert not task.done()
            h.clock.advance(LOCK_MS)  # the locks expire: 0-99 are acquirable again and wake the fetch
            r = await answer(task)
            assert acquired(r, T1, 0) == [(0, 99, 2)]

    run(main())
