"""Topic store benchmarks (`sharegroup serve`'s durable topic logs), every ratio measured within one run.

    .venv/bin/python -m pytest bench/bench_topic_store.py --benchmark-enable -q

- durable append throughput (acks=-1, fsync on) into one partition: idempotent producers with one
  append in flight each, batches of 100 records of 100 bytes, swept over the number of producers;
  reported as batches/s, records/s, MB/s and appends per group commit, against a naive loop that writes
  and fsyncs each batch alone.
- the produce checks alone (framing, magic, CRC-32C, header rules): MB/s.
- the record timestamp check of an uncompressed batch (every record's timestamp against the topic's
  bounds): records/s, and its cost per batch against the produce checks' in the same run.
- reads: whole log read back in 1 MiB fetches, MB/s.
- recovery: reopening a log (scan every batch header and CRC, rebuild index and producer state):
  batches/s and MB/s.

With --benchmark-disable (the test run) every case runs once on a small load, so this file doubles as
a smoke test. Numbers go to benchmark.extra_info and are printed.
"""

from __future__ import annotations

import asyncio
import os
import time

import crc32c
import pytest

from sharegroup.topics.log_config import LogConfig
from sharegroup.topics.record_batch import (
    SimpleRecord,
    build_record_batch,
    check_timestamps,
    validate_produce_batches,
)
from sharegroup.topics.topic_store import TopicStore

RECORDS_PER_BATCH = 100
VALUE_BYTES = 100


def producer_batch(i: int, producer_id: int = -1, seq: int = -1) -> bytes:
    records = [SimpleRecord(b"key-%d" % (i * RECORDS_PER_BATCH + r), bytes([65 + r % 26]) * VALUE_BYTES)
               for r in range(RECORDS_PER_BATCH)]
    return build_record_batch(records, base_timestamp_ms=1_700_000_000_000 + i, producer_id=producer_id,
                              producer_epoch=0 if producer_id >= 0 else -1, base_sequence=seq)


def report(benchmark, capsys, title: str, numbers: dict) -> None:
    benchmark.extra_info.update(numbers)
    with capsys.disabled():
        print(f"\n{title}")
        for name, value in numbers.items():
            print(f"  {name:44s} {value}")


def scale(benchmark, full: int, quick: int) -> int:
    return quick if benchmark.disabled else full


