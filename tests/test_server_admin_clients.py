"""`confluent_kafka.AdminClient` (librdkafka) against a live serve: groups, topics, records, configs."""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic)

from sharegroup.server.codec import build, request_class  # noqa: E402
from tests.server_harness import BrokerThread, RawClient, batch_bytes  # noqa: E402

TIMEOUT_S = 15.0


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True)
    yield b
    b.stop()


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10_000})


def share_group(broker: BrokerThread, group: str, topic: str) -> None:
    """A share group holding state for partition 0 of `topic`, with no members."""
    client = RawClient(broker.broker.port)
    try:
        body = build(request_class(91, 0), {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
        assert client.request(91, 0, body).error_code == 0
    finally:
        client.close()


def test_list_and_delete_groups(broker, admin):
    """librdkafka's list_consumer_groups keeps only groups of protocol type "consumer" (or none), so a
    share group (protocol type "share") is not listed, exactly as against Kafka; the request itself
    succeeds. DeleteGroups goes through FindCoordinator(GROUP) and deletes the share group."""
    broker.call(broker.store.create_topic("t", 1))
    share_group(broker, "sg", "t")
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert (listed.valid, listed.errors) == ([], [])
    assert broker.share.coordinator.group_ids == ["sg"]
    futures = admin.delete_consumer_groups(["sg"], request_timeout=TIMEOUT_S)
    assert futures["sg"].result(TIMEOUT_S) is None
    assert broker.share.coordinator.group_ids == []
    with pytest.raises(KafkaException) as missing:
        admin.delete_consumer_groups(["sg"], request_timeout=TIMEOUT_S)["sg"].result(TIMEOUT_S)
    assert missing.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND


def test_create_partitions_delete_records_delete_topics(broker, admin):
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT_S)
    info = broker.store.topic_by_name("t")
    broker.call(broker.store.append(info.topic_id, 0, batch_bytes(4), acks=-1))
    assert admin.create_partitions([NewPartitions("t", 3)])["t"].result(TIMEOUT_S) is None
    assert broker.store.topic_by_name("t").num_partitions == 3
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("t", 2)])["t"].result(TIMEOUT_S)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    deleted = admin.delete_records([TopicPartition("t", 0, 3)], request_timeout=TIMEOUT_S)
    result = list(deleted.values())[0].result(TIMEOUT_S)
    assert result.low_watermark == 3
    assert broker.store.log_start_offset(info.topic_id, 0) == 3
    assert admin.delete_topics(["t"], operation_timeout=TIMEOUT_S)["t"].result(TIMEOUT_S) is None
    assert "t" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_describe_and_incrementally_alter_configs(broker, admin):
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT_S)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "t", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    assert list(admin.incremental_alter_configs([topic]).values())[0].result(TIMEOUT_S) is None
    described = list(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "t")]).values())[0]
    entries = described.result(TIMEOUT_S)
    assert entries["retention.ms"].value == "60000"
    assert entries["retention.ms"].source == confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    broker_entries = list(admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values())[0]
    assert broker_entries.result(TIMEOUT_S)["num.partitions"].value == "1"
    bad = ConfigResource(ConfigResource.Type.TOPIC, "t", incremental_configs=[
        ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        list(admin.incremental_alter_configs([bad]).values())[0].result(TIMEOUT_S)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG


def test_describe_configs_shows_every_topic_config_with_kafkas_sources_and_synonyms(tmp_path):
    """librdkafka asks for synonyms: a topic lists all of Kafka 4.x's topic configs, the broker's
    `log.retention.ms` given at start-up as STATIC_BROKER_CONFIG under the topic's own override."""
    broker = BrokerThread(tmp_path, overrides={"log.retention.ms": "3600000"})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10_000})
        admin.create_topics([NewTopic("t", 1, 1, config={"compression.type": "lz4"})])["t"].result(TIMEOUT_S)
        future = list(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "t")]).values())[0]
        entries = future.result(TIMEOUT_S)
        assert len(entries) == 34  # Kafka 4.4: errors.deadletterqueue.group.enable
        sources = confluent_kafka.admin.ConfigSource
        retention, compression = entries["retention.ms"], entries["compression.type"]
        assert (retention.value, retention.source) == ("3600000", sources.STATIC_BROKER_CONFIG.value)
        assert [(s.name, s.value, s.source) for s in retention.synonyms.values()] == [
            ("log.retention.ms", "3600000", sources.STATIC_BROKER_CONFIG.value),
            ("log.retention.hours", "168", sources.DEFAULT_CONFIG.value)]
        assert (compression.value, compression.source, compression.is_read_only) == (
            "lz4", sources.DYNAMIC_TOPIC_CONFIG.value, False)
        assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
            "delete", sources.DEFAULT_CONFIG.value)
    finally:
        broker.stop()
