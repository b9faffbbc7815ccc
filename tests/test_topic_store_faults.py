"""Storage faults of the topic store (SPEC §14), as Kafka handles a failed log dir.

A write, fsync or read error is logged at ERROR naming the file and the error; the store's one log dir
goes offline and refuses every write with KAFKA_STORAGE_ERROR until a restart; nothing not durable is
acknowledged; a refused batch is never visible to readers, and after a restart it is gone unless the
disk refused both its truncation and the `failed-write` file (the documented limit, tested last).
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import logging
import os
import threading

import pytest
from kio.schema.errors import ErrorCode

from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.topics.log_config import LogConfig
from sharegroup.topics.segment_files import FAILED_WRITE_FILE, segment_file_name
from sharegroup.topics.topic_store import TopicStore

from .server_batches import CountingFsync, produce_batch, stored_form

HOUR_MS = 3_600_000


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def eio() -> OSError:
    return OSError(errno.EIO, os.strerror(errno.EIO))


def run(coro) -> None:
    asyncio.run(coro)


def refused(error: Errors = Errors.KAFKA_STORAGE_ERROR):
    return pytest.raises(ShareError, match=error.name)


def errors_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


class Store:
    """A store with topics 't' (2 partitions) and 'u' (1), a controllable fsync and a manual clock."""

    def __init__(self, path, fsync=None, **config) -> None:
        self.path = str(path)
        self.fsync = fsync if fsync is not None else CountingFsync()
        self.config = LogConfig(**config)
        self.clock = ManualClock(10 * HOUR_MS)

    async def open(self) -> Store:
        self.store = await TopicStore.open(self.path, log_config=self.config, clock=self.clock, fsync=self.fsync)
        for name, partitions in (("t", 2), ("u", 1)):
            if self.store.topic_by_name(name) is None:
                await self.store.create_topic(name, partitions)
        self.t = self.store.topic_by_name("t").topic_id
        self.u = self.store.topic_by_name("u").topic_id
        return self

    async def reopen(self) -> Store:
        await self.store.close()
        return await self.open()

    async def append(self, data: bytes, partition: int = 0, topic=None, acks: int = -1):
        return await self.store.append(topic or self.t, partition, data, acks=acks)

    def log(self, partition: int = 0):
        return self.store.partition_log(self.t, partition)

    def segment(self, partition: int = 0, base: int = 0) -> str:
        return os.path.join(self.path, "topics", f"t-{partition}", segment_file_name(base))

    def batches(self, partition: int = 0) -> list[bytes]:
        read = self.store.read(self.t, partition, self.store.log_start_offset(self.t, partition), 2**31)
        return [bytes(b.records) for b in read.batches]

    def end(self, partition: int = 0) -> int:
        return self.store.log_end_offset(self.t, partition)


def producer_state(log, producer_id: int):
    entry = log.producer_entry(producer_id)
    return None if entry is None else (entry.epoch, list(entry.batches), entry.last_offset)


def half_write_then(error, monkeypatch) -> None:
    """Make `os.pwrite` (the segment writer's) write half of what it is given, then fail."""
    real = os.pwrite

    def pwrite(fd, data, position):
        real(fd, bytes(data)[: len(data) // 2], position)
        raise error()

    monkeypatch.setattr(os, "pwrite", pwrite)


FAULTS = {
    "write ENOSPC": ("write", "ENOSPC (No space left on device)"),
    "fsync EIO": ("fsync", "EIO (Input/output error)"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_refuses_its_appends_cuts_them_back_and_takes_the_store_offline(tmp_path, monkeypatch, caplog, fault):
    operation, text = FAULTS[fault]

    async def main():
        h = await Store(tmp_path).open()
        first = produce_batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
        assert (await h.append(first)).base_offset == 0
        await h.append(produce_batch(1), partition=1)
        size, before = os.path.getsize(h.segment()), producer_state(h.log(), 7)
        caplog.set_level(logging.ERROR)
        if operation == "write":
            half_write_then(enospc, monkeypatch)
        else:
            h.fsync.errno, h.fsync.fail_next = errno.EIO, 1  # the group's fsync; the cut-back's works
        retry = produce_batch(1, producer_id=7, producer_epoch=0, base_sequence=2)
        results = await asyncio.gather(h.append(retry), h.append(produce_batch(3)), return_exceptions=True)
        monkeypatch.undo()
        assert all(isinstance(r, ShareError) and r.error is Errors.KAFKA_STORAGE_ERROR for r in results), results
        assert text in results[0].message

        # Logged at ERROR with the file and the error; the log dir is named offline.
        logged = errors_logged(caplog)
        assert any(h.segment() in m and text in m and "offline" in m for m in logged), logged
        # Never acknowledged, cut back on disk, nothing of it visible, its producer state rolled back.
        assert os.path.getsize(h.segment()) == size
        assert h.end() == 2 and h.batches() == [stored_form(first, 0)]
        assert producer_state(h.log(), 7) == before
        h.log()._check(deep=True)
        # The whole store refuses writes, however healthy the disk is now; reads go on.
        with refused():
            await h.append(produce_batch(1))
        with refused():
            await h.append(produce_batch(1), partition=1)
        with refused():
            await h.append(produce_batch(1), topic=h.u)
        with refused():
            await h.store.create_topic("v", 1)
        with refused():
            await h.store.delete_records(h.t, 0, 1)
        with refused():
            await h.store.write_transaction_marker(h.t, 0, 7, 0, commit=False)
        assert await h.store.enforce_retention() == []
        assert h.batches() == [stored_form(first, 0)] and h.end(1) == 1
        assert (h.store.stats()["offline_log_dirs"], h.store.stats()["storage_faults"]) == (1, 1)

        # A restart brings the store back with exactly the acknowledged data; the refused batch can be
        # sent again and is a new append (no duplicate of anything).
        await h.reopen()
        assert h.end() == 2 and h.batches() == [stored_form(first, 0)]
        again = await h.append(retry)
        assert (again.base_offset, again.duplicate) == (2, False)
        assert h.store.stats()["offline_log_dirs"] == 0
        await h.store.close()

    run(main())


def test_a_fault_in_a_new_segment_removes_it(tmp_path, caplog):
    async def main():
        h = await Store(tmp_path, segment_bytes=200).open()
        first = produce_batch(2)
        await h.append(first)
        caplog.set_level(logging.ERROR)
        h.fsync.fail_next = 1  # the fsync of segment 2, which the append started
        with refused():
            await h.append(produce_batch(2))
        assert sorted(os.listdir(os.path.dirname(h.segment()))) == [segment_file_name(0)]
        assert any(m.startswith(f"fsync of {h.segment(base=2)} failed") for m in errors_logged(caplog))
        await h.reopen()
        assert h.batches() == [stored_form(first, 0)] and h.log().segment_count == 1
        await h.store.close()

    run(main())


class PerFileFsync:
    """An fsync that fails once for chosen descriptors and holds others until released."""

    def __init__(self) -> None:
        self.failing: set[int] = set()
        self.held: set[int] = set()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        if fd in self.held:
            self.release.wait(10)
        if fd in self.failing:
            self.failing.discard(fd)
            raise eio()
        os.fsync(fd)


def test_appends_queued_in_other_partitions_are_refused_once_the_store_is_offline(tmp_path, caplog):
    async def main():
        fsync = PerFileFsync()
        h = await Store(tmp_path, fsync=fsync).open()
        await h.append(produce_batch(1))
        await h.append(produce_batch(1), partition=1)
        fsync.failing.add(h.log(0)._segments[-1].fd)
        fsync.held.add(h.log(1)._segments[-1].fd)
        size1 = os.path.getsize(h.segment(1))
        on_its_way = asyncio.ensure_future(h.append(produce_batch(1), partition=1))  # durable: acknowledged
        while not h.log(1)._writer.inflight:
            await asyncio.sleep(0)
        queued = asyncio.ensure_future(h.append(produce_batch(1), partition=1))  # never written: refused
        caplog.set_level(logging.ERROR)
        with refused():
            await h.append(produce_batch(1))
        fsync.release.set()
        assert (await on_its_way).base_offset == 1
        with refused():
            await queued
        assert h.end(1) == 2 and len(h.batches(1)) == 2
        assert os.path.getsize(h.segment(1)) == size1 + len(produce_batch(1))
        assert [m for m in errors_logged(caplog) if h.segment(0) in m]
        h.log(1)._check(deep=True)
        await h.store.close()

    run(main())


def test_a_batch_whose_cut_back_fails_is_cut_by_the_next_open(tmp_path, monkeypatch, caplog):
    """The write succeeded and its fsync failed: the whole batch is on disk. The truncation fails too,
    so a `failed-write` file records the acknowledged end; the next open cuts the batch (without the
    file, recovery would find a whole valid batch and keep it)."""

    async def main():
        h = await Store(tmp_path).open()
        first = produce_batch(2)
        await h.append(first)
        size = os.path.getsize(h.segment())
        caplog.set_level(logging.WARNING)
        h.fsync.fail_next = 1

        def no_truncate(fd, length):
            raise eio()

        monkeypatch.setattr(os, "ftruncate", no_truncate)
        with refused():
            await h.append(produce_batch(3))
        monkeypatch.undo()
        assert os.path.getsize(h.segment()) == size + len(produce_batch(3))  # the refused batch, whole
        assert os.path.exists(os.path.join(os.path.dirname(h.segment()), FAILED_WRITE_FILE))
        logged = errors_logged(caplog)
        assert any(m.startswith(f"fsync of {h.segment()} failed: EIO") for m in logged), logged
        assert any(m.startswith(f"truncate of {h.segment()} failed: EIO") for m in logged), logged
        assert any(FAILED_WRITE_FILE in m and "next open cuts" in m for m in logged), logged
        assert h.end() == 2 and h.batches() == [stored_form(first, 0)]  # never visible while running

        await h.reopen()
        assert h.end() == 2 and h.batches() == [stored_form(first, 0)]
        assert os.path.getsize(h.segment()) == size
        assert not os.path.exists(os.path.join(os.path.dirname(h.segment()), FAILED_WRITE_FILE))
        assert any("refused before the restart" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.WARNING)
        assert (await h.append(produce_batch(1))).base_offset == 2
        await h.store.close()

    run(main())


def test_when_the_disk_refuses_the_cut_and_the_failed_write_file_a_restart_may_keep_the_batch(
        tmp_path, monkeypatch, caplog):
    """The documented limit: with the fsync failing for good and the truncation failing, nothing can
    record that the batch was refused. It is never visible while the broker runs, an ERROR says what a
    restart may do, and recovery then finds the whole batch and keeps it, as after a crash."""

    async def main():
        h = await Store(tmp_path).open()
        first, lost = produce_batch(2), produce_batch(3)
        await h.append(first)
        caplog.set_level(logging.ERROR)
        h.fsync.fail = True

        def no_truncate(fd, length):
            raise eio()

        monkeypatch.setattr(os, "ftruncate", no_truncate)
        with refused():
            await h.append(lost)
        monkeypatch.undo()
        h.fsync.fail = False
        assert any("could not be cut back nor marked" in m and "may find them" in m for m in errors_logged(caplog))
        assert h.batches() == [stored_form(first, 0)]
        await h.reopen()
        assert h.batches() == [stored_form(first, 0), stored_form(lost, 2)]
        await h.store.close()

    run(main())


def test_a_failed_metadata_write_takes_the_store_offline(tmp_path, monkeypatch, caplog):
    async def main():
        h = await Store(tmp_path).open()
        await h.append(produce_batch(1))
        caplog.set_level(logging.ERROR)
        real = os.write

        def full(fd, data):
            raise enospc()

        monkeypatch.setattr(os, "write", full)
        with refused():
            await h.store.create_topic("v", 1)
        monkeypatch.setattr(os, "write", real)
        topics_tmp = os.path.join(h.path, "topics", "topics.json.tmp")
        assert any(topics_tmp in m and "ENOSPC" in m for m in errors_logged(caplog)), errors_logged(caplog)
        assert h.store.topic_by_name("v") is None
        with refused():
            await h.append(produce_batch(1))
        await h.reopen()
        assert h.store.topic_by_name("v") is None and h.end() == 1
        await h.store.close()

    run(main())


def test_a_failed_log_start_write_refuses_delete_records_and_moves_nothing(tmp_path, caplog):
    async def main():
        h = await Store(tmp_path).open()
        await h.append(produce_batch(3))
        caplog.set_level(logging.ERROR)
        h.fsync.fail_next = 1
        with refused():
            await h.store.delete_records(h.t, 0, 2)
        assert h.store.log_start_offset(h.t, 0) == 0
        start_tmp = os.path.join(os.path.dirname(h.segment()), "log-start-offset.tmp")
        assert any(start_tmp in m and "EIO" in m for m in errors_logged(caplog)), errors_logged(caplog)
        with refused():
            await h.append(produce_batch(1))
        await h.reopen()
        assert h.store.log_start_offset(h.t, 0) == 0 and h.end() == 3
        await h.store.close()

    run(main())


def test_a_read_error_is_a_storage_error_and_takes_the_store_offline(tmp_path, monkeypatch, caplog):
    async def main():
        h = await Store(tmp_path).open()
        await h.append(produce_batch(1))
        caplog.set_level(logging.ERROR)

        def broken(fd, length, position):
            raise eio()

        monkeypatch.setattr(os, "pread", broken)
        with refused():
            h.batches()
        monkeypatch.undo()
        assert any(h.segment() in m and m.startswith("read of") for m in errors_logged(caplog))
        with refused():
            await h.append(produce_batch(1))
        assert len(h.batches()) == 1  # the disk reads again: reads go on, writes stay refused
        await h.store.close()

    run(main())


# -- on the wire ------------------------------------------------------------------------------------


def test_produce_gets_kafka_storage_error_from_a_serve_whose_store_fails(tmp_path, monkeypatch, caplog):
    from kio.index import load_request_schema

    from sharegroup.server.codec import build
    from tests.server_harness import BrokerThread, RawClient, batch_bytes

    def produce(client, records):
        body = build(load_request_schema(0, 9), {
            "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
            "topic_data": [{"name": "p", "partition_data": [{"index": 0, "records": records}]}]})
        return client.request(0, 9, body).responses[0].partition_responses[0]

    caplog.set_level(logging.ERROR)
    broker = BrokerThread(tmp_path)
    try:
        broker.call(broker.store.create_topic("p", 1))
        client = RawClient(broker.broker.port)
        try:
            assert (produce(client, batch_bytes(2)).error_code, broker.store.log_end_offset(
                broker.store.topic_by_name("p").topic_id, 0)) == (ErrorCode.none, 2)
            half_write_then(enospc, monkeypatch)
            answer = produce(client, batch_bytes(1))
            monkeypatch.undo()
            assert answer.error_code == ErrorCode.kafka_storage_error
            assert "ENOSPC" in answer.error_message
            again = produce(client, batch_bytes(1))  # the disk has room again; the log dir stays offline
            assert again.error_code == ErrorCode.kafka_storage_error and "offline" in again.error_message
        finally:
            client.close()
        tid = broker.store.topic_by_name("p").topic_id
        assert broker.store.log_end_offset(tid, 0) == 2
        assert len(broker.store.read(tid, 0, 0, 2**20).batches) == 1
        segment = os.path.join(tmp_path, "topics", "p-0", segment_file_name(0))
        assert any(segment in m and "ENOSPC" in m for m in errors_logged(caplog)), errors_logged(caplog)
    finally:
        broker.stop()
