"""The durable partition log: byte-exact storage, refusals that append nothing, idempotent producers,
group commit, recovery (index rebuilt, torn tail truncated, corruption refused), retention and
DeleteRecords, transactions for read_committed."""

from __future__ import annotations

import asyncio
import os

import pytest

from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.topics.log_config import LogConfig
from sharegroup.topics.segment_files import CorruptLogError, list_segment_bases, segment_file_name
from sharegroup.topics.topic_store import TopicStore
from sharegroup.types import AbortedTransaction

from .conftest import run
from .server_batches import CountingFsync, produce_batch, stored_form

HOUR_MS = 3_600_000


class Harness:
    """One store with one single-partition topic 't', a counting fsync and a manual clock."""

    def __init__(self, path, **config) -> None:
        self.path = path
        self.config = LogConfig(**config)
        self.fsync = CountingFsync()
        self.clock = ManualClock(10 * HOUR_MS)
        self.store: TopicStore | None = None
        self.events: list[tuple] = []

    async def open(self) -> TopicStore:
        self.store = await TopicStore.open(self.path, log_config=self.config, clock=self.clock, fsync=self.fsync)
        self.store.subscribe(lambda *e: self.events.append(e))
        if self.store.topic_by_name("t") is None:
            await self.store.create_topic("t", 1)
        self.tid = self.store.topic_by_name("t").topic_id
        self.log._check(deep=True)
        return self.store

    async def reopen(self) -> TopicStore:
        await self.store.close()
        return await self.open()

    async def append(self, data: bytes, acks: int = -1, max_batches: int | None = 1):
        try:
            return await self.store.append(self.tid, 0, data, acks=acks, max_batches=max_batches)
        finally:
            self.log._check(deep=True)

    @property
    def log(self):
        return self.store.partition_log(self.tid, 0)

    @property
    def dir(self) -> str:
        return os.path.join(self.path, "topics", "t-0")

    def read_all(self, read_committed=False):
        start = self.store.log_start_offset(self.tid, 0)
        return self.store.read(self.tid, 0, start, 2**31, read_committed=read_committed)

    def end(self) -> int:
        return self.store.log_end_offset(self.tid, 0)


def scenario(tmp_path, body, **config):
    async def main():
        h = Harness(str(tmp_path), **config)
        await h.open()
        try:
            await body(h)
        finally:
            await h.store.close()

    run(main())


def refused(error):
    return pytest.raises(ShareError, match=error.name)


# -- storage ---------------------------------------------------------------------------------------


def test_batches_are_stored_byte_for_byte_with_assigned_offsets(tmp_path):
    async def body(h):
        sent = [produce_batch(3, tag=b"a"), produce_batch(1, tag=b"b"), produce_batch(4, tag=b"c")]
        results = [await h.append(b) for b in sent]
        assert [(r.base_offset, r.last_offset, r.log_append_time_ms, r.log_start_offset) for r in results] == [
            (0, 2, -1, 0), (3, 3, -1, 0), (4, 7, -1, 0)]
        read = h.read_all()
        assert [bytes(b.records) for b in read.batches] == [stored_form(sent[0], 0), stored_form(sent[1], 3),
                                                             stored_form(sent[2], 4)]
        assert [(b.base_offset, b.last_offset, b.size_bytes) for b in read.batches] == [
            (0, 2, len(sent[0])), (3, 3, len(sent[1])), (4, 7, len(sent[2]))]
        with open(os.path.join(h.dir, segment_file_name(0)), "rb") as f:
            assert f.read() == b"".join(bytes(b.records) for b in read.batches)
        assert h.events == [(h.tid, 0, 3), (h.tid, 0, 4), (h.tid, 0, 8)]

    scenario(tmp_path, body)


@pytest.mark.parametrize("damage, error", [
    (lambda d: d[:-1], Errors.CORRUPT_MESSAGE),
    (lambda d: d[:16] + b"\x01" + d[17:], Errors.INVALID_RECORD),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), Errors.CORRUPT_MESSAGE),
    (lambda d: d[:8] + (len(d)).to_bytes(4, "big") + d[12:], Errors.CORRUPT_MESSAGE),
])
def test_a_bad_batch_appends_nothing_of_the_request(tmp_path, damage, error):
    async def body(h):
        await h.append(produce_batch(2))
        good = produce_batch(3, producer_id=1, producer_epoch=0, base_sequence=0)
        size_before = os.path.getsize(os.path.join(h.dir, segment_file_name(0)))
        with refused(error):
            await h.append(good + damage(produce_batch(2)), max_batches=None)
        assert h.end() == 2 and len(h.read_all().batches) == 1
        assert os.path.getsize(os.path.join(h.dir, segment_file_name(0))) == size_before
        assert h.log.producer_entry(1) is None  # the good batch's sequence was not taken either
        assert (await h.append(good)).base_offset == 2

    scenario(tmp_path, body)


