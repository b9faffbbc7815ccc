"""One conformance suite for the `PartitionLogs` protocol, run over both implementations: the in-memory
logs (tests, demo) and the durable TopicStore (`sharegroup serve`). The spec tests state the expected
answers; the differential test drives both with the same seeded random operations and compares every
read, look-up and offset.

Two places where the durable store follows Kafka more closely than InMemoryPartitionLogs, and the
comparison allows for it: a timestamp look-up never answers below the log start, and the last stable
offset never reads below the log start.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from sharegroup.errors import Errors, ShareError
from sharegroup.logs import PartitionLogs
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.topics.log_config import LogConfig
from sharegroup.topics.segment_files import list_segment_bases
from sharegroup.topics.topic_store import TopicStore
from sharegroup.types import AbortedTransaction

from .server_batches import produce_batch

TOPIC = uuid.UUID(int=7)


class MemoryDriver:
    """Writes to InMemoryPartitionLogs with the sizes the real batches would have."""

    name = "memory"

    def __init__(self) -> None:
        self.logs = InMemoryPartitionLogs()
        self.logs.create_partition(TOPIC, 0)
        self.topic_id = TOPIC

    async def append(self, n: int, ts: int, *, producer_id: int = -1, transactional: bool = False, seq: int = -1):
        size = len(produce_batch(n, timestamp_ms=ts, producer_id=producer_id,
                                 producer_epoch=0 if producer_id >= 0 else -1, base_sequence=seq,
                                 transactional=transactional))
        b = self.logs.append(TOPIC, 0, n, ts, producer_id=producer_id, is_transactional=transactional, size_bytes=size)
        return b.base_offset, b.last_offset

    async def end_txn(self, producer_id: int, commit: bool, ts: int):
        b = self.logs.end_transaction(TOPIC, 0, producer_id, commit=commit, timestamp_ms=ts)
        return b.base_offset

    async def delete_records(self, before: int) -> int:
        return self.logs.log(TOPIC, 0).delete_records(before)

    async def close(self) -> None:
        pass


class StoreDriver:
    """Writes real RecordBatch v2 bytes to a TopicStore (fsync off: durability is tested elsewhere)."""

    name = "store"

    def __init__(self, path) -> None:
        self.path = path

    async def open(self) -> StoreDriver:
        # Small segments, so that reads cross segment files and DeleteRecords deletes some.
        self.logs = await TopicStore.open(self.path, fsync=False, log_config=LogConfig(segment_bytes=500))
        self.topic_id = (await self.logs.create_topic("conformance", 1)).topic_id
        return self

    async def append(self, n: int, ts: int, *, producer_id: int = -1, transactional: bool = False, seq: int = -1):
        data = produce_batch(n, timestamp_ms=ts, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                             base_sequence=seq, transactional=transactional)
        r = await self.logs.append(self.topic_id, 0, data, acks=-1)
        self.check()
        return r.base_offset, r.last_offset

    async def end_txn(self, producer_id: int, commit: bool, ts: int):
        marker = await self.logs.write_transaction_marker(self.topic_id, 0, producer_id, 0, commit=commit,
                                                          timestamp_ms=ts)
        self.check()
        return marker.base_offset

    async def delete_records(self, before: int) -> int:
        start = await self.logs.delete_records(self.topic_id, 0, before)
        self.check()
        return start

    def check(self) -> None:
        """The log's invariants hold after every step."""
        self.logs.partition_log(self.topic_id, 0)._check(deep=True)

    async def close(self) -> None:
        await self.logs.close()


def run_with(kind, tmp_path, body):
    async def main():
        driver = MemoryDriver() if kind == "memory" else await StoreDriver(tmp_path / "store").open()
        try:
            await body(driver)
        finally:
            await driver.close()

    asyncio.run(main())


KINDS = ["memory", "store"]


def offsets(read):
    return [(b.base_offset, b.last_offset) for b in read.batches]


@pytest.mark.parametrize("kind", KINDS)
def test_is_a_partition_logs(kind, tmp_path):
    async def body(d):
        assert isinstance(d.logs, PartitionLogs)
        assert d.logs.has_partition(d.topic_id, 0) and not d.logs.has_partition(d.topic_id, 1)

    run_with(kind, tmp_path, body)


@pytest.mark.parametrize("kind", KINDS)
def test_reads_whole_batches_within_the_byte_budget_and_at_least_one(kind, tmp_path):
    async def body(d):
        seen = []
        d.logs.subscribe(lambda *e: seen.append(e))
        for _ in range(4):
            await d.append(10, 1)
        size = len(produce_batch(10, timestamp_ms=1))
        assert seen == [(d.topic_id, 0, 10), (d.topic_id, 0, 20), (d.topic_id, 0, 30), (d.topic_id, 0, 40)]
        assert offsets(d.logs.read(d.topic_id, 0, 15, 1)) == [(10, 19)]
        assert offsets(d.logs.read(d.topic_id, 0, 15, size)) == [(10, 19)]
        assert offsets(d.logs.read(d.topic_id, 0, 15, size + 1)) == [(10, 19), (20, 29)]
        assert offsets(d.logs.read(d.topic_id, 0, 0, 10**9)) == [(0, 9), (10, 19), (20, 29), (30, 39)]
        read = d.logs.read(d.topic_id, 0, 40, 1000)
        assert (read.batches, read.log_start_offset, read.high_watermark, read.last_stable_offset) == ((), 0, 40, 40)
        for bad in (41, -1):
            with pytest.raises(ShareError) as err:
                d.logs.read(d.topic_id, 0, bad, 1000)
            assert err.value.error == Errors.OFFSET_OUT_OF_RANGE

    run_with(kind, tmp_path, body)


