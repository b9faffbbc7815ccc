"""The share state on Kafka vs on local segment files, in one run (ratios, not absolute numbers).

    .venv/bin/python -m pytest bench/bench_kafka_log.py --benchmark-enable -q
    SHAREGROUP_BENCH_SMOKE=1 .venv/bin/python -m pytest bench/bench_kafka_log.py --benchmark-disable -q

- durable writes: the same 256 share-partitions writing small deltas concurrently (closed loop)
  through a LocalPersister (SegmentLog, fsync on) and through a KafkaPersister (KafkaRecordLog on the
  3-broker librdkafka mock cluster, RF 3, acks=all, one transaction per group commit) with broker
  round-trip times of 0 and 2 ms; writes/s, p50/p99 latency and appends per group commit.
- recovery: open of a log of the records written (read back and replayed), records/s, for both.

The mock keeps its log in memory inside this process, so the Kafka numbers show the client's and the
protocol's cost (transactions, round trips), not a real cluster's disks or network.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

pytest.importorskip("confluent_kafka")

from persister import KafkaPersister, LocalPersister  # noqa: E402
from sharegroup.types import StateBatch  # noqa: E402
from tests.kafka_mock import MockCluster  # noqa: E402

SMOKE = os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1"
PARTITIONS = 16 if SMOKE else 256
WRITES_PER_PARTITION = 3 if SMOKE else 40
GROUP = "orders-consumers"
TOPIC = uuid.UUID("3f2b8c1e-9d4a-4e7b-8a6c-5e1f0d2c3b4a")
QUIET = {"log_level": 0}


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def write_load(persister) -> dict:
    """Every share-partition initializes, then writes WRITES_PER_PARTITION deltas one after another."""
    await asyncio.gather(
        *(persister.initialize_state(GROUP, TOPIC, p, state_epoch=0, start_offset=0) for p in range(PARTITIONS))
    )
    latencies: list[float] = []

    async def partition_writer(p: int) -> None:
        for i in range(WRITES_PER_PARTITION):
            first = 5 * i
            started = time.perf_counter()
            await persister.write_state(
                GROUP, TOPIC, p, state_epoch=0, leader_epoch=0, start_offset=first,
                state_batches=[StateBatch(first, first + 4, 2, 1)],
            )
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(partition_writer(p) for p in range(PARTITIONS)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "writes_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def report(benchmark, capsys, title: str, rows: dict[str, dict]) -> None:
    benchmark.extra_info.update({f"{name}.{k}": v for name, row in rows.items() for k, v in row.items()})
    with capsys.disabled():
        print(f"\n{title} ({PARTITIONS} share-partitions x {WRITES_PER_PARTITION} writes)")
        for name, row in rows.items():
            print(f"  {name:28s} " + "  ".join(f"{k}={v}" for k, v in row.items()))


def test_durable_writes_and_recovery_kafka_vs_segment_log(benchmark, capsys, tmp_path):
    rows: dict[str, dict] = {}

    async def local_run() -> None:
        persister = await LocalPersister.open(tmp_path / "state", fsync=True)
        rows["segment log (fsync)"] = await write_load(persister)
        records = persister.log.end_offset
        await persister.close()
        started = time.perf_counter()
        persister = await LocalPersister.open(tmp_path / "state", fsync=True)
        seconds = time.perf_counter() - started
        rows["segment log (fsync)"].update(open_s=round(seconds, 3), recovery_records_per_s=round(records / seconds))
        await persister.close()

    async def kafka_run(cluster: MockCluster, name: str) -> None:
        topic = name.replace(" ", "-").replace(",", "")
        cluster.create_topic(topic, 1, 3)
        started = time.perf_counter()
        persister = await KafkaPersister.open(cluster.bootstrap_servers, topic=topic, client_config=QUIET)
        open_empty_s = round(time.perf_counter() - started, 3)  # connecting, fencing: the fixed cost
        row = rows[name] = await write_load(persister)
        row["open_empty_s"] = open_empty_s
        row["appends_per_txn"] = round(persister.log.end_offset / max(1, persister.log.transactions), 1)
        records = persister.log.end_offset
        await persister.close()
        started = time.perf_counter()
        persister = await KafkaPersister.open(cluster.bootstrap_servers, topic=topic, client_config=QUIET)
        seconds = time.perf_counter() - started  # includes connecting and init_transactions
        row.update(open_s=round(seconds, 3), recovery_records_per_s=round(records / seconds))
        # without the fixed cost of an open (connect, fence) measured on the empty topic
        row["read_replay_records_per_s"] = round(records / max(1e-6, seconds - open_empty_s))
        assert persister.log.end_offset == records == PARTITIONS * (WRITES_PER_PARTITION + 1)
        await persister.close()

    def measure() -> None:
        asyncio.run(local_run())
        cluster = MockCluster(3)
        try:
            asyncio.run(kafka_run(cluster, "kafka mock, rtt 0 ms"))
            for broker in (1, 2, 3):
                cluster.set_rtt(broker, 2)
            asyncio.run(kafka_run(cluster, "kafka mock, rtt 2 ms"))
        finally:
            cluster.close()

    benchmark.pedantic(measure, rounds=1, iterations=1)
    report(benchmark, capsys, "durable share-state writes: SegmentLog vs KafkaRecordLog", rows)
