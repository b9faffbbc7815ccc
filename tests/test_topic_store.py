"""TopicStore: topics (Kafka's name, partition, replication and config rules; ids stable across
restarts; auto-creation), producer ids never reused, one store per directory, log configs."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest

from sharegroup.errors import Errors, ShareError
from sharegroup.logs import PartitionLogs
from sharegroup.topics.log_config import LogConfig
from sharegroup.topics.topic_store import PRODUCER_ID_BLOCK_SIZE, StoreLockedError, TopicInfo, TopicStore

from .conftest import run
from .server_batches import CountingFsync, produce_batch


def with_store(tmp_path, body, **config):
    async def main():
        store = await TopicStore.open(tmp_path, log_config=LogConfig(**config), fsync=False)
        try:
            await body(store)
        finally:
            await store.close()

    run(main())


def refused(error):
    return pytest.raises(ShareError, match=error.name)


def test_satisfies_the_partition_logs_protocol(tmp_path):
    async def body(store):
        assert isinstance(store, PartitionLogs)

    with_store(tmp_path, body)


def test_topics_and_their_ids_persist_across_restarts(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=CountingFsync())
        a = await store.create_topic("orders", 3, {"retention.ms": "60000"})
        b = await store.create_topic("audit.log")
        assert a.num_partitions == 3 and b.num_partitions == 1 and a.topic_id != b.topic_id
        assert a.topic_id.int != 0
        await store.append(a.topic_id, 2, produce_batch(4), acks=-1)
        await store.close()
        store = await TopicStore.open(tmp_path, fsync=False)
        assert sorted(store.topics()) == sorted([a, b])
        assert store.topic_by_id(a.topic_id) == a and store.topic_by_name("audit.log") == b
        assert store.topic_by_id(uuid.uuid4()) is None and store.topic_by_name("nope") is None
        assert store.topic_configs("orders") == {"retention.ms": "60000"}
        assert store.topic_log_config("orders").retention_ms == 60_000
        assert store.log_end_offset(a.topic_id, 2) == 4 and store.log_end_offset(a.topic_id, 0) == 0
        assert sorted(os.listdir(os.path.join(tmp_path, "topics"))) == [
            ".lock", "audit.log-0", "orders-0", "orders-1", "orders-2", "producer-ids", "topics.json"]
        await store.close()

    run(main())


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/x", "ü", None])
def test_illegal_topic_names(tmp_path, name):
    async def body(store):
        with refused(Errors.INVALID_TOPIC_EXCEPTION):
            await store.create_topic(name)
        assert store.topics() == []

    with_store(tmp_path, body)


def test_create_topic_refusals_with_kafka_codes(tmp_path):
    async def body(store):
        await store.create_topic("a.b")
        with refused(Errors.TOPIC_ALREADY_EXISTS):
            await store.create_topic("a.b")
        with refused(Errors.INVALID_TOPIC_EXCEPTION):
            await store.create_topic("a_b")  # collides with a.b
        for bad in (0, -2, 10_001):
            with refused(Errors.INVALID_PARTITIONS):
                await store.create_topic("p", bad)
        for rf in (0, 2, 3):
            with refused(Errors.INVALID_REPLICATION_FACTOR):
                await store.create_topic("p", 1, replication_factor=rf)
        for configs in ({"retention.ms": "soon"}, {"segment.bytes": "13"}, {"no.such.config": "1"},
                        {"cleanup.policy": "compact"}):
            with refused(Errors.INVALID_CONFIG):
                await store.create_topic("p", 1, configs)
        assert [t.name for t in store.topics()] == ["a.b"]
        assert (await store.create_topic("a-" + "x" * 247, -1, replication_factor=1)).num_partitions == 2
        checked = await store.create_topic("v", 4, validate_only=True)
        assert checked.num_partitions == 4 and store.topic_by_name("v") is None

    with_store(tmp_path, body, num_partitions=2)


def test_concurrent_creates_of_one_name_make_one_topic(tmp_path):
    async def body(store):
        results = await asyncio.gather(*(store.create_topic("t", 2) for _ in range(5)), return_exceptions=True)
        made = [r for r in results if isinstance(r, TopicInfo)]
        assert len(made) == 1
        assert [r.error for r in results if isinstance(r, ShareError)] == [Errors.TOPIC_ALREADY_EXISTS] * 4
        assert store.topics() == made

    with_store(tmp_path, body)


def test_auto_create_follows_the_broker_setting(tmp_path):
    async def body(store):
        made = await store.auto_create_topic("auto")
        assert made.num_partitions == 3 and await store.auto_create_topic("auto") == made
        assert await asyncio.gather(store.auto_create_topic("x"), store.auto_create_topic("x")) == [
            store.topic_by_name("x")] * 2

    with_store(tmp_path, body, num_partitions=3)

    async def off(store):
        assert await store.auto_create_topic("auto2") is None and store.topic_by_name("auto2") is None
        assert (await store.auto_create_topic("auto")).num_partitions == 3  # existing topics still answer

    with_store(tmp_path, off, auto_create_topics_enable=False)


def test_topic_segment_bytes_override_applies_to_its_logs(tmp_path):
    size = len(produce_batch(2))

    async def body(store):
        small = await store.create_topic("small", 1, {"segment.bytes": str(2 * size)})
        big = await store.create_topic("big", 1)
        for _ in range(6):
            await store.append(small.topic_id, 0, produce_batch(2), acks=1)
            await store.append(big.topic_id, 0, produce_batch(2), acks=1)
        assert store.partition_log(small.topic_id, 0).segment_count == 3
        assert store.partition_log(big.topic_id, 0).segment_count == 1

    with_store(tmp_path, body)


def test_producer_ids_are_never_handed_out_twice_across_restarts(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=False)
        first = [store.init_producer_id() for _ in range(PRODUCER_ID_BLOCK_SIZE + 5)]
        assert [e for _, e in first] == [0] * len(first)
        ids = [p for p, _ in first]
        assert ids == list(range(len(ids)))
        assert store.init_producer_id(None, producer_id=ids[3], producer_epoch=0)[0] == len(ids)  # always fresh
        with refused(Errors.INVALID_REQUEST):
            store.init_producer_id("txn-1")
        await store.close()  # a crash would lose nothing more: each block's end is written before use
        store = await TopicStore.open(tmp_path, fsync=False)
        again = store.init_producer_id()[0]
        assert again > max(ids) + 1
        await store.close()

    run(main())


def test_one_store_per_directory(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=False)
        with pytest.raises(StoreLockedError):
            await TopicStore.open(tmp_path, fsync=False)
        await store.close()
        await (await TopicStore.open(tmp_path, fsync=False)).close()

    run(main())


def test_unknown_partitions_are_refused_everywhere(tmp_path):
    async def body(store):
        t = await store.create_topic("t", 1)
        assert store.has_partition(t.topic_id, 0) and not store.has_partition(t.topic_id, 1)
        assert not store.has_partition(uuid.uuid4(), 0)
        for call in (lambda: store.log_end_offset(t.topic_id, 1), lambda: store.read(uuid.uuid4(), 0, 0, 10),
                     lambda: store.offset_for(t.topic_id, -1, "latest")):
            with refused(Errors.UNKNOWN_TOPIC_OR_PARTITION):
                call()

    with_store(tmp_path, body)


def test_a_partition_directory_lost_after_the_metadata_was_written_comes_back_empty(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=False)
        t = await store.create_topic("t", 2)
        await store.close()
        os.rmdir(os.path.join(tmp_path, "topics", "t-1"))  # as if the crash came right after topics.json
        store = await TopicStore.open(tmp_path, fsync=False)
        assert store.log_end_offset(t.topic_id, 1) == 0 and os.path.isdir(os.path.join(tmp_path, "topics", "t-1"))
        with open(os.path.join(tmp_path, "topics", "topics.json")) as f:
            assert json.load(f)["topics"][0]["topic_id"] == str(t.topic_id)
        await store.close()

    run(main())


def test_log_config_bounds_and_broker_keys():
    assert LogConfig() == LogConfig(2**30, 7 * 86_400_000, -1, 1_048_588, 1, True, 300_000, 86_400_000)
    cfg = LogConfig.from_broker_configs({"log.segment.bytes": "1024", "log.retention.hours": "2",
                                         "num.partitions": "4", "auto.create.topics.enable": "false",
                                         "log.dirs": "/ignored"})
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.num_partitions, cfg.auto_create_topics_enable) == (
        1024, 7_200_000, 4, False)
    assert LogConfig.from_broker_configs({"log.retention.ms": "5", "log.retention.hours": "2"}).retention_ms == 5
    for bad in ({"log.segment.bytes": "13"}, {"num.partitions": "0"}, {"log.retention.ms": "-2"},
                {"auto.create.topics.enable": "yes"}, {"message.max.bytes": "x"},
                {"log.retention.check.interval.ms": "0"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LogConfig.from_broker_configs(bad)


def test_a_failing_listener_does_not_stop_appends_and_stats_add_up(tmp_path):
    async def body(store):
        t = await store.create_topic("t", 2)
        seen = []

        def broken(*event):
            seen.append(event)
            raise RuntimeError("listener bug")

        store.subscribe(broken)
        for i in range(3):
            await store.append(t.topic_id, i % 2, produce_batch(2), acks=-1)
        assert seen == [(t.topic_id, 0, 2), (t.topic_id, 1, 2), (t.topic_id, 0, 4)]
        stats = store.stats()
        assert (stats["topics"], stats["partitions"], stats["appended_batches"], stats["group_commits"]) == (1, 2, 3, 3)
        assert stats["size_bytes"] == stats["appended_bytes"] == 3 * len(produce_batch(2))
        assert stats["fsyncs"] == 0  # fsync off in this store

    with_store(tmp_path, body)


def test_topic_overrides_apply_and_accepted_kafka_keys_are_kept(tmp_path):
    async def body(store):
        data = produce_batch(5)
        strict = await store.create_topic("strict", 1, {"max.message.bytes": str(len(data) - 1),
                                                        "cleanup.policy": "delete", "min.insync.replicas": "1"})
        loose = await store.create_topic("loose", 1)
        with refused(Errors.MESSAGE_TOO_LARGE):
            await store.append(strict.topic_id, 0, data, acks=-1)
        assert (await store.append(loose.topic_id, 0, data, acks=-1)).base_offset == 0
        assert store.topic_configs("strict")["cleanup.policy"] == "delete"
        assert store.topic_log_config("strict").max_message_bytes == len(data) - 1
        assert store.topic_log_config("loose") == store.log_config

    with_store(tmp_path, body)


def test_prometheus_collector_reads_the_store_at_scrape_time(tmp_path):
    from prometheus_client import CollectorRegistry

    from sharegroup.topics.topic_store_metrics import register_topic_store_metrics

    async def body(store):
        registry = CollectorRegistry()
        register_topic_store_metrics(store, registry)
        t = await store.create_topic("m", 2)
        for _ in range(3):
            await store.append(t.topic_id, 1, produce_batch(2), acks=-1)
        await store.delete_records(t.topic_id, 1, 2)
        sample = registry.get_sample_value
        assert sample("sharegroup_topic_store_appended_batches_total") == 3
        assert sample("sharegroup_topic_store_appended_bytes_total") == 3 * len(produce_batch(2))
        assert sample("sharegroup_topic_store_partitions") == 2
        assert sample("sharegroup_topic_log_end_offset", {"topic": "m", "partition": "1"}) == 6
        assert sample("sharegroup_topic_log_start_offset", {"topic": "m", "partition": "1"}) == 2
        assert sample("sharegroup_topic_log_end_offset", {"topic": "m", "partition": "0"}) == 0

    with_store(tmp_path, body)


def test_damaged_small_files_are_refused_by_name(tmp_path):
    from sharegroup.topics.segment_files import CorruptLogError

    async def main():
        store = await TopicStore.open(tmp_path, fsync=False)
        t = await store.create_topic("t", 1)
        await store.append(t.topic_id, 0, produce_batch(2), acks=-1)
        await store.delete_records(t.topic_id, 0, 1)
        await store.close()
        for name in ("producer-ids", os.path.join("t-0", "log-start-offset")):
            path = os.path.join(tmp_path, "topics", name)
            with open(path, "rb") as f:
                good = f.read()
            with open(path, "wb") as f:
                f.write(b"12x\n")
            with pytest.raises(CorruptLogError, match=name.replace(os.sep, ".")):
                await TopicStore.open(tmp_path, fsync=False)
            with open(path, "wb") as f:
                f.write(good)
        store = await TopicStore.open(tmp_path, fsync=False)
        assert store.log_start_offset(t.topic_id, 0) == 1
        await store.close()

    run(main())


def test_delete_topic_removes_it_at_once_and_for_good(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=CountingFsync())
        t = await store.create_topic("gone", 2)
        keep = await store.create_topic("kept", 1)
        await store.append(t.topic_id, 1, produce_batch(3), acks=-1)
        logs = [store.partition_log(t.topic_id, p) for p in (0, 1)]
        queued = asyncio.ensure_future(store.append(t.topic_id, 0, produce_batch(1), acks=-1))
        await asyncio.sleep(0)  # queued before the deletion: it still completes
        assert await store.delete_topic("gone") == t
        assert [log.closed for log in logs] == [True, True]
        assert (await queued).base_offset == 0
        assert store.topic_by_name("gone") is None and store.topic_by_id(t.topic_id) is None
        with refused(Errors.UNKNOWN_TOPIC_OR_PARTITION):
            await store.append(t.topic_id, 0, produce_batch(1), acks=-1)
        with refused(Errors.UNKNOWN_TOPIC_OR_PARTITION):
            await store.delete_topic("gone")
        assert sorted(os.listdir(os.path.join(tmp_path, "topics"))) == [
            ".lock", "kept-0", "producer-ids", "topics.json"]
        again = await store.create_topic("gone", 1)
        assert again.topic_id != t.topic_id and store.log_end_offset(again.topic_id, 0) == 0
        await store.close()
        store = await TopicStore.open(tmp_path, fsync=False)
        assert sorted(store.topics()) == sorted([keep, again])
        await store.close()

    run(main())


def test_a_deletion_cut_short_is_finished_on_open(tmp_path):
    async def main():
        store = await TopicStore.open(tmp_path, fsync=False)
        t = await store.create_topic("half", 1)
        await store.append(t.topic_id, 0, produce_batch(3), acks=-1)
        await store.close()
        root = os.path.join(tmp_path, "topics")
        with open(os.path.join(root, "topics.json")) as f:
            doc = json.load(f)
        doc["topics"] = []  # the crash came after the metadata was written, before the directories went
        with open(os.path.join(root, "topics.json"), "w") as f:
            json.dump(doc, f)
        os.makedirs(os.path.join(root, "other-0.00ff-delete"))
        store = await TopicStore.open(tmp_path, fsync=False)
        assert store.topics() == []
        assert sorted(os.listdir(root)) == [".lock", "producer-ids", "topics.json"]
        again = await store.create_topic("half", 1)
        assert store.log_end_offset(again.topic_id, 0) == 0  # no old data comes back
        await store.close()

    run(main())
