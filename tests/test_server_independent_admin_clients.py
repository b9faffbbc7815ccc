"""The admin surface as two clients that are not librdkafka use it: aiokafka's `alter_configs` (it has only
the non-incremental AlterConfigs) and kafka-python's KafkaAdminClient (topics, configs, groups and the
transaction tools), each end to end against one broker."""

from __future__ import annotations

import asyncio

import pytest

from tests.server_harness import BrokerThread

TIMEOUT_S = 15.0


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, transactions=True)
    yield b
    b.stop()


def test_aiokafka_alter_configs_replaces_a_topics_whole_set(broker):
    aiokafka_admin = pytest.importorskip("aiokafka.admin")
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    broker.call(broker.store.create_topic("aio-t", 1, {"retention.ms": "1000"}))

    async def scenario():
        admin = aiokafka_admin.AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            answers = await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "aio-t", {"retention.bytes": "4096"})])
            codes = [tuple(r[:2]) for answer in answers for r in answer.resources]
            bad = await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "aio-t", {"retention.bytes": "lots"})])
            bad_codes = [r[0] for answer in bad for r in answer.resources]
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-t")])
            return codes, bad_codes, described
        finally:
            await admin.close()

    codes, bad_codes, described = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    assert codes == [(0, None)]
    assert bad_codes == [40]  # INVALID_CONFIG, and the set stays as the first alter left it
    assert broker.store.topic_configs("aio-t") == {"retention.bytes": "4096"}  # retention.ms reverted
    entries = {e[0]: e[1] for answer in described for r in answer.resources for e in r[4]}
    assert (entries["retention.bytes"], entries["retention.ms"]) == ("4096", "604800000")


def test_kafka_python_admin_topics_configs_and_groups(broker):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kp-t", num_partitions=2, replication_factor=1,
                                      topic_configs={"cleanup.policy": "delete"})])
        assert "kp-t" in admin.list_topics()
        [described] = admin.describe_topics(["kp-t"])
        assert described["error_code"] == 0 and len(described["partitions"]) == 2
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-t", configs={"retention.ms": "60000"})])
        # kafka-python uses IncrementalAlterConfigs when the broker has it: the other key stays
        assert broker.store.topic_configs("kp-t") == {"cleanup.policy": "delete", "retention.ms": "60000"}
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(4):
            producer.send("kp-t", value=b"v%d" % i, partition=i % 2)
        producer.flush(TIMEOUT_S)
        producer.close(TIMEOUT_S)
        consumer = kafka.KafkaConsumer("kp-t", bootstrap_servers=broker.bootstrap, group_id="kp-g",
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       consumer_timeout_ms=int(TIMEOUT_S * 1000))
        seen = 0
        for _message in consumer:
            seen += 1
            if seen == 4:
                break
        consumer.commit()
        consumer.close()
        assert seen == 4
        assert "kp-g" in repr(admin.list_groups())
        offsets = admin.list_group_offsets("kp-g")["kp-g"]
        assert sorted((tp.partition, meta.offset) for tp, meta in offsets.items()) == [(0, 2), (1, 2)]
        admin.delete_topics(["kp-t"])
        assert "kp-t" not in admin.list_topics()
    finally:
        admin.close()


def test_kafka_python_admin_lists_describes_and_aborts_an_open_transaction(broker):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import AbortTransactionSpec

    broker.call(broker.store.create_topic("kp-tx", 1, {}))
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-admin-tx")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("kp-tx", b"open", partition=0).get(TIMEOUT_S)
        listed = admin.list_transactions()
        described = admin.describe_transactions(["kp-admin-tx"])
        producers = admin.describe_producers([kafka.TopicPartition("kp-tx", 0)])
        # kafka-transactions.sh abort: a WriteTxnMarkers(abort) straight to the partition closes it
        topic_id = broker.store.topic_by_name("kp-tx").topic_id
        assert broker.store.last_stable_offset(topic_id, 0) == 0
        [open_one] = producers[kafka.TopicPartition("kp-tx", 0)].active_producers
        admin.abort_transaction(AbortTransactionSpec(kafka.TopicPartition("kp-tx", 0), open_one.producer_id,
                                                     open_one.producer_epoch))
        assert broker.store.last_stable_offset(topic_id, 0) == broker.store.log_end_offset(topic_id, 0) == 2
        producer.abort_transaction()
    finally:
        producer.close(TIMEOUT_S)
        admin.close()
    [listing] = listed[1]
    assert (listing.transactional_id, listing.state.value) == ("kp-admin-tx", "Ongoing")
    description = described["kp-admin-tx"]
    assert description.state.value == "Ongoing" and description.producer_id == listing.producer_id
    assert description.topic_partitions == {kafka.TopicPartition("kp-tx", 0)}
    [active] = producers[kafka.TopicPartition("kp-tx", 0)].active_producers
    assert (active.producer_id, active.current_transaction_start_offset) == (listing.producer_id, 0)
