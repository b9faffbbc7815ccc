"""The manager's Prometheus metrics (an edge bound to the manager's events): Kafka's share metric names,
request counts per topic, latencies, records acquired, acknowledgements by type, lock timeouts, sessions,
waiting fetches and in-flight records."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from sharegroup.metrics import bind_manager_metrics

from .conftest import run
from .manager_harness import ACCEPT, GROUP, LOCK_MS, RELEASE, T1, T2, Harness, ack_request, answer, fetch_request, until


def test_manager_metrics_count_requests_records_acks_timeouts_and_read_gauges():
    async def main():
        registry = CollectorRegistry()
        h = Harness()
        metrics = bind_manager_metrics(h.mgr, registry)
        value = registry.get_sample_value
        h.partition(T1, 0, batches=[4])
        h.partition(T1, 1, batches=[2])
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T1, 1), (T2, 0)]))
            topic1, topic2 = {"topic": str(T1)}, {"topic": str(T2)}
            assert value("sharegroup_total_share_fetch_requests_total", topic1) == 1
            assert value("sharegroup_failed_share_fetch_requests_total", topic2) == 1  # UNKNOWN_TOPIC_ID
            assert value("sharegroup_failed_share_fetch_requests_total", topic1) is None
            assert value("sharegroup_records_acquired_total", {"group": GROUP}) == 6
            assert value("sharegroup_partition_load_time_ms_count") == 2
            assert value("sharegroup_share_sessions_count") == 1 and value("sharegroup_share_partitions_count") == 3
            assert value("sharegroup_in_flight_message_count") == 6
            acks = [(0, 1, ACCEPT), (2, 3, (RELEASE, ACCEPT))]
            r = await mgr.share_acknowledge(ack_request("m1", 1, [(T1, 0, acks)]))
            assert r.error_code == 0
            assert value("sharegroup_record_acknowledgements_total", {"ack_type": "Accept"}) == 3
            assert value("sharegroup_record_acknowledgements_total", {"ack_type": "Release"}) == 1
            assert value("sharegroup_total_share_acknowledgement_requests_total", topic1) == 1
            assert value("sharegroup_request_total_time_ms_count", {"request": "ShareAcknowledge"}) == 1
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 2, max_wait_ms=LOCK_MS + 1000)))
            await until(lambda: mgr.waiting_fetch_count == 0 or task.done())
            r = await answer(task)  # the released record 2 came back at once
            assert r.acquired_count == 1
            task = asyncio.ensure_future(mgr.share_fetch(fetch_request("m1", 3, max_wait_ms=500)))
            await until(lambda: mgr.waiting_fetch_count == 1)
            assert value("sharegroup_purgatory_size") == 1
            h.clock.advance(500)
            await answer(task)
            assert value("sharegroup_delayed_share_fetch_expires_total") == 1
            assert value("sharegroup_request_total_time_ms_sum", {"request": "ShareFetch"}) == 500
            h.clock.advance(LOCK_MS)
            await until(lambda: mgr.lock_timer.expired_total == 3)
            assert value("sharegroup_acquisition_lock_timeout_total", {"group": GROUP}) == 3
        assert metrics.families.registry is registry

    run(main())