def test_acks_must_be_kafka_values_and_partitions_must_exist(tmp_path):
    async def body(h):
        with refused(Errors.INVALID_REQUIRED_ACKS):
            await h.append(produce_batch(), acks=2)
        with refused(Errors.UNKNOWN_TOPIC_OR_PARTITION):
            await h.store.append(h.tid, 1, produce_batch(), acks=1)
        with refused(Errors.RECORD_LIST_TOO_LARGE):
            await h.append(produce_batch(30, value_bytes=100))

    scenario(tmp_path, body, segment_bytes=2_000)


# -- idempotent producers --------------------------------------------------------------------------


def test_sequence_checks_as_kafka(tmp_path):
    async def body(h):
        pid, epoch = h.store.init_producer_id()
        b = lambda seq, n=2, e=epoch: produce_batch(n, producer_id=pid, producer_epoch=e, base_sequence=seq)
        firsts = [(await h.append(b(seq))).base_offset for seq in range(0, 12, 2)]  # six batches
        assert firsts == [0, 2, 4, 6, 8, 10]
        dup = await h.append(b(4))  # the third batch, still among the last five
        assert dup == (4, 5, -1, 0, True) and h.end() == 12
        with refused(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER):
            await h.append(b(0))  # the first batch, no longer remembered
        with refused(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER):
            await h.append(b(13))  # a gap
        with refused(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER):
            await h.append(b(5, e=epoch + 1))  # a new epoch starts at 0
        assert (await h.append(b(0, e=epoch + 1))).base_offset == 12
        with refused(Errors.INVALID_PRODUCER_EPOCH):
            await h.append(b(12, e=epoch))
        assert h.end() == 14
        other = produce_batch(1, producer_id=pid + 1, producer_epoch=3, base_sequence=77)
        assert (await h.append(other)).base_offset == 14  # unknown producer: any sequence (KIP-360)

    scenario(tmp_path, body)


def test_producer_state_survives_restart(tmp_path):
    async def body(h):
        pid, _ = h.store.init_producer_id()
        first = produce_batch(2, producer_id=pid, producer_epoch=0, base_sequence=0)
        await h.append(first)
        await h.append(produce_batch(2, producer_id=pid, producer_epoch=0, base_sequence=2))
        await h.reopen()
        assert await h.append(first) == (0, 1, -1, 0, True)
        with refused(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER):
            await h.append(produce_batch(1, producer_id=pid, producer_epoch=0, base_sequence=5))
        assert (await h.append(produce_batch(1, producer_id=pid, producer_epoch=0, base_sequence=4))).base_offset == 4
        assert h.store.init_producer_id()[0] > pid

    scenario(tmp_path, body)


def test_a_retry_of_a_batch_still_being_written_waits_for_it(tmp_path):
    async def body(h):
        data = produce_batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
        first, retry = await asyncio.gather(h.append(data), h.append(data))
        assert first == (0, 1, -1, 0, False) and retry == (0, 1, -1, 0, True)
        assert h.end() == 2

    scenario(tmp_path, body)


# -- group commit and durability -------------------------------------------------------------------


def test_concurrent_appends_share_one_fsync(tmp_path):
    async def body(h):
        await h.append(produce_batch())
        before = h.fsync.calls
        await h.append(produce_batch())
        await h.append(produce_batch())
        assert h.fsync.calls - before == 2  # one at a time: one fsync each
        before = h.fsync.calls
        results = await asyncio.gather(*(h.append(produce_batch(1)) for _ in range(50)))
        assert h.fsync.calls - before == 1
        assert sorted(r.base_offset for r in results) == list(range(9, 59))
        assert h.events[-1] == (h.tid, 0, 59) and len(h.events) == 4  # one publish per group

    scenario(tmp_path, body)