def naive_write_fsync(path: str, data: bytes, n: int) -> float:
    """Seconds to append `data` n times, each write followed by its own fdatasync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, data)
            os.fdatasync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


async def durable_appends(path: str, producers: int, batches_per_producer: int) -> dict:
    store = await TopicStore.open(path, log_config=LogConfig(segment_bytes=64 * 2**20))
    topic = await store.create_topic("bench", 1)
    data = [producer_batch(p, producer_id=0, seq=0) for p in range(producers)]

    async def produce(p: int) -> None:
        pid = 1000 + p
        for k in range(batches_per_producer):
            batch = bytearray(data[p])
            # a fresh sequence per batch: patch producer id and base sequence, then the CRC
            batch[43:51] = pid.to_bytes(8, "big")
            batch[53:57] = (k * RECORDS_PER_BATCH).to_bytes(4, "big")
            batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
            await store.append(topic.topic_id, 0, bytes(batch), acks=-1)

    t0 = time.perf_counter()
    await asyncio.gather(*(produce(p) for p in range(producers)))
    seconds = time.perf_counter() - t0
    stats = store.stats()
    await store.close()
    n = producers * batches_per_producer
    return {"batches": n, "seconds": seconds, "bytes": stats["appended_bytes"], "fsyncs": stats["fsyncs"],
            "group_commits": stats["group_commits"]}


@pytest.mark.parametrize("producers", [1, 8, 64])
def test_durable_append_throughput(benchmark, capsys, tmp_path, producers):
    per = scale(benchmark, max(20, 2_000 // producers), 3)
    result = {}

    def run():
        path = tmp_path / f"run-{len(result)}"
        result.update(asyncio.run(durable_appends(str(path), producers, per)))

    benchmark.pedantic(run, rounds=1, iterations=1)
    sample = producer_batch(0)
    naive_n = scale(benchmark, 300, 3)
    naive_s = naive_write_fsync(str(tmp_path / "naive.log"), sample, naive_n)
    batches_per_s = result["batches"] / result["seconds"]
    naive_per_s = naive_n / naive_s
    report(benchmark, capsys, f"durable appends, {producers} producer(s), acks=-1, fsync on", {
        "batches": result["batches"],
        "batch_bytes": len(sample),
        "batches_per_s": round(batches_per_s),
        "records_per_s": round(batches_per_s * RECORDS_PER_BATCH),
        "MB_per_s": round(result["bytes"] / result["seconds"] / 1e6, 1),
        "appends_per_group_commit": round(result["batches"] / max(1, result["group_commits"]), 1),
        "naive_write_fsync_batches_per_s": round(naive_per_s),
        "speedup_vs_naive": round(batches_per_s / naive_per_s, 2),
    })
    assert result["batches"] == producers * per


def test_produce_checks_throughput(benchmark, capsys):
    data = b"".join(producer_batch(i) for i in range(scale(benchmark, 50, 2)))
    headers = benchmark(validate_produce_batches, data, max_message_bytes=2**30)
    assert len(headers) == scale(benchmark, 50, 2)
    if not benchmark.disabled:
        report(benchmark, capsys, "produce checks (framing, magic, CRC-32C, header rules)", {
            "bytes": len(data), "MB_per_s": round(len(data) / benchmark.stats.stats.median / 1e6)})


def test_timestamp_check_throughput(benchmark, capsys):
    """Produce's timestamp check of one 100-record batch: a scan of every record's timestamp delta, O(records),
    in C on the native pass (`sharegroup.topics._record_scan`) and in Python on the pure one, set beside the
    produce checks (framing and the CRC, O(bytes) in C)."""
    data = producer_batch(0)
    headers = validate_produce_batches(data, max_message_bytes=2**30)
    now_ms = 1_700_000_000_000

    def check() -> None:
        check_timestamps(data, headers, now_ms=now_ms, before_max_ms=2**63 - 1, after_max_ms=3_600_000)

    benchmark(check)
    if not benchmark.disabled:
        n = 2_000
        started = time.perf_counter()
        for _ in range(n):
            validate_produce_batches(data, max_message_bytes=2**30)
        validate_s = (time.perf_counter() - started) / n
        check_s = benchmark.stats.stats.median
        report(benchmark, capsys, f"timestamp check, one batch of {RECORDS_PER_BATCH} records", {
            "check_us_per_batch": round(check_s * 1e6, 1),
            "records_per_s": round(RECORDS_PER_BATCH / check_s),
            "produce_checks_us_per_batch": round(validate_s * 1e6, 1),
            "check_vs_produce_checks": round(check_s / validate_s, 1)})


async def _fill(path: str, batches: int) -> tuple[TopicStore, object]:
    store = await TopicStore.open(path, fsync=False, log_config=LogConfig(segment_bytes=16 * 2**20))
    topic = store.topic_by_name("bench") or await store.create_topic("bench", 1)
    data = producer_batch(0)
    for _ in range(batches // 64):
        await asyncio.gather(*(store.append(topic.topic_id, 0, data, acks=1) for _ in range(64)))
    return store, topic


def test_read_and_recovery_throughput(benchmark, capsys, tmp_path):
    batches = scale(benchmark, 8_192, 128)
    path = str(tmp_path / "log")

    async def fill_and_read() -> tuple[float, int]:
        store, topic = await _fill(path, batches)
        end = store.log_end_offset(topic.topic_id, 0)
        t0 = time.perf_counter()
        offset, total = 0, 0
        while offset < end:
            read = store.read(topic.topic_id, 0, offset, 2**20)
            total += sum(b.size_bytes for b in read.batches)
            offset = read.batches[-1].last_offset + 1
        seconds = time.perf_counter() - t0
        await store.close()
        return seconds, total

    read_s, total = asyncio.run(fill_and_read())

    async def reopen() -> None:
        store = await TopicStore.open(path, fsync=False)
        await store.close()

    benchmark.pedantic(lambda: asyncio.run(reopen()), rounds=scale(benchmark, 3, 1), iterations=1)
    if not benchmark.disabled:
        median = benchmark.stats.stats.median
        report(benchmark, capsys, f"read back and reopen a log of {batches} batches ({total / 1e6:.0f} MB)", {
            "read_MB_per_s": round(total / read_s / 1e6),
            "recovery_batches_per_s": round(batches / median),
            "recovery_MB_per_s": round(total / median / 1e6),
        })
    assert total == batches * len(producer_batch(0))
