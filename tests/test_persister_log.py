"""SegmentLog: segment files and rolling, recovery (torn tails truncated, corruption refused with the
file and offset, nothing deleted), pruning, group commit (batching, durability before resolution,
bounded queue), failure injection, the directory lock, read_log and the metrics."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import pathlib
import threading
import uuid

import crc32c
import pytest
from prometheus_client import CollectorRegistry

import persister.state_log as state_log
import persister.state_log_files as state_log_files
from persister import (
    CorruptLogError,
    LogEntry,
    LogLockedError,
    LogWriteError,
    RecordDecodeError,
    RecordLog,
    SegmentLog,
    ShareCheckpoint,
    ShareDelta,
    StateKey,
    TornRecordError,
    check_frame,
    encode_record,
    read_log,
)
from persister.state_log import SEGMENT_BYTES_MIN, START_OFFSET_FILE, segment_file_name
from persister.state_log_metrics import REGISTRY, metrics_for
from sharegroup.types import StateBatch

from .conftest import run

TOPIC = uuid.UUID("00000000-0000-0000-0000-00000000c0de")


def key(partition: int = 0) -> StateKey:
    return StateKey("group-a", TOPIC, partition)


def delta(i: int) -> ShareDelta:
    return ShareDelta(0, 0, i, i, [StateBatch(i, i + 3, 2, 1)])


def checkpoint(i: int, batches: int = 0) -> ShareCheckpoint:
    return ShareCheckpoint(i, 0, 0, i, 0, 1_000, 1_000, [StateBatch(10 * b, 10 * b + 4, 2, 1) for b in range(batches)])


def entry(i: int):
    """The i-th record of the logs these tests write: a checkpoint every 5th, deltas in between."""
    return (key(i % 7), checkpoint(i) if i % 5 == 0 else delta(i))


async def open_log(path, **options) -> SegmentLog:
    options.setdefault("fsync", False)
    return await SegmentLog.open(path, **options)


async def fill(path, n: int, **options) -> SegmentLog:
    """A log holding records 0..n-1 (one append each), left open."""
    log = await open_log(path, **options)
    for i in range(n):
        assert await log.append([entry(i)]) == [i]
    return log


def expected_entries(first: int, end: int) -> list[LogEntry]:
    return [LogEntry(i, *entry(i)) for i in range(first, end)]


def files(path) -> dict[str, bytes]:
    """Every file in the directory with its bytes (to prove that nothing changed)."""
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path)) if name != ".lock"}


def segment_names(path) -> list[str]:
    return sorted(name for name in os.listdir(path) if name.endswith(".log"))


def flip_byte(file_path, position: int) -> None:
    data = bytearray(file_path.read_bytes())
    data[position] ^= 0x40
    file_path.write_bytes(bytes(data))


# -- options and layout ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"segment_bytes": SEGMENT_BYTES_MIN - 1},
        {"segment_bytes": 2048.0},
        {"segment_bytes": True},
        {"fsync": 1},
        {"max_pending_appends": 0},
        {"max_group_bytes": 0},
        {"metrics_registry": object()},
    ],
)
def test_bad_options_are_value_errors(tmp_path, options):
    with pytest.raises(ValueError):
        run(SegmentLog.open(tmp_path / "log", **options))
    assert not (tmp_path / "log").exists()


def test_a_new_log_is_one_empty_segment_and_appends_get_consecutive_offsets(tmp_path):
    async def main():
        log = await open_log(tmp_path / "new" / "log")
        assert isinstance(log, RecordLog)
        assert (log.start_offset, log.end_offset, len(log)) == (0, 0, 0)
        assert segment_names(tmp_path / "new" / "log") == [segment_file_name(0)] == ["00000000000000000000.log"]
        assert await log.append([entry(0), entry(1)]) == [0, 1]
        assert await log.append([]) == []
        assert await log.append([entry(2)]) == [2]
        assert list(log.read_all()) == expected_entries(0, 3)
        assert (log.end_offset, len(log)) == (3, 3)
        assert log.size_bytes() == sum(len(encode_record(*entry(i))) for i in range(3))
        log._check()
        await log.close()

    run(main())


def test_a_bad_record_appends_nothing(tmp_path):
    async def main():
        log = await open_log(tmp_path)
        with pytest.raises(ValueError):
            await log.append([entry(0), (key(0), ShareDelta(0, -5, 0, 0, []))])
        with pytest.raises(TypeError):
            await log.append([(key(0), "not a record")])
        assert log.end_offset == 0 and log.size_bytes() == 0
        await log.close()

    run(main())


def test_segments_roll_by_size_and_are_named_by_base_offset(tmp_path):
    async def main():
        log = await fill(tmp_path, 100, segment_bytes=1024)
        segments = log.segments
        assert len(segments) > 3
        assert [os.path.basename(s.path) for s in segments] == segment_names(tmp_path)
        for previous, segment in zip(segments, segments[1:]):
            assert segment.base_offset == previous.base_offset + previous.record_count
            assert os.path.basename(segment.path) == segment_file_name(segment.base_offset)
        for segment in segments:
            assert segment.size_bytes == os.path.getsize(segment.path) <= 1024
            assert segment.size_bytes + len(encode_record(*entry(segment.base_offset + segment.record_count))) > 1024 \
                or segment is segments[-1]
        assert list(log.read_all()) == expected_entries(0, 100)
        await log.close()
        reopened = await open_log(tmp_path, segment_bytes=1024)
        assert reopened.segments == segments
        assert list(reopened.read_all()) == expected_entries(0, 100)
        assert await reopened.append([entry(100)]) == [100]
        reopened._check()
        await reopened.close()

    run(main())


def test_an_append_larger_than_a_segment_gets_a_segment_of_its_own_and_is_never_split(tmp_path):
    async def main():
        log = await fill(tmp_path, 3, segment_bytes=1024)
        big = [(key(1), checkpoint(1, batches=150))] + [entry(i) for i in range(4, 8)]
        assert sum(len(encode_record(*e)) for e in big) > 1024
        assert await log.append(big) == [3, 4, 5, 6, 7]
        assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 3), (3, 5)]
        assert await log.append([entry(8)]) == [8]
        assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 3), (3, 5), (8, 1)]
        await log.close()
        assert [e.offset for e in read_log(tmp_path)] == list(range(9))

    run(main())


# -- recovery: torn tails -------------------------------------------------------------------------


def test_check_frame_checks_framing_like_decode_record():
    frames = encode_record(*entry(0)) + encode_record(*entry(1))
    first = len(encode_record(*entry(0)))
    assert check_frame(frames) == first and check_frame(frames, first) == len(frames)
    with pytest.raises(TornRecordError):
        check_frame(frames[:-1], first)
    corrupt = bytearray(frames)
    corrupt[first + 12] ^= 1
    with pytest.raises(RecordDecodeError):
        check_frame(bytes(corrupt), first)
    assert check_frame(bytes(corrupt)) == first


def test_every_cut_of_the_last_segment_recovers_exactly_the_whole_records_before_it(tmp_path):
    """A crash can leave the last segment cut at any byte: recovery keeps the whole frames before the
    cut and truncates the rest, so the log opens and appends continue at the right offset."""

    async def main():
        log = await fill(tmp_path / "src", 12, segment_bytes=1024)
        last = log.segments[-1]
        await log.close()
        data = open(last.path, "rb").read()
        frame_ends = []
        pos = 0
        for i in range(last.base_offset, last.base_offset + last.record_count):
            pos += len(encode_record(*entry(i)))
            frame_ends.append(pos)
        assert pos == len(data)
        target = tmp_path / "cut"
        target.mkdir()
        for name in segment_names(tmp_path / "src"):
            if name != os.path.basename(last.path):
                (target / name).write_bytes((tmp_path / "src" / name).read_bytes())
        for cut in range(len(data) + 1):
            (target / os.path.basename(last.path)).write_bytes(data[:cut])
            whole = sum(1 for end in frame_ends if end <= cut)
            log = await open_log(target)
            assert log.end_offset == last.base_offset + whole, cut
            assert os.path.getsize(last.path.replace(str(tmp_path / "src"), str(target))) == (
                frame_ends[whole - 1] if whole else 0
            )
            assert await log.append([entry(log.end_offset)]) == [last.base_offset + whole]
            await log.close()
            assert list(read_log(target)) == expected_entries(0, last.base_offset + whole + 1)

    run(main())


@pytest.mark.parametrize("tail", [b"\0" * 700, b"\0\0\0", bytes(range(40)) * 3])
def test_a_tail_of_zeros_or_garbage_after_the_last_record_is_truncated(tmp_path, tail, caplog):
    async def main():
        log = await fill(tmp_path, 10)
        size = log.size_bytes()
        await log.close()
        path = tmp_path / segment_file_name(0)
        with open(path, "ab") as f:
            f.write(tail)
        assert [e.offset for e in read_log(tmp_path)] == list(range(10))  # read-only: skipped, not cut
        assert os.path.getsize(path) == size + len(tail)
        with caplog.at_level(logging.WARNING, logger="persister.log"):
            log = await open_log(tmp_path)
        assert "truncating" in caplog.text and str(path) in caplog.text
        assert os.path.getsize(path) == size and log.end_offset == 10
        await log.close()

    run(main())


def test_a_bad_crc_in_the_very_last_record_is_a_torn_tail(tmp_path):
    async def main():
        log = await fill(tmp_path, 10)
        last_size = len(encode_record(*entry(9)))
        size = log.size_bytes()
        await log.close()
        flip_byte(tmp_path / segment_file_name(0), size - 2)
        log = await open_log(tmp_path)
        assert log.end_offset == 9 and log.size_bytes() == size - last_size
        await log.close()

    run(main())


# -- recovery: corruption is refused, nothing is changed ------------------------------------------


def test_a_corrupt_record_in_an_earlier_segment_is_refused_with_file_and_offset(tmp_path):
    async def main():
        log = await fill(tmp_path, 100, segment_bytes=1024)
        second = log.segments[1]
        await log.close()
        # Flip a byte inside the third record of the second segment.
        sizes = [len(encode_record(*entry(second.base_offset + i))) for i in range(3)]
        position = sizes[0] + sizes[1] + sizes[2] // 2
        flip_byte(pathlib.Path(second.path), position)
        before = files(tmp_path)
        with pytest.raises(CorruptLogError) as info:
            await open_log(tmp_path)
        assert info.value.path == second.path and info.value.offset == second.base_offset + 2
        assert second.path in str(info.value) and str(second.base_offset + 2) in str(info.value)
        assert files(tmp_path) == before  # nothing truncated, nothing deleted
        with pytest.raises(CorruptLogError) as info:
            read_log(tmp_path)
        assert (info.value.path, info.value.offset) == (second.path, second.base_offset + 2)
        with pytest.raises(CorruptLogError):  # the failed open released the directory: no LogLockedError
            await open_log(tmp_path)

    run(main())


def test_any_flipped_byte_before_the_last_record_of_the_last_segment_is_refused(tmp_path):
    async def main():
        log = await fill(tmp_path / "src", 6)
        await log.close()
        data = (tmp_path / "src" / segment_file_name(0)).read_bytes()
        last_start = len(data) - len(encode_record(*entry(5)))
        starts = [0]
        for i in range(5):
            starts.append(starts[-1] + len(encode_record(*entry(i))))
        target = tmp_path / "t"
        target.mkdir()
        for position in range(0, last_start, 3):
            corrupt = bytearray(data)
            corrupt[position] ^= 0x01
            (target / segment_file_name(0)).write_bytes(bytes(corrupt))
            with pytest.raises(CorruptLogError) as info:
                await open_log(target)
            assert info.value.offset == max(i for i, s in enumerate(starts) if s <= position), position
            assert (target / segment_file_name(0)).read_bytes() == bytes(corrupt)

    run(main())


def test_a_short_earlier_segment_and_a_missing_segment_are_refused(tmp_path):
    async def main():
        log = await fill(tmp_path, 100, segment_bytes=1024)
        first, second, third = log.segments[:3]
        await log.close()
        with open(first.path, "r+b") as f:
            f.truncate(first.size_bytes - 5)
        with pytest.raises(CorruptLogError) as info:
            await open_log(tmp_path)
        assert (info.value.path, info.value.offset) == (first.path, first.base_offset + first.record_count - 1)
        with open(first.path, "r+b") as f:  # restore it, then lose the second segment
            f.truncate(0)
        log2 = await fill(tmp_path / "copy", 100, segment_bytes=1024)
        await log2.close()
        name = os.path.basename(first.path)
        (tmp_path / name).write_bytes((tmp_path / "copy" / name).read_bytes())
        os.unlink(second.path)
        with pytest.raises(CorruptLogError) as info:
            await open_log(tmp_path)
        assert (info.value.path, info.value.offset) == (third.path, second.base_offset)

    run(main())


def test_a_record_with_a_valid_frame_but_a_bad_payload_fails_the_replay_with_file_and_offset(tmp_path):
    async def main():
        log = await fill(tmp_path, 3)
        await log.close()
        body = bytes((1, 0)) + b"\x92\xc0\xc0"  # a delta whose key and value are nil
        length = len(body).to_bytes(4, "big")
        bad = length + crc32c.crc32c(body, crc32c.crc32c(length)).to_bytes(4, "big") + body
        with open(tmp_path / segment_file_name(0), "ab") as f:
            f.write(bad + encode_record(*entry(4)))
        log = await open_log(tmp_path)  # the framing is sound
        assert log.end_offset == 5
        with pytest.raises(CorruptLogError) as info:
            list(log.read_all())
        assert info.value.offset == 3 and info.value.path == str(tmp_path / segment_file_name(0))
        await log.close()
        from persister import ShareCoordinator

        with pytest.raises(CorruptLogError):
            await ShareCoordinator.open(tmp_path, fsync=False)
        await (await open_log(tmp_path)).close()  # the failed coordinator open closed its log

    run(main())


# -- pruning --------------------------------------------------------------------------------------


def test_delete_below_deletes_whole_segments_and_persists_the_start_offset(tmp_path):
    async def main():
        log = await fill(tmp_path, 100, segment_bytes=1024)
        segments = log.segments
        inside = segments[2].base_offset + 1  # inside the third segment
        assert await log.delete_below(inside) == inside
        assert log.start_offset == inside and len(log) == 100 - inside
        assert log.segments == segments[2:]
        assert not os.path.exists(segments[0].path) and not os.path.exists(segments[1].path)
        assert list(log.read_all()) == expected_entries(inside, 100)
        assert await log.delete_below(3) == inside  # never backwards
        log._check()
        await log.close()
        log = await open_log(tmp_path, segment_bytes=1024)
        assert (log.start_offset, log.end_offset, log.segments) == (inside, 100, segments[2:])
        assert list(read_log(tmp_path)) == expected_entries(inside, 100)
        # Up to the end: every segment but the active one goes.
        assert await log.delete_below(10**9) == 100
        assert log.segments == [segments[-1]] and len(log) == 0 and list(log.read_all()) == []
        assert await log.append([entry(100)]) == [100]
        await log.close()
        log = await open_log(tmp_path)
        assert (log.start_offset, log.end_offset) == (100, 101)
        await log.close()

    run(main())


def test_a_prune_interrupted_after_the_start_offset_is_finished_by_the_next_open(tmp_path, monkeypatch, caplog):
    async def main():
        log = await fill(tmp_path, 100, segment_bytes=1024)
        segments = log.segments

        def fail_to_delete(*args):
            raise OSError(errno.EIO, "injected")

        monkeypatch.setattr(state_log_files, "delete_files", fail_to_delete)
        with caplog.at_level(logging.ERROR, logger="persister.log"):
            assert await log.delete_below(segments[3].base_offset) == segments[3].base_offset
        assert "delete of" in caplog.text and "offline" in caplog.text  # a storage fault (test_state_log_faults)
        assert all(os.path.exists(s.path) for s in segments)  # still there
        await log.close()
        monkeypatch.undo()
        log = await open_log(tmp_path, segment_bytes=1024)
        assert log.segments == segments[3:] and log.start_offset == segments[3].base_offset
        assert [os.path.basename(s.path) for s in segments[3:]] == segment_names(tmp_path)
        await log.close()

    run(main())


def test_an_unreadable_start_offset_file_is_refused(tmp_path):
    async def main():
        log = await fill(tmp_path, 5)
        await log.delete_below(2)
        await log.close()
        assert (tmp_path / START_OFFSET_FILE).read_bytes().startswith(b"sharegroup-log-start 1 2 ")
        (tmp_path / START_OFFSET_FILE).write_bytes(b"sharegroup-log-start 1 3 00000000\n")
        with pytest.raises(CorruptLogError) as info:
            await open_log(tmp_path)
        assert info.value.path == str(tmp_path / START_OFFSET_FILE)

    run(main())


# -- group commit ---------------------------------------------------------------------------------


class FsyncSpy:
    """Counts fsyncs and records the file size each one made durable; can hold fsyncs on a gate."""

    def __init__(self, monkeypatch):
        self.sizes: list[int] = []
        self.gate: threading.Event | None = None
        real = state_log_files.fsync_file

        def spy(fd):
            if self.gate is not None:
                assert self.gate.wait(30), "test gate never opened"
            real(fd)
            self.sizes.append(os.fstat(fd).st_size)

        monkeypatch.setattr(state_log_files, "fsync_file", spy)


def test_concurrent_appends_share_fsyncs_and_resolve_only_once_durable(tmp_path, monkeypatch):
    spy = FsyncSpy(monkeypatch)

    async def main():
        log = await open_log(tmp_path, fsync=True)
        opened_fsyncs = log.fsync_count  # creating the directory and the first segment
        frame_ends = []
        total = 0
        for i in range(200):
            total += len(encode_record(*entry(i)))
            frame_ends.append(total)

        async def one(i):
            (offset,) = await log.append([entry(i)])
            # Resolved: the bytes up to the end of this record had been fsync'd.
            assert spy.sizes and max(spy.sizes) >= frame_ends[offset]
            return offset

        offsets = await asyncio.gather(*(one(i) for i in range(200)))
        assert sorted(offsets) == list(range(200))
        assert log.group_commits <= 3 and log.fsync_count - opened_fsyncs == len(spy.sizes) <= 3
        assert list(log.read_all()) == [LogEntry(o, *entry(i)) for i, o in enumerate(offsets)]
        await log.close()

    run(main())


def test_appends_wait_while_their_fsync_is_running(tmp_path, monkeypatch):
    spy = FsyncSpy(monkeypatch)

    async def main():
        log = await open_log(tmp_path, fsync=True)
        spy.gate = threading.Event()
        first = asyncio.ensure_future(log.append([entry(0)]))
        for _ in range(20):
            await asyncio.sleep(0)
        more = [asyncio.ensure_future(log.append([entry(i)])) for i in range(1, 50)]
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.done() and not any(f.done() for f in more)
        assert log.end_offset == 0  # nothing counts before it is durable
        spy.gate.set()
        assert await first == [0]
        assert sorted([o for f in more for o in await f]) == list(range(1, 50))
        assert log.group_commits == 2  # the first alone, then all that queued behind its fsync
        await log.close()

    run(main())


def test_the_queue_is_bounded(tmp_path, monkeypatch):
    spy = FsyncSpy(monkeypatch)
    sizes = []

    async def main():
        log = await open_log(tmp_path, fsync=True, max_pending_appends=4)
        real_plan = state_log.plan_group
        monkeypatch.setattr(state_log, "plan_group", lambda group, *rest: sizes.append(len(group)) or real_plan(group, *rest))
        spy.gate = threading.Event()
        appends = [asyncio.ensure_future(log.append([entry(i)])) for i in range(10)]
        for _ in range(20):
            await asyncio.sleep(0)
        assert log._pending == 4  # six appends wait for room before they are even queued
        spy.gate.set()
        offsets = [o for f in appends for o in await f]
        assert sorted(offsets) == list(range(10))
        assert max(sizes) <= 4 and sum(sizes) == 10
        log._check()
        await log.close()

    run(main())


def test_groups_are_bounded_by_max_group_bytes(tmp_path):
    async def main():
        log = await open_log(tmp_path, max_group_bytes=300)
        await asyncio.gather(*(log.append([entry(i)]) for i in range(40)))
        assert log.group_commits >= 40 * 45 // 300
        assert [e.offset for e in log.read_all()] == list(range(40))
        await log.close()

    run(main())


def test_a_cancelled_append_that_was_still_queued_is_skipped(tmp_path, monkeypatch):
    spy = FsyncSpy(monkeypatch)

    async def main():
        log = await open_log(tmp_path, fsync=True)
        spy.gate = threading.Event()
        first = asyncio.ensure_future(log.append([entry(0)]))
        for _ in range(20):
            await asyncio.sleep(0)
        doomed = asyncio.ensure_future(log.append([entry(1)]))
        kept = asyncio.ensure_future(log.append([entry(2)]))
        await asyncio.sleep(0)
        doomed.cancel()
        spy.gate.set()
        assert await first == [0] and await kept == [1]
        assert doomed.cancelled()
        assert [e.record for e in log.read_all()] == [entry(0)[1], entry(2)[1]]
        log._check()
        await log.close()

    run(main())


# -- lifecycle ------------------------------------------------------------------------------------


def test_a_directory_is_open_by_one_log_at_a_time_but_readable(tmp_path):
    async def main():
        log = await fill(tmp_path, 3)
        with pytest.raises(LogLockedError):
            await open_log(tmp_path)
        assert [e.offset for e in read_log(tmp_path)] == [0, 1, 2]
        await log.close()
        await log.close()
        assert log.closed
        with pytest.raises(LogWriteError):
            await log.append([entry(3)])
        with pytest.raises(LogWriteError):
            await log.delete_below(1)
        log = await open_log(tmp_path)
        assert log.end_offset == 3
        await log.close()

    run(main())


def test_close_waits_for_queued_appends(tmp_path):
    async def main():
        log = await open_log(tmp_path, fsync=True)
        appends = [asyncio.ensure_future(log.append([entry(i)])) for i in range(30)]
        await asyncio.sleep(0)
        await log.close()
        assert sorted(o for f in appends for o in f.result()) == list(range(30))

    run(main())


def test_read_log_of_a_missing_directory_raises():
    with pytest.raises(FileNotFoundError):
        read_log("/nonexistent/state-log")


# -- metrics --------------------------------------------------------------------------------------


def test_metrics_count_what_the_log_did(tmp_path):
    registry = CollectorRegistry()

    async def main():
        log = await open_log(tmp_path, fsync=True, segment_bytes=1024, metrics_registry=registry)
        await asyncio.gather(*(log.append([entry(i)]) for i in range(50)))
        for i in range(50, 100):
            await log.append([entry(i)])
        await log.delete_below(30)
        await log.close()
        return log

    log = run(main())
    labels = {"log": str(tmp_path)}

    def value(name, **extra):
        return registry.get_sample_value(name, {**labels, **extra})

    assert value("sharegroup_persister_fsyncs_total") == log.fsync_count > 0
    assert value("sharegroup_persister_group_commit_records_count") == log.group_commits
    assert value("sharegroup_persister_group_commit_records_sum") == 100
    assert value("sharegroup_persister_appended_bytes_total") == log.appended_bytes == sum(
        len(encode_record(*entry(i))) for i in range(100)
    )
    assert value("sharegroup_persister_write_latency_seconds_count") == 100
    assert value("sharegroup_persister_recovery_seconds_count", stage="scan") == 1
    assert value("sharegroup_persister_prune_offset") == 30


def test_two_logs_in_one_process_share_the_default_registry(tmp_path):
    async def main():
        a = await fill(tmp_path / "a", 3)
        b = await fill(tmp_path / "b", 5)
        again = await fill(tmp_path / "c", 1)
        for log in (a, b, again):
            await log.close()

    run(main())
    assert metrics_for() is metrics_for(REGISTRY)
    assert REGISTRY.get_sample_value("sharegroup_persister_group_commit_records_sum", {"log": str(tmp_path / "a")}) == 3
    assert REGISTRY.get_sample_value("sharegroup_persister_group_commit_records_sum", {"log": str(tmp_path / "b")}) == 5
