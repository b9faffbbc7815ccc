"""The group coordinator's record file `DIR/groups/records.log` (`FileRecordSink`): records survive a
reopen as `compact` of what was appended; compaction keeps exactly the live records (a coordinator
rebuilt from the compacted file equals one rebuilt from every record) and bounds file and memory; a
torn tail is cut with a WARNING while mid-file corruption is refused with CorruptLogError naming file
and byte (serve exits 1); a failed write or fsync is logged at ERROR, never acknowledged, never comes
back after a reopen, and the store refuses writes until a restart (the coordinator answers Kafka's
NOT_COORDINATOR). The SIGKILL-mid-compaction test is tests/test_group_records_crash.py."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import tracemalloc
import uuid
import zlib
from gc import collect as collect_garbage

import pytest

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError
from sharegroup.coordinator import GroupCoordinator, InMemoryTopics, MemoryRecordSink
from sharegroup.coordinator.classic.records import (
    ClassicMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from sharegroup.coordinator.group_store import GroupStore
from sharegroup.coordinator.offsets import CommitRequest
from sharegroup.coordinator.records import Record, TopicPartitions, compact
from sharegroup.coordinator.share.records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    TopicMetadata,
)
from sharegroup.server.group_records import COMPACTING_FILE_NAME, FILE_NAME, FileRecordSink
from sharegroup.topics import CorruptLogError
from tests.classic_env import ClassicEnv
from tests.server_harness import run_cli

TOPIC = uuid.UUID(int=7)
LOGGER = "sharegroup.server.group_records"
RECORDS = [
    Record(ShareGroupMemberMetadataKey("g", "m1"), ShareGroupMemberMetadataValue(None, "c", "/127.0.0.1", ("t", "u"))),
    Record(ShareGroupCurrentMemberAssignmentKey("g", "m1"),
           ShareGroupCurrentMemberAssignmentValue(3, 2, (TopicPartitions(TOPIC, (0, 2)),))),
    Record(ShareGroupStatePartitionMetadataKey("g"),
           ShareGroupStatePartitionMetadataValue((), (TopicMetadata(TOPIC, "t", (0, 1, 2)),), ())),
    Record(ShareGroupMemberMetadataKey("g", "m1"), None),
]


def run(coro):
    return asyncio.run(coro)


def offset(group: str, partition: int, value: int, metadata: str = "") -> Record:
    return Record(OffsetCommitKey(group, "t", partition), OffsetCommitValue(value, 0, metadata, 1000 + value, -1))


def write(directory, *batches, **options) -> FileRecordSink:
    """A sink in `directory` (no fsync: these tests do not crash the machine) with `batches` appended."""
    options.setdefault("fsync", False)
    sink = FileRecordSink.open(directory, **options)

    async def main():
        for batch in batches:
            await sink.append(batch)
    run(main())
    return sink


def reopen(directory, **options) -> list[Record]:
    sink = FileRecordSink.open(directory, fsync=False, **options)
    try:
        return sink.read_all()
    finally:
        sink.close()


def frame_starts(data: bytes) -> list[int]:
    starts, p = [], 0
    while p < len(data):
        starts.append(p)
        p += 8 + int.from_bytes(data[p:p + 4], "big")
    return starts


# -- records and compaction --------------------------------------------------------------------------


def test_records_survive_a_reopen_as_the_latest_record_of_every_key(tmp_path):
    write(tmp_path, RECORDS[:3], RECORDS[3:]).close()
    again = reopen(tmp_path)
    assert again == compact(RECORDS) == RECORDS[1:3]  # the member's tombstone took its key away
    assert [type(r.key) for r in again] == [type(r.key) for r in RECORDS[1:3]]


def test_compact_keeps_the_latest_record_of_every_key_in_the_order_of_those_records():
    a0, b0, c0, a1 = offset("g", 0, 1), offset("g", 1, 2), offset("g", 2, 3), offset("g", 0, 4)
    assert compact([a0, b0, c0, a1, Record(b0.key, None)]) == [c0, a1]
    assert compact([a0, Record(a0.key, None), a1]) == [a1]  # deleted, then written again


def test_compaction_rewrites_the_file_atomically_once_it_outgrows_the_live_records(tmp_path):
    sink = write(tmp_path, min_compaction_bytes=1024)
    history: list[Record] = []

    async def main():
        for i in range(400):
            batch = [offset(f"g{i % 3}", i % 5, i, "m" * (i % 17))]
            if i % 10 == 9:
                batch.append(Record(OffsetCommitKey(f"g{(i // 10) % 3}", "t", (i // 10) % 5), None))
            await sink.append(batch)
            history.extend(batch)
            size = os.path.getsize(tmp_path / FILE_NAME)
            assert size == sink.file_bytes
            # the bound: never more than twice the live records (ratio 0.5), or the 1 KiB floor
            assert size <= max(1024, 2 * sink.live_bytes), (i, size, sink.live_bytes)
    run(main())
    assert sink.compactions >= 10
    assert sink.read_all() == compact(history)
    assert len(sink) == len(compact(history)) <= 15
    sink.close()
    assert reopen(tmp_path) == compact(history)
    assert not (tmp_path / COMPACTING_FILE_NAME).exists()


def test_the_dirty_ratio_sets_how_far_the_file_may_outgrow_the_live_records(tmp_path):
    eager = write(tmp_path / "eager", *([offset("g", 0, i)] for i in range(50)), min_compaction_bytes=0,
                  min_cleanable_dirty_ratio=0.0)
    assert eager.file_bytes == eager.live_bytes and eager.compactions == 49  # every overwrite compacts
    lazy = write(tmp_path / "lazy", *([offset("g", p, i)] for i in range(30) for p in range(4)),
                 min_compaction_bytes=0, min_cleanable_dirty_ratio=0.9)
    assert lazy.live_bytes < lazy.file_bytes <= 10 * lazy.live_bytes and lazy.compactions >= 1
    for ratio in (1.0, -0.1, True):
        with pytest.raises(ValueError):
            FileRecordSink.open(tmp_path / "bad", min_cleanable_dirty_ratio=ratio)
    with pytest.raises(ValueError):
        FileRecordSink.open(tmp_path / "bad", min_compaction_bytes=-1)
    eager.close()
    lazy.close()


def test_the_live_size_counted_at_open_is_the_one_counted_while_writing(tmp_path):
    classic = Record(GroupMetadataKey("gr\u00fcppe-\u20ac"), GroupMetadataValue("consumer", 1, "range", "m", 1, (
        ClassicMemberMetadata("m", None, "c", "h", 1, 1, b"\x00\xff", b"y"),)))
    sink = write(tmp_path, RECORDS[:3], [classic, RECORDS[3]], [offset("g", 0, 1)])
    live, size = sink.live_bytes, sink.file_bytes
    sink.close()
    again = FileRecordSink.open(tmp_path, fsync=False, min_compaction_bytes=0, min_cleanable_dirty_ratio=0.0)
    assert (again.live_bytes, again.file_bytes) == (live, size) and size > live
    run(again.append([offset("g", 0, 2)]))  # compacted, to exactly the live records
    assert again.compactions == 1 and again.file_bytes == again.live_bytes == os.path.getsize(tmp_path / FILE_NAME)
    again.close()


def test_memory_follows_the_live_records_not_the_history(tmp_path):
    sink = FileRecordSink.open(tmp_path, fsync=False, min_compaction_bytes=8192)

    async def commits(first: int, count: int) -> None:
        for i in range(first, first + count):
            await sink.append([offset("g", i % 10, i, "metadata-%d" % i)])

    async def main() -> int:
        await commits(0, 300)
        collect_garbage()
        before = tracemalloc.get_traced_memory()[0]
        await commits(300, 2000)
        collect_garbage()
        return tracemalloc.get_traced_memory()[0] - before

    tracemalloc.start()
    try:
        grown = run(main())
    finally:
        tracemalloc.stop()
    assert len(sink) == 10 and len(sink.read_all()) == 10
    assert grown < 50_000, grown  # 2000 records held would take most of a megabyte
    assert sink.file_bytes <= max(8192, 2 * sink.live_bytes)
    sink.close()
    assert [r.value.offset for r in reopen(tmp_path)] == list(range(2290, 2300))


class BatchSink(MemoryRecordSink):
    """A memory sink that also remembers every append as it was made (one frame each in a file)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[Record]] = []

    async def append(self, records) -> None:
        await super().append(records)
        self.batches.append(list(records))


