"""The DLQ writer of `sharegroup serve` over a real topic store, without a network: copying from gzip and
uncompressed batches, headers only for a record retention removed, batches cut by the DLQ topic's
max.message.bytes, Kafka's validation order, and failed appends and creations counted."""

from __future__ import annotations

import gzip
import struct
import time
import uuid

import pytest

from sharegroup.manager import DeadLetterBatch, DeadLetterCause
from sharegroup.metrics import REGISTRY
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.dead_letter import DeadLetterWriter
from sharegroup.server.dead_letter_records import _decode_batch
from sharegroup.server.group_configs import SET, GroupConfigStore
from sharegroup.server.serve import open_store
from sharegroup.server.share_services import group_share_config
from sharegroup.topics.record_batch import SimpleRecord, batch_crc, build_record_batch

from .conftest import run

OPT_IN = {"errors.deadletterqueue.group.enable": "true"}
REJECT = DeadLetterCause.CLIENT_REJECT


def gzip_batch(records, timestamp_ms):
    """A gzip-compressed RecordBatch v2 of `records` (what a producer with compression.type=gzip sends)."""
    raw = build_record_batch(records, base_timestamp_ms=timestamp_ms)
    out = bytearray(raw[:61]) + gzip.compress(raw[61:])
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | 1)
    struct.pack_into(">I", out, 17, batch_crc(out, 0, len(out)))
    return bytes(out)


def stored(store, topic, partition=0):
    """Every record of a DLQ partition, decoded, with the number of batches they came in."""
    info = store.topic_by_name(topic)
    read = store.read(info.topic_id, partition, 0, 1 << 30)
    records = [r for b in read.batches for _o, r in _decode_batch(bytes(b.records))]
    return records, len(read.batches)


def sample(name, group, reason=None):
    labels = {"group": group} if reason is None else {"group": group, "reason": reason}
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def writer_over(tmp_path, group, dlq, *, overrides=None, copy=False):
    config = ServeConfig.build(overrides or {})
    store = await open_store(tmp_path, config)
    configs = GroupConfigStore(tmp_path / "groups", config, group_share_config(config))
    changes = [("errors.deadletterqueue.topic.name", SET, dlq)]
    if copy:
        changes.append(("errors.deadletterqueue.copy.record.enable", SET, "true"))
    configs.alter(group, changes)
    return store, DeadLetterWriter(store, config, configs)


def test_copy_reads_gzip_and_plain_batches_and_writes_headers_only_for_a_deleted_record(tmp_path):
    async def main():
        group = "w-copy"
        store, writer = await writer_over(tmp_path, group, "dlq.w", copy=True)
        try:
            src = await store.create_topic("src", 1)
            await store.create_topic("dlq.w", 1, OPT_IN)
            now = int(time.time() * 1000)
            await store.append(src.topic_id, 0, build_record_batch([(b"k0", b"v0")], base_timestamp_ms=now), acks=-1)
            await store.append(src.topic_id, 0, gzip_batch([SimpleRecord(b"k1", b"v1", [("h", b"1")]),
                                                             SimpleRecord(b"k2", None)], now), acks=-1)
            await store.delete_records(src.topic_id, 0, 1)  # offset 0 is gone
            await writer.write([DeadLetterBatch(group, src.topic_id, 0, 0, 2, 1, REJECT)])
            records, _batches = stored(store, "dlq.w")
            assert [(r.key, r.value) for r in records] == [(None, None), (b"k1", b"v1"), (b"k2", None)]
            assert records[1].headers[0] == ("h", b"1") and len(records[1].headers) == 7
            assert records[0].headers[2] == ("__dlq.errors.offset", b"0") and len(records[0].headers) == 6
        finally:
            await store.close()

    run(main())