def test_records_become_visible_only_once_durable_and_acks0_does_not_wait(tmp_path):
    import threading

    async def body(h):
        await h.append(produce_batch(2))
        gate = h.fsync.gate = threading.Event()
        quick = await h.append(produce_batch(3), acks=0)
        assert (quick.base_offset, quick.last_offset) == (2, 4)
        assert h.end() == 2 and len(h.read_all().batches) == 1  # written, not yet fsync'd: not visible
        slow = asyncio.ensure_future(h.append(produce_batch(1), acks=1))
        await asyncio.sleep(0)
        assert not slow.done()
        gate.set()
        assert (await slow).base_offset == 5
        assert h.end() == 6

    scenario(tmp_path, body)


def test_a_failed_fsync_fails_the_appends_and_the_log_refuses_until_reopened(tmp_path):
    async def body(h):
        await h.append(produce_batch(2))
        h.fsync.fail = True
        results = await asyncio.gather(*(h.append(produce_batch(1)) for _ in range(3)), return_exceptions=True)
        assert [r.error for r in results] == [Errors.KAFKA_STORAGE_ERROR] * 3
        h.fsync.fail = False
        with refused(Errors.KAFKA_STORAGE_ERROR):
            await h.append(produce_batch(1))
        assert h.end() == 2 and len(h.read_all().batches) == 1
        await h.reopen()
        assert h.end() == 2  # the failed bytes were cut back
        assert (await h.append(produce_batch(1))).base_offset == 2

    scenario(tmp_path, body)


# -- recovery --------------------------------------------------------------------------------------


def test_restart_rebuilds_the_index_across_segments(tmp_path):
    async def body(h):
        sent = [produce_batch(2, timestamp_ms=1_000 + i, tag=b"%d" % i) for i in range(20)]
        for data in sent:
            await h.append(data)
        assert len(list_segment_bases(h.dir)) == h.log.segment_count > 3
        before = h.read_all()
        await h.reopen()
        after = h.read_all()
        assert [(b.base_offset, b.last_offset, b.size_bytes, bytes(b.records)) for b in after.batches] == [
            (b.base_offset, b.last_offset, b.size_bytes, bytes(b.records)) for b in before.batches]
        assert [bytes(b.records) for b in after.batches] == [stored_form(d, 2 * i) for i, d in enumerate(sent)]
        assert h.store.offset_for(h.tid, 0, 1_007) == 14
        assert (await h.append(produce_batch(1))).base_offset == 40

    scenario(tmp_path, body, segment_bytes=700)


@pytest.mark.parametrize("tail", [b"\x00" * 40, b"\x00" * 200, "half", "bad-crc-last"],
                         ids=["zeros-40", "zeros-200", "half-batch", "bad-crc-last"])