async def _busy_coordinator() -> ClassicEnv:
    """A coordinator with a history of every group type: a classic group committing the same offsets
    over and over, share members joining and leaving, a KIP-848 consumer group committing, changing its
    subscription and being deleted, a simple group, offsets deleted."""
    env = await ClassicEnv(sink=BatchSink()).start()
    env.topics.create_topic("u", 2)
    gc = env.gc
    generation, (leader, _follower) = await env.stable_group(2)
    for i in range(40):
        await gc.offset_commit("cg", generation, leader, [CommitRequest("t", i % 4, i, -1, "m%d" % i)])
    s1 = await gc.share_group_heartbeat("sg", "s1", 0, ["t"])
    s2 = await gc.share_group_heartbeat("sg", "s2", 0, ["t"])
    await gc.share_group_heartbeat("sg", "s1", s1.member_epoch)
    await gc.share_group_heartbeat("sg", "s2", s2.member_epoch, ["t", "u"])
    await gc.share_group_heartbeat("sg", "s1", -1)
    for group in ("kg", "gone"):
        c = await gc.consumer_group_heartbeat(group, "c1", 0, subscribed_topic_names=["t"], rebalance_timeout_ms=30_000,
                                              owned_topic_partitions={})
        for i in range(15):
            await gc.offset_commit(group, c.member_epoch, "c1", [CommitRequest("t", i % 2, 100 + i)])
        c = await gc.consumer_group_heartbeat(group, "c1", c.member_epoch, subscribed_topic_names=["t", "u"],
                                              owned_topic_partitions={})
    c = await gc.consumer_group_heartbeat("gone", "c1", c.member_epoch, owned_topic_partitions={})
    await gc.consumer_group_heartbeat("gone", "c1", -1)
    await gc.delete_group("gone")
    await gc.offset_commit("simple", -1, "", [CommitRequest("t", 1, 5), CommitRequest("t", 2, 6)])
    await gc.offset_delete("simple", [("t", 2)])
    return env