@pytest.mark.parametrize("kind", KINDS)
def test_read_committed_stops_at_the_lso_and_lists_aborts(kind, tmp_path):
    async def body(d):
        await d.append(2, 1)
        await d.append(3, 2, producer_id=9, transactional=True, seq=0)
        await d.append(1, 2)
        assert d.logs.last_stable_offset(d.topic_id, 0) == 2
        assert offsets(d.logs.read(d.topic_id, 0, 0, 10**6, read_committed=True)) == [(0, 1)]
        assert offsets(d.logs.read(d.topic_id, 0, 2, 10**6, read_committed=True)) == []
        assert offsets(d.logs.read(d.topic_id, 0, 0, 10**6)) == [(0, 1), (2, 4), (5, 5)]
        assert await d.end_txn(9, False, 3) == 6
        read = d.logs.read(d.topic_id, 0, 0, 10**6, read_committed=True)
        assert [b.header for b in read.batches][1:] == [(2, 4, 9, True, False), (5, 5, -1, False, False),
                                                        (6, 6, 9, True, True)]
        assert (read.aborted_transactions, read.last_stable_offset, read.high_watermark) == (
            (AbortedTransaction(9, 2),), 7, 7)
        assert d.logs.read(d.topic_id, 0, 6, 10**6, read_committed=True).aborted_transactions == (
            AbortedTransaction(9, 2),)  # the marker itself still belongs to the aborted transaction
        assert d.logs.read(d.topic_id, 0, 7, 10**6, read_committed=True).aborted_transactions == ()
        assert d.logs.read(d.topic_id, 0, 0, 10**6).aborted_transactions == ()
        await d.append(1, 4, producer_id=9, transactional=True, seq=3)
        assert await d.end_txn(9, True, 5) == 8
        assert d.logs.read(d.topic_id, 0, 7, 10**6, read_committed=True).aborted_transactions == ()

    run_with(kind, tmp_path, body)


@pytest.mark.parametrize("kind", KINDS)
def test_offset_lookups_and_delete_records(kind, tmp_path):
    async def body(d):
        await d.append(5, 100)
        await d.append(5, 200)
        await d.append(5, 300)
        assert [d.logs.offset_for(d.topic_id, 0, s) for s in ("earliest", "latest", 150, 200, 301)] == [0, 15, 5, 5, 15]
        assert await d.delete_records(7) == 7
        assert d.logs.log_start_offset(d.topic_id, 0) == 7
        assert offsets(d.logs.read(d.topic_id, 0, 7, 10**6)) == [(5, 9), (10, 14)]
        assert d.logs.offset_for(d.topic_id, 0, "earliest") == 7
        assert d.logs.offset_for(d.topic_id, 0, 250) == 10
        with pytest.raises(ShareError):
            d.logs.read(d.topic_id, 0, 6, 10)
        with pytest.raises(ShareError) as err:
            await d.delete_records(16)
        assert err.value.error == Errors.OFFSET_OUT_OF_RANGE

    run_with(kind, tmp_path, body)


async def _random_ops(d, rng: random.Random, steps: int, with_txns: bool):
    ts = 0
    seq = {}
    open_txn = set()
    pids = [1, 2]
    for _ in range(steps):
        roll = rng.random()
        ts += rng.choice((0, 0, 1, 5))
        if with_txns and roll < 0.15:
            pid = rng.choice(pids)
            s = seq.get(pid, 0)
            n = rng.randint(1, 4)
            await d.append(n, ts, producer_id=pid, transactional=True, seq=s)
            seq[pid] = s + n
            open_txn.add(pid)
        elif with_txns and roll < 0.25 and open_txn:
            pid = rng.choice(sorted(open_txn))
            open_txn.discard(pid)
            await d.end_txn(pid, rng.random() < 0.5, ts)
            pids[pids.index(pid)] = max(pids) + 1  # a producer per transaction: its state may be truncated
        elif roll < 0.3:
            end = d.logs.log_end_offset(d.topic_id, 0)
            start = d.logs.log_start_offset(d.topic_id, 0)
            await d.delete_records(rng.randint(start, end))
        else:
            await d.append(rng.randint(1, 6), ts)


@pytest.mark.parametrize("seed", range(6))
def test_differential_both_implementations_answer_alike(seed, tmp_path):
    with_txns = seed % 2 == 0
    answers = {}
    for kind in KINDS:
        async def body(d, kind=kind):
            rng = random.Random(seed)
            await _random_ops(d, rng, 60, with_txns)
            logs, tid = d.logs, d.topic_id
            start, end = logs.log_start_offset(tid, 0), logs.log_end_offset(tid, 0)
            out = [start, end, max(logs.last_stable_offset(tid, 0), start)]
            budgets = (1, 10**9) if with_txns else (1, 150, 400, 10**9)
            for fetch in range(start, end + 1):
                for budget in budgets:
                    for committed in (False, True):
                        r = logs.read(tid, 0, fetch, budget, read_committed=committed)
                        out.append((fetch, budget, committed, [(b.header, b.size_bytes if not b.is_control else None)
                                                               for b in r.batches],
                                    r.aborted_transactions, r.log_start_offset, r.high_watermark,
                                    max(r.last_stable_offset, start)))
            for spec in ["earliest", "latest", *range(0, 400, 7)]:
                out.append((spec, max(logs.offset_for(tid, 0, spec), start)))
            answers[kind] = out
            if kind == "store":
                bases = list_segment_bases(logs.partition_log(tid, 0).directory)
                assert len(bases) > 1 or bases[0] > 0  # reads crossed segments, or whole ones were deleted

        run_with(kind, tmp_path, body)
    assert answers["store"] == answers["memory"]
