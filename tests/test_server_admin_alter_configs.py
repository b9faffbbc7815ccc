"""AlterConfigs (key 33) v0-2, Kafka's deprecated non-incremental alter that some admin clients (aiokafka,
kafkajs, librdkafka's `alter_configs`) still use: the given configs replace a resource's whole set, keys
not given revert to their defaults; raw kio frames, then confluent_kafka's AdminClient end to end."""

from __future__ import annotations

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient

ALTER_CONFIGS = 33
TOPIC, BROKER, GROUP, BROKER_LOGGER = 2, 4, 32, 8
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST = 0, 3, 40, 42
TIMEOUT_S = 15.0


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True)
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def alter(client: RawClient, resources, validate_only: bool = False, version: int = 2):
    body = build(request_class(ALTER_CONFIGS, version), {"validate_only": validate_only, "resources": [
        {"resource_type": kind, "resource_name": name, "configs": [{"name": k, "value": v} for k, v in configs]}
        for kind, name, configs in resources]})
    return [(r.error_code, r.error_message) for r in client.request(ALTER_CONFIGS, version, body).responses]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_given_configs_replace_the_topics_whole_set(broker, client, version):
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000", "compression.type": "gzip"}))
    assert alter(client, [(TOPIC, "t", [("segment.bytes", "1048576"), ("retention.bytes", "4096")])],
                 version=version) == [(NONE, None)]
    assert broker.store.topic_configs("t") == {"segment.bytes": "1048576", "retention.bytes": "4096"}
    config = broker.store.topic_log_config("t")  # applied at once; retention.ms back to its default
    assert (config.segment_bytes, config.retention_bytes, config.retention_ms) == (1048576, 4096, 604800000)
    assert alter(client, [(TOPIC, "t", [])], version=version) == [(NONE, None)]
    assert broker.store.topic_configs("t") == {}


def test_validate_only_checks_without_changing(broker, client):
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000"}))
    assert alter(client, [(TOPIC, "t", [("retention.bytes", "4096")])], validate_only=True) == [(NONE, None)]
    assert alter(client, [(TOPIC, "t", [("retention.bytes", "x")])], validate_only=True) == [
        (INVALID_CONFIG, "Invalid value x for configuration retention.bytes: Not a number of type LONG")]
    assert broker.store.topic_configs("t") == {"retention.ms": "1000"}


def test_bad_configs_unknown_topics_and_malformed_resources_are_kafkas_errors(broker, client):
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000"}))
    assert alter(client, [
        (TOPIC, "t", [("min.insync.replicas", "0")]),
        (TOPIC, "nope", [("retention.ms", "5")]),
        (TOPIC, "nope2", [("retention.msec", "5")]),  # the configs are checked before the topic is looked up
        (TOPIC, "dup", [("retention.ms", "5"), ("retention.ms", "6")]),
        (TOPIC, "null", [("retention.ms", None)]),
        (BROKER_LOGGER, "1", [("kafka", "DEBUG")]),
    ]) == [
        (INVALID_CONFIG, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        (UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        (INVALID_CONFIG, "Unknown topic config name: retention.msec"),
        (INVALID_REQUEST, "Error due to duplicate config keys"),
        (INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER"),
    ]
    assert alter(client, [(TOPIC, "t", []), (TOPIC, "t", [])]) == [
        (INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert broker.store.topic_configs("t") == {"retention.ms": "1000"}


def test_a_broker_has_no_dynamic_configs_to_replace(broker, client):
    assert alter(client, [(BROKER, "1", []), (BROKER, "", [])]) == [(NONE, None), (NONE, None)]
    assert alter(client, [(BROKER, "1", [("log.retention.ms", "5")]), (BROKER, "7", [])]) == [
        (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.retention.ms)"),
        (INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 7")]


def test_a_groups_configs_are_replaced_too(broker, client):
    store = broker.share.group_configs
    assert alter(client, [(GROUP, "g", [("share.delivery.count.limit", "4"),
                                        ("share.record.lock.duration.ms", "20000")])]) == [(NONE, None)]
    assert alter(client, [(GROUP, "g", [("share.delivery.count.limit", "3")])]) == [(NONE, None)]
    own = {k: v for k, (v, is_own) in store.effective("g").items() if is_own}
    assert own == {"share.delivery.count.limit": 3}


def test_confluent_kafka_admin_alter_configs_replaces_a_topics_configs(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000"}))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10_000})
    resource = ConfigResource("topic", "t", set_config={"retention.bytes": "4096"})
    futures = admin.alter_configs([resource], request_timeout=TIMEOUT_S)
    assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
    assert broker.store.topic_configs("t") == {"retention.bytes": "4096"}
    described = admin.describe_configs([ConfigResource("topic", "t")])
    configs = next(iter(described.values())).result(TIMEOUT_S)
    assert (configs["retention.bytes"].value, configs["retention.ms"].value) == ("4096", "604800000")
    bad = ConfigResource("topic", "t", set_config={"retention.bytes": "lots"})
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        next(iter(admin.alter_configs([bad], request_timeout=TIMEOUT_S).values())).result(TIMEOUT_S)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