def test_a_coordinator_rebuilt_from_the_compacted_file_equals_one_rebuilt_from_every_record(tmp_path):
    async def main():
        env = await _busy_coordinator()
        env.gc._check(replay=True)
        history = env.sink.read_all()
        sink = FileRecordSink.open(tmp_path, fsync=False, min_compaction_bytes=2048)
        for batch in env.sink.batches:  # the same appends, into the file
            await sink.append(batch)
        assert sink.compactions >= 3
        sink.close()
        reopened = FileRecordSink.open(tmp_path, fsync=False)
        assert reopened.read_all() == compact(history)
        assert len(reopened.read_all()) < len(history) // 2
        store = GroupStore(MemoryRecordSink(), loaded=True)
        assert store.replayed_dump(reopened.read_all()) == store.replayed_dump(history)
        assert store.replayed_classic_dump(reopened.read_all()) == store.replayed_classic_dump(history)
        restarted = await ClassicEnv(sink=reopened, clock=env.clock).start()
        restarted.topics.create_topic("u", 2)
        assert restarted.gc._dump() == env.gc._dump()
        assert restarted.gc.list_groups() == env.gc.list_groups()
        for group in ("cg", "kg", "gone", "simple"):
            assert await restarted.gc.offset_fetch(group) == await env.gc.offset_fetch(group)
        restarted.gc._check(replay=True)
        reopened.close()
    run(main())