def test_a_torn_tail_is_truncated_on_open(tmp_path, tail):
    async def body(h):
        await h.append(produce_batch(2))
        await h.append(produce_batch(3))
        await h.store.close()
        path = os.path.join(h.dir, segment_file_name(0))
        good_size = os.path.getsize(path)
        extra = produce_batch(4)
        if tail == "half":
            tail_bytes = stored_form(extra, 5)[: len(extra) // 2]
        elif tail == "bad-crc-last":
            tail_bytes = stored_form(extra, 5)[:-1] + b"\xee"
        else:
            tail_bytes = tail
        with open(path, "ab") as f:
            f.write(tail_bytes)
        await h.open()
        assert os.path.getsize(path) == good_size and h.log.truncated_bytes == len(tail_bytes)
        assert h.end() == 5
        assert (await h.append(produce_batch(1))).base_offset == 5
        await h.reopen()
        assert [b.base_offset for b in h.read_all().batches] == [0, 2, 5]

    scenario(tmp_path, body)


def test_corruption_in_the_middle_is_refused_and_left_alone(tmp_path):
    async def body(h):
        for _ in range(3):
            await h.append(produce_batch(2))
        await h.store.close()
        path = os.path.join(h.dir, segment_file_name(0))
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            data[70] ^= 0xFF  # inside the first batch's records
            f.seek(0)
            f.write(data)
        with pytest.raises(CorruptLogError, match="byte 0: CRC"):
            await h.open()
        with open(path, "rb") as f:
            assert f.read() == bytes(data)

    async def main():
        h = Harness(str(tmp_path))
        await h.open()
        await body(h)

    run(main())


def test_corruption_in_an_earlier_segment_and_a_broken_base_offset_are_refused(tmp_path):
    async def main():
        h = Harness(str(tmp_path), segment_bytes=300)
        await h.open()
        for _ in range(6):
            await h.append(produce_batch(2))
        await h.store.close()
        bases = list_segment_bases(h.dir)
        assert len(bases) >= 3
        first = os.path.join(h.dir, segment_file_name(bases[0]))
        with open(first, "r+b") as f:
            f.truncate(os.path.getsize(first) - 1)  # an earlier segment cannot be torn
        with pytest.raises(CorruptLogError):
            await h.open()
        h2 = Harness(str(tmp_path / "b"))
        await h2.open()
        for _ in range(3):
            await h2.append(produce_batch(2))
        await h2.store.close()
        with open(os.path.join(h2.dir, segment_file_name(0)), "r+b") as f:
            f.seek(0)
            f.write((7).to_bytes(8, "big"))  # the CRC does not cover the base offset; the scan checks it
        with pytest.raises(CorruptLogError, match="base offset 7, expected 0"):
            await h2.open()

    run(main())


# -- retention and DeleteRecords --------------------------------------------------------------------


def test_retention_ms_deletes_old_whole_segments_and_moves_the_log_start(tmp_path):
    async def body(h):
        now = h.clock.now_ms()
        for i in range(9):  # three batches a segment; timestamps 3h, 2h, 1h old
            await h.append(produce_batch(2, timestamp_ms=now - (3 - i // 3) * HOUR_MS))
        assert h.log.segment_count == 3
        assert await h.store.enforce_retention() == []  # retention.ms 4h: nothing is old enough
        h.clock.advance(HOUR_MS + 1)  # the oldest segment is now past 4h
        assert await h.store.enforce_retention() == [(h.tid, 0, 6)]
        assert h.store.log_start_offset(h.tid, 0) == 6 and list_segment_bases(h.dir) == [6, 12]
        with refused(Errors.OFFSET_OUT_OF_RANGE):
            h.store.read(h.tid, 0, 5, 100)
        await h.reopen()
        assert h.store.log_start_offset(h.tid, 0) == 6 and h.end() == 18
        h.clock.advance(10 * HOUR_MS)  # everything expired, the active segment too
        assert await h.store.enforce_retention() == [(h.tid, 0, 18)]
        assert list_segment_bases(h.dir) == [] and h.read_all().batches == ()
        assert (await h.append(produce_batch(1, timestamp_ms=h.clock.now_ms()))).base_offset == 18
        await h.reopen()
        assert (h.store.log_start_offset(h.tid, 0), h.end()) == (18, 19)

    scenario(tmp_path, body, retention_ms=4 * HOUR_MS, segment_bytes=3 * len(produce_batch(2)))


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path):
    size = len(produce_batch(2))

    async def body(h):
        for _ in range(10):
            await h.append(produce_batch(2, timestamp_ms=h.clock.now_ms()))
        assert h.log.segment_count == 5 and h.log.size_bytes == 10 * size
        moved = await h.store.enforce_retention()
        # Kafka drops a segment only while what stays is still at least retention.bytes: 10 batches,
        # limit 4.5 batches, segments of 2 -> drop two segments, keep 6 batches (dropping a third would
        # leave 4, below the limit).
        assert moved == [(h.tid, 0, 8)]
        assert h.log.size_bytes == 6 * size and list_segment_bases(h.dir) == [8, 12, 16]
        assert await h.store.enforce_retention() == []

    scenario(tmp_path, body, retention_bytes=int(4.5 * size), segment_bytes=2 * size)


def test_delete_records_moves_the_start_inside_a_segment_and_survives_restart(tmp_path):
    async def body(h):
        for _ in range(6):
            await h.append(produce_batch(2))
        assert list_segment_bases(h.dir) == [0, 4, 8]
        assert await h.store.delete_records(h.tid, 0, 5) == 5
        assert list_segment_bases(h.dir) == [4, 8]  # the segment wholly below 5 is gone
        assert [b.base_offset for b in h.read_all().batches] == [4, 6, 8, 10]
        assert await h.store.delete_records(h.tid, 0, 3) == 5  # never backwards
        with refused(Errors.OFFSET_OUT_OF_RANGE):
            await h.store.delete_records(h.tid, 0, 13)
        await h.reopen()
        assert h.store.log_start_offset(h.tid, 0) == 5
        assert await h.store.delete_records(h.tid, 0, -1) == 12  # -1: up to the high watermark
        assert h.read_all().batches == ()

    scenario(tmp_path, body, segment_bytes=2 * len(produce_batch(2)))


# -- transactions ----------------------------------------------------------------------------------


def test_transactions_hold_the_lso_and_aborts_are_listed_also_after_restart(tmp_path):
    async def body(h):
        await h.append(produce_batch(2))
        txn = lambda seq: produce_batch(3, producer_id=9, producer_epoch=0, base_sequence=seq, transactional=True)
        await h.append(txn(0))
        await h.append(produce_batch(1))
        assert h.store.last_stable_offset(h.tid, 0) == 2
        assert [b.base_offset for b in h.read_all(read_committed=True).batches] == [0]
        marker = await h.store.write_transaction_marker(h.tid, 0, 9, 0, commit=False)
        assert marker.base_offset == 6
        read = h.read_all(read_committed=True)
        assert [(b.base_offset, b.is_transactional, b.is_control) for b in read.batches] == [
            (0, False, False), (2, True, False), (5, False, False), (6, True, True)]
        assert read.aborted_transactions == (AbortedTransaction(9, 2),) and read.last_stable_offset == 7
        await h.append(txn(3))
        await h.store.write_transaction_marker(h.tid, 0, 9, 0, commit=True)
        await h.append(txn(6))
        await h.reopen()
        assert h.store.last_stable_offset(h.tid, 0) == 11
        read = h.read_all(read_committed=True)
        assert read.aborted_transactions == (AbortedTransaction(9, 2),)
        assert h.store.read(h.tid, 0, 7, 10**6, read_committed=True).aborted_transactions == ()
        assert h.store.read(h.tid, 0, 0, 10**6).aborted_transactions == ()

    scenario(tmp_path, body)


def test_offset_for_timestamps(tmp_path):
    async def body(h):
        for ts in (100, 200, 150, 300):  # a batch may carry an older timestamp than the one before
            await h.append(produce_batch(2, timestamp_ms=ts))
        assert [h.store.offset_for(h.tid, 0, ts) for ts in (0, 100, 101, 200, 201, 300, 301)] == [0, 0, 2, 2, 6, 6, 8]
        assert (h.store.offset_for(h.tid, 0, "earliest"), h.store.offset_for(h.tid, 0, "latest")) == (0, 8)
        with pytest.raises(ValueError):
            h.store.offset_for(h.tid, 0, "soon")

    scenario(tmp_path, body, segment_bytes=2 * len(produce_batch(2)))


def test_timestamp_lookup_ignores_batches_below_the_log_start(tmp_path):
    async def body(h):
        for ts in (500, 100, 200):
            await h.append(produce_batch(2, timestamp_ms=ts))
        await h.store.delete_records(h.tid, 0, 2)
        # The batch below the start (stamped 500) must not answer for 150: the first batch from the
        # start on stamped at or after 150 is the one at offset 4.
        assert [h.store.offset_for(h.tid, 0, ts) for ts in (50, 150, 200, 201)] == [2, 4, 4, 6]

    scenario(tmp_path, body)


def test_a_retry_of_a_published_batch_does_not_wait_for_later_writes(tmp_path):
    import threading

    async def body(h):
        data = produce_batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
        await h.append(data)
        h.fsync.gate = gate = threading.Event()
        later = asyncio.ensure_future(h.append(produce_batch(1)))
        await asyncio.sleep(0)
        assert await h.append(data) == (0, 1, -1, 0, True)  # answered while the later write waits
        assert not later.done()
        gate.set()
        assert (await later).base_offset == 2

    scenario(tmp_path, body)


def test_a_produce_carries_exactly_one_batch_unless_allowed_more(tmp_path):
    async def body(h):
        two = produce_batch(2) + produce_batch(3)
        with refused(Errors.INVALID_RECORD):
            await h.append(two)
        assert h.end() == 0
        assert (await h.append(two, max_batches=2)) == (0, 4, -1, 0, False)
        assert [b.base_offset for b in h.read_all().batches] == [0, 2]

    scenario(tmp_path, body)


def test_idle_producers_expire_unless_in_a_transaction(tmp_path):
    async def body(h):
        now = h.clock.now_ms()
        await h.append(produce_batch(1, producer_id=1, producer_epoch=0, base_sequence=0, timestamp_ms=now - HOUR_MS))
        await h.append(produce_batch(1, producer_id=2, producer_epoch=0, base_sequence=0, timestamp_ms=now))
        await h.append(produce_batch(1, producer_id=3, producer_epoch=0, base_sequence=0, timestamp_ms=now - HOUR_MS,
                                     transactional=True))
        assert await h.store.enforce_retention() == []
        assert [h.log.producer_entry(p) is None for p in (1, 2, 3)] == [True, False, False]
        assert h.store.stats()["expired_producers"] == 1
        # Forgotten: its next batch is accepted whatever its sequence (an unknown producer).
        assert (await h.append(produce_batch(1, producer_id=1, producer_epoch=0, base_sequence=9))).base_offset == 3

    scenario(tmp_path, body, producer_id_expiration_ms=HOUR_MS)


def test_retention_keeps_the_active_segment_while_writes_are_on_their_way(tmp_path):
    import threading

    async def body(h):
        for _ in range(4):
            await h.append(produce_batch(2, timestamp_ms=1_000))
        assert h.log.segment_count == 2
        h.fsync.gate = gate = threading.Event()
        pending = asyncio.ensure_future(h.append(produce_batch(1, timestamp_ms=1_000)))
        await asyncio.sleep(0)
        retention = asyncio.ensure_future(h.store.enforce_retention())
        await asyncio.sleep(0)  # one loop turn: the task takes its decision before its first await
        gate.set()
        assert (await pending).base_offset == 8
        assert await retention == [(h.tid, 0, 4)]  # only the older segment: the active one had a write queued
        assert [b.base_offset for b in h.read_all().batches] == [4, 6, 8]
        h.fsync.gate = None
        assert await h.store.enforce_retention() == [(h.tid, 0, 9)]  # now all of it
        await h.reopen()
        assert (h.store.log_start_offset(h.tid, 0), h.end()) == (9, 9)

    scenario(tmp_path, body, retention_ms=HOUR_MS, segment_bytes=2 * len(produce_batch(2)))


def test_an_append_racing_a_whole_log_deletion_goes_to_a_new_segment(tmp_path):
    import threading

    async def body(h):
        for _ in range(2):
            await h.append(produce_batch(2, timestamp_ms=1_000))
        h.fsync.gate = gate = threading.Event()  # holds retention's write of the new log start
        retention = asyncio.ensure_future(h.store.enforce_retention())
        await asyncio.sleep(0)  # one loop turn: the task takes its decision before its first await
        racing = asyncio.ensure_future(h.append(produce_batch(3, timestamp_ms=h.clock.now_ms())))
        await asyncio.sleep(0)
        gate.set()
        assert await retention == [(h.tid, 0, 4)]
        assert (await racing).base_offset == 4
        assert list_segment_bases(h.dir) == [4]
        assert [b.base_offset for b in h.read_all().batches] == [4]
        await h.reopen()
        assert (h.store.log_start_offset(h.tid, 0), h.end()) == (4, 7)

    scenario(tmp_path, body, retention_ms=HOUR_MS)


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 400), garbage=st.binary(max_size=120), flip=st.integers(-1, 399))
def test_any_damaged_segment_opens_to_a_valid_prefix_or_is_refused(tmp_path_factory, cut, garbage, flip):
    """Whatever a crash or a bad disk leaves in the last segment, opening either keeps a prefix of whole
    valid batches (and appends continue after it) or refuses with CorruptLogError; never anything else."""
    from sharegroup.topics.segment_files import scan_segment

    directory = str(tmp_path_factory.mktemp("seg"))
    batches = [stored_form(produce_batch(2, tag=b"%d" % i), 2 * i) for i in range(4)]
    data = bytearray(b"".join(batches))
    if 0 <= flip < len(data):
        data[flip] ^= 0x5A
    data = data[: len(data) - cut] + garbage
    with open(os.path.join(directory, segment_file_name(0)), "wb") as f:
        f.write(data)
    try:
        result = scan_segment(directory, 0, is_last=True, on_batch=lambda h, c: None)
    except CorruptLogError:
        return
    segment = result.segment
    try:
        kept = segment.size_bytes
        assert os.path.getsize(os.path.join(directory, segment_file_name(0))) == kept
        whole = [len(b) for b in batches]
        assert kept in [sum(whole[:k]) for k in range(5)]  # a prefix of whole batches
        assert segment.next_offset == 2 * len(segment.index)
    finally:
        segment.close()


def test_a_whole_last_batch_at_the_wrong_offset_is_corruption_not_a_torn_tail(tmp_path):
    async def main():
        h = Harness(str(tmp_path))
        await h.open()
        await h.append(produce_batch(2))
        await h.append(produce_batch(2))
        await h.store.close()
        with open(os.path.join(h.dir, segment_file_name(0)), "r+b") as f:
            f.seek(len(produce_batch(2)))
            f.write((9).to_bytes(8, "big"))  # its CRC still checks out: no torn write looks like this
        with pytest.raises(CorruptLogError, match="base offset 9, expected 2"):
            await h.open()

    run(main())