def test_batches_are_cut_by_the_dlq_topics_max_message_bytes(tmp_path):
    async def main():
        group = "w-cut"
        store, writer = await writer_over(tmp_path, group, "dlq.cut")
        try:
            await store.create_topic("dlq.cut", 1, {**OPT_IN, "max.message.bytes": "600"})
            source = uuid.uuid4()  # a topic the store does not know: the header carries the id
            await writer.write([DeadLetterBatch(group, source, 5, 10, 29, 2, REJECT)])
            records, batches = stored(store, "dlq.cut")
            assert [dict(r.headers)["__dlq.errors.offset"] for r in records] == [b"%d" % o for o in range(10, 30)]
            assert dict(records[0].headers)["__dlq.errors.topic"] == str(source).encode()
            assert batches > 1
            assert sample("sharegroup_dead_letter_queue_produce_requests_total", group) == batches
            assert sample("sharegroup_dead_letter_queue_records_total", group) == 20
        finally:
            await store.close()

    run(main())


def test_a_record_too_large_for_the_dlq_topic_is_a_failed_produce(tmp_path):
    async def main():
        group = "w-large"
        store, writer = await writer_over(tmp_path, group, "dlq.small")
        try:
            await store.create_topic("dlq.small", 1, {**OPT_IN, "max.message.bytes": "100"})
            await writer.write([DeadLetterBatch(group, uuid.uuid4(), 0, 0, 0, 1, REJECT)])
            assert sample("sharegroup_dead_letter_queue_failed_produce_requests_total", group) == 1
            assert sample("sharegroup_dead_letter_queue_write_failures_total", group, "produce_failed") == 1
            assert stored(store, "dlq.small")[0] == []
        finally:
            await store.close()

    run(main())


@pytest.mark.parametrize("dlq, exists, reason", [
    ("plain", "no opt-in", "not_enabled"),     # (c) is checked before (d): an existing topic must opt in
    ("plain", "opted in", "prefix"),
    ("dlq.bad name", None, "create_failed"),   # auto-creation on, but Kafka refuses the name
])
def test_kafkas_validation_order_and_failed_creation(tmp_path, dlq, exists, reason):
    async def main():
        group = f"w-order-{reason}"
        store, writer = await writer_over(tmp_path, group, dlq, overrides={
            "errors.deadletterqueue.auto.create.topics.enable": "true"})
        try:
            if exists is not None:
                await store.create_topic(dlq, 1, OPT_IN if exists == "opted in" else {})
            await writer.write([DeadLetterBatch(group, uuid.uuid4(), 0, 0, 1, 1, REJECT)])
            assert sample("sharegroup_dead_letter_queue_write_failures_total", group, reason) == 1
            assert sample("sharegroup_dead_letter_queue_produce_requests_total", group) == 0
        finally:
            await store.close()

    run(main())


def test_gate_follows_the_group_config(tmp_path):
    async def main():
        store, writer = await writer_over(tmp_path, "w-gate", "dlq.x")
        try:
            assert writer.enabled("w-gate") and not writer.enabled("other")
            assert writer.topic_of("w-gate") == "dlq.x"
        finally:
            await store.close()

    run(main())


def test_the_dynamic_broker_keys_apply_to_the_next_write(tmp_path):
    async def main():
        from sharegroup.server.dynamic_broker_configs import CLUSTER_DEFAULT, DynamicBrokerConfigs

        group = "w-dynamic"
        config = ServeConfig.build({})
        store = await open_store(tmp_path, config)
        configs = GroupConfigStore(tmp_path / "groups", config, group_share_config(config))
        configs.alter(group, [("errors.deadletterqueue.topic.name", SET, "dead.auto")])
        dynamic = DynamicBrokerConfigs(tmp_path / "groups", config)
        writer = DeadLetterWriter(store, dynamic, configs)
        try:
            batch = DeadLetterBatch(group, uuid.uuid4(), 0, 0, 0, 1, REJECT)
            await writer.write([batch])
            assert sample("sharegroup_dead_letter_queue_write_failures_total", group, "prefix") == 1
            dynamic.alter(CLUSTER_DEFAULT, [("errors.deadletterqueue.topic.name.prefix", SET, "dead."),
                                            ("errors.deadletterqueue.auto.create.topics.enable", SET, "true")])
            await writer.write([batch])
            assert store.topic_configs("dead.auto") == {**OPT_IN, "message.timestamp.type": "CreateTime"}
            assert len(stored(store, "dead.auto")[0]) == 1
        finally:
            await store.close()

    run(main())