def test_offsets_replayed_before_their_consumer_group_leave_no_classic_twin():
    """After compaction a consumer group's offsets can come before every surviving record of the group
    (each was rewritten after the commit): the group is a consumer group only, as in Kafka's replay."""
    async def main():
        env = await ClassicEnv().start()
        env.topics.create_topic("u", 2)
        gc = env.gc
        c = await gc.consumer_group_heartbeat("kg", "c1", 0, subscribed_topic_names=["t"], rebalance_timeout_ms=30_000,
                                              owned_topic_partitions={})
        await gc.offset_commit("kg", c.member_epoch, "c1", [CommitRequest("t", 0, 7)])
        await gc.consumer_group_heartbeat("kg", "c1", c.member_epoch, subscribed_topic_names=["t", "u"],
                                          owned_topic_partitions={})
        compacted = compact(env.sink.read_all())
        assert isinstance(compacted[0].key, OffsetCommitKey)  # the case this test is about
        sink = MemoryRecordSink()
        for record in compacted:
            await sink.append([record])
        restarted = await ClassicEnv(sink=sink, clock=env.clock).start()
        restarted.topics.create_topic("u", 2)
        assert [(g.group_id, g.group_type) for g in restarted.gc.list_groups()] == [("kg", "consumer")]
        assert (await restarted.gc.offset_fetch("kg"))[("t", 0)].offset == 7
    run(main())


# -- torn tails and corruption -----------------------------------------------------------------------


def _three_frames(tmp_path) -> bytes:
    write(tmp_path, RECORDS[:1], RECORDS[1:2], RECORDS[2:3]).close()
    return (tmp_path / FILE_NAME).read_bytes()


@pytest.mark.parametrize("tear", ["mid-payload", "mid-header", "zeros", "flipped-last-frame"])
def test_a_torn_tail_is_cut_with_a_warning_and_earlier_appends_kept(tmp_path, caplog, tear):
    data = _three_frames(tmp_path)
    last = frame_starts(data)[-1]
    torn = {"mid-payload": data[:-3], "mid-header": data[:last + 3], "zeros": data + bytes(4096),
            "flipped-last-frame": data[:-2] + bytes([data[-2] ^ 0xFF]) + data[-1:]}[tear]
    path = tmp_path / FILE_NAME
    path.write_bytes(torn)
    kept = RECORDS[:3] if tear == "zeros" else RECORDS[:2]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reopen(tmp_path) == kept
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage() and "torn tail" in warnings[0].getMessage()
    good = len(data) if tear == "zeros" else last
    assert path.read_bytes() == data[:good]  # the torn bytes are gone from the file
    write(tmp_path, [RECORDS[3]]).close()
    assert reopen(tmp_path) == compact(kept + [RECORDS[3]])


@pytest.mark.parametrize("frame", [0, 1])
def test_a_damaged_frame_followed_by_valid_ones_is_refused_with_its_file_and_byte(tmp_path, frame):
    data = _three_frames(tmp_path)
    at = frame_starts(data)[frame]
    damaged = bytearray(data)
    damaged[at + 12] ^= 0x01  # one flipped bit in the payload: its CRC fails, valid frames follow
    path = tmp_path / FILE_NAME
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptLogError) as info:
        FileRecordSink.open(tmp_path)
    assert (info.value.path, info.value.position) == (str(path), at)
    assert str(path) in str(info.value) and f"byte {at}" in str(info.value)
    assert path.read_bytes() == bytes(damaged)  # nothing cut or changed


def test_a_damaged_length_in_the_middle_is_refused(tmp_path):
    data = _three_frames(tmp_path)
    at = frame_starts(data)[1]
    damaged = data[:at] + b"\x7f" + data[at + 1:]  # a length beyond any frame
    (tmp_path / FILE_NAME).write_bytes(damaged)
    with pytest.raises(CorruptLogError) as info:
        FileRecordSink.open(tmp_path)
    assert info.value.position == at


def test_a_frame_with_a_good_crc_that_is_not_a_record_list_is_refused_even_at_the_end(tmp_path):
    data = _three_frames(tmp_path)
    payload = b'[[{"t":"NoSuchKey","f":[]},null]]'
    bogus = len(payload).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big") + payload
    (tmp_path / FILE_NAME).write_bytes(data + bogus)
    with pytest.raises(CorruptLogError) as info:
        FileRecordSink.open(tmp_path)
    assert info.value.position == len(data) and "NoSuchKey" in str(info.value)


def test_a_compaction_file_a_crash_left_is_removed_at_open(tmp_path, caplog):
    write(tmp_path, RECORDS[:3]).close()
    (tmp_path / COMPACTING_FILE_NAME).write_bytes(b"half of a compaction")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reopen(tmp_path) == RECORDS[:3]
    assert not (tmp_path / COMPACTING_FILE_NAME).exists()
    assert any("interrupted compaction" in r.getMessage() for r in caplog.records)


def test_serve_refuses_a_corrupt_group_record_file_and_exits_1(tmp_path):
    _three_frames(tmp_path / "groups")
    path = tmp_path / "groups" / FILE_NAME
    data = bytearray(path.read_bytes())
    data[12] ^= 0x01
    path.write_bytes(bytes(data))
    result = run_cli("serve", "--port", "0", "--data", str(tmp_path))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "CorruptLogError" in result.stderr and f"{path}: corrupt batch at byte 0" in result.stderr
    assert path.read_bytes() == bytes(data)


# -- storage faults ----------------------------------------------------------------------------------


def _fail_on_sink(monkeypatch, sink: FileRecordSink, name: str, code: int, *, partial: bool = False) -> None:
    """Make `os.<name>` fail with `code` for the sink's file (a partial write first with `partial`)."""
    real = getattr(os, name)
    calls = []

    def failing(fd, *args):
        if fd != sink._fd:
            return real(fd, *args)
        calls.append(fd)
        if partial and len(calls) == 1:
            data, position = args
            return real(fd, bytes(data)[:len(data) // 2], position)
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("fault", ["ENOSPC on write", "EIO on fsync"])
def test_a_failed_append_is_refused_logged_cut_back_and_never_comes_back(tmp_path, monkeypatch, caplog, fault):
    sink = write(tmp_path, RECORDS[:2], fsync=True)
    path = tmp_path / FILE_NAME
    before = path.read_bytes()
    if fault == "ENOSPC on write":
        _fail_on_sink(monkeypatch, sink, "pwrite", errno.ENOSPC, partial=True)
    else:
        _fail_on_sink(monkeypatch, sink, "fdatasync", errno.EIO)
    refused = [offset("g", 0, 666)]
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(ShareError) as info:
        run(sink.append(refused))
    assert info.value.error is Errors.KAFKA_STORAGE_ERROR
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    reason = os.strerror(errno.ENOSPC if fault.startswith("ENOSPC") else errno.EIO)
    assert errors and str(path) in errors[0] and reason in errors[0]
    assert path.read_bytes() == before  # the refused frame is cut back off
    assert sink.read_all() == RECORDS[:2]
    monkeypatch.undo()  # the disk is back: the store still refuses until a restart
    with pytest.raises(ShareError) as again:
        run(sink.append([offset("g", 1, 1)]))
    assert again.value.error is Errors.KAFKA_STORAGE_ERROR and "restart" in again.value.message
    assert path.read_bytes() == before
    sink.close()
    restarted = write(tmp_path, [offset("g", 2, 2)])  # a restart takes writes again ...
    restarted.close()
    assert reopen(tmp_path) == RECORDS[:2] + [offset("g", 2, 2)]  # ... and the refused one never appears


def test_a_failed_compaction_keeps_every_acknowledged_record_and_takes_the_store_offline(tmp_path, monkeypatch,
                                                                                     caplog):
    sink = write(tmp_path, fsync=True, min_compaction_bytes=512)
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kw):
        if str(src).endswith(COMPACTING_FILE_NAME):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(src, dst, *args, **kw)
    monkeypatch.setattr(os, "replace", failing_replace)
    acknowledged: list[Record] = []

    async def main():
        for i in range(100):
            record = offset("g", i % 2, i)
            try:
                await sink.append([record])
            except ShareError as exc:
                return exc
            acknowledged.append(record)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        refusal = run(main())
    assert refusal is not None and refusal.error is Errors.KAFKA_STORAGE_ERROR
    assert acknowledged and sink.compactions == 0
    assert any(COMPACTING_FILE_NAME in r.getMessage() and str(tmp_path / FILE_NAME) in r.getMessage()
               for r in caplog.records if r.levelno == logging.ERROR)
    assert not (tmp_path / COMPACTING_FILE_NAME).exists()
    sink.close()
    monkeypatch.undo()
    assert reopen(tmp_path) == compact(acknowledged)


def test_the_coordinator_answers_not_coordinator_when_the_file_fails_and_the_commit_never_appears(tmp_path,
                                                                                                monkeypatch):
    """An OffsetCommit whose append fails is answered with Kafka's code for a failed `__consumer_offsets`
    append (KAFKA_STORAGE_ERROR -> NOT_COORDINATOR), and the offset is not there after a restart."""
    clock = ManualClock(1_000_000)
    topics = InMemoryTopics()
    topics.create_topic("t", 2)

    async def coordinator(sink):
        gc = GroupCoordinator(persister=InMemoryPersister(clock=clock), topics=topics, clock=clock, record_sink=sink)
        await gc.load()
        return gc

    async def main():
        sink = FileRecordSink.open(tmp_path)
        gc = await coordinator(sink)
        await gc.offset_commit("g", -1, "", [CommitRequest("t", 0, 5)])
        _fail_on_sink(monkeypatch, sink, "fdatasync", errno.EIO)
        with pytest.raises(ShareError) as info:
            await gc.offset_commit("g", -1, "", [CommitRequest("t", 0, 6)])
        assert info.value.error is Errors.NOT_COORDINATOR
        assert (await gc.offset_fetch("g"))[("t", 0)].offset == 5
        monkeypatch.undo()
        with pytest.raises(ShareError) as again:
            await gc.offset_commit("g", -1, "", [CommitRequest("t", 1, 1)])
        assert again.value.error is Errors.NOT_COORDINATOR
        sink.close()
        reopened = FileRecordSink.open(tmp_path)
        restarted = await coordinator(reopened)
        fetched = await restarted.offset_fetch("g")
        assert {tp: o.offset for tp, o in fetched.items()} == {("t", 0): 5}
        reopened.close()
    run(main())


def test_appends_after_close_are_refused(tmp_path):
    sink = write(tmp_path, RECORDS[:1])
    sink.close()
    with pytest.raises(ShareError) as info:
        run(sink.append(RECORDS[1:2]))
    assert info.value.error is Errors.KAFKA_STORAGE_ERROR
    sink.close()  # twice is fine


def test_what_cannot_be_encoded_is_refused_before_anything_is_written(tmp_path):
    sink = write(tmp_path, RECORDS[:1])
    with pytest.raises(TypeError):
        run(sink.append([Record(GroupMetadataKey("g"), object())]))  # type: ignore[arg-type]
    run(sink.append([Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 1, (
        ClassicMemberMetadata("m", None, "c", "h", 1, 1, b"x", b"y"),)))]))
    sink.close()
    assert len(reopen(tmp_path)) == 2


def test_offset_commit_on_the_wire_answers_not_coordinator_while_the_file_fails(tmp_path, monkeypatch):
    from tests.server_harness import BrokerThread, RawClient
    from tests.test_server_classic_wire import OFFSET_FETCH, codes, commit, request

    def fetched(client) -> list[tuple[int, int]]:
        answer = request(client, OFFSET_FETCH, 7, {"group_id": "g", "topics": None, "require_stable": False})
        return [(p.partition_index, p.committed_offset) for t in answer.topics for p in t.partitions]

    broker = BrokerThread(tmp_path, share=True)
    client = RawClient(broker.broker.port)
    try:
        broker.call(broker.store.create_topic("t", 2))
        assert codes(commit(client, 9, partitions=((0, 5, ""),))) == [("t", 0, 0)]
        _fail_on_sink(monkeypatch, broker.share.sink, "fdatasync", errno.EIO)
        assert codes(commit(client, 9, partitions=((0, 6, ""), (1, 1, "")))) == [
            ("t", 0, Errors.NOT_COORDINATOR), ("t", 1, Errors.NOT_COORDINATOR)]
        monkeypatch.undo()
        assert codes(commit(client, 9, partitions=((1, 2, ""),))) == [("t", 1, Errors.NOT_COORDINATOR)]
        assert fetched(client) == [(0, 5)]
    finally:
        client.close()
        broker.stop()
    restarted = BrokerThread(tmp_path, share=True)
    client = RawClient(restarted.broker.port)
    try:
        assert fetched(client) == [(0, 5)]
        assert codes(commit(client, 9, partitions=((1, 2, ""),))) == [("t", 1, 0)]
    finally:
        client.close()
        restarted.stop()
