"""Raw kio DescribeConfigs v1/v4 of TOPIC resources on `sharegroup serve` against Kafka 4.x: every
topic config of Kafka's LogConfig with its value, source, type, synonyms (Kafka's order) and
documentation; broker keys given at start-up as STATIC_BROKER_CONFIG; and what IncrementalAlterConfigs
does with the keys serve accepts without acting on them."""

from __future__ import annotations

import json

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient

DESCRIBE, ALTER = 32, 44
TOPIC = 2
SET, DELETE = 0, 1
NONE, INVALID_CONFIG = 0, 40
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
UNKNOWN, BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 5, 6, 7
LONG_MAX = str(2**63 - 1)

# Kafka 4.x's topic configs: name -> (default value, ConfigType)
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": ("delete", LIST), "compression.gzip.level": ("-1", INT), "compression.lz4.level": ("9", INT),
    "compression.type": ("producer", STRING), "compression.zstd.level": ("3", INT),
    "delete.retention.ms": ("86400000", LONG), "errors.deadletterqueue.group.enable": ("false", BOOLEAN),
    "file.delete.delay.ms": ("60000", LONG),
    "flush.messages": (LONG_MAX, LONG), "flush.ms": (LONG_MAX, LONG),
    "follower.replication.throttled.replicas": ("", LIST), "index.interval.bytes": ("4096", INT),
    "leader.replication.throttled.replicas": ("", LIST), "local.retention.bytes": ("-2", LONG),
    "local.retention.ms": ("-2", LONG), "max.compaction.lag.ms": (LONG_MAX, LONG),
    "max.message.bytes": ("1048588", INT), "message.timestamp.after.max.ms": ("3600000", LONG),
    "message.timestamp.before.max.ms": (LONG_MAX, LONG), "message.timestamp.type": ("CreateTime", STRING),
    "min.cleanable.dirty.ratio": ("0.5", DOUBLE), "min.compaction.lag.ms": ("0", LONG),
    "min.insync.replicas": ("1", INT), "preallocate": ("false", BOOLEAN), "remote.log.copy.disable": ("false", BOOLEAN),
    "remote.log.delete.on.disable": ("false", BOOLEAN), "remote.storage.enable": ("false", BOOLEAN),
    "retention.bytes": ("-1", LONG), "retention.ms": ("604800000", LONG), "segment.bytes": ("1073741824", INT),
    "segment.index.bytes": ("10485760", INT), "segment.jitter.ms": ("0", LONG), "segment.ms": ("604800000", LONG),
    "unclean.leader.election.enable": ("false", BOOLEAN),
}


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path)
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def describe(client: RawClient, name: str, keys=None, synonyms: bool = False, documentation: bool = False,
             version: int = 4):
    fields = {"resources": [{"resource_type": TOPIC, "resource_name": name, "configuration_keys": keys}],
              "include_synonyms": synonyms}
    if version >= 3:
        fields["include_documentation"] = documentation
    return client.request(DESCRIBE, version, build(request_class(DESCRIBE, version), fields)).results[0]


def alter(client: RawClient, name: str, changes):
    body = build(request_class(ALTER, 1), {"validate_only": False, "resources": [
        {"resource_type": TOPIC, "resource_name": name,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in changes]}]})
    return client.request(ALTER, 1, body).responses[0]


def entries(result) -> dict:
    return {c.name: c for c in result.configs}


def synonyms(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_a_topic_describes_every_kafka_topic_config_with_its_default_and_type(broker, client):
    broker.call(broker.store.create_topic("t", 1))
    described = describe(client, "t")
    assert described.error_code == NONE
    assert {c.name: (c.value, c.config_source, c.config_type) for c in described.configs} == {
        k: (v, DEFAULT_CONFIG, kind) for k, (v, kind) in KAFKA_TOPIC_DEFAULTS.items()}
    assert {(c.read_only, c.is_sensitive, c.synonyms, c.documentation) for c in described.configs} == {
        (False, False, (), None)}  # no synonyms nor documentation unless asked for


def test_synonyms_follow_kafkas_order_and_documentation_is_given_when_asked(broker, client):
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000", "cleanup.policy": "delete",
                                                   "compression.type": "zstd", "preallocate": "TRUE"}))
    found = entries(describe(client, "t", synonyms=True, documentation=True))
    assert [(found[k].value, found[k].config_source) for k in ("retention.ms", "compression.type", "preallocate")] == [
        ("1000", TOPIC_CONFIG), ("zstd", TOPIC_CONFIG), ("true", TOPIC_CONFIG)]
    assert {k: synonyms(found[k]) for k in ("retention.ms", "cleanup.policy", "compression.type", "segment.bytes",
                                            "max.message.bytes", "segment.ms", "flush.ms", "remote.storage.enable",
                                            "min.cleanable.dirty.ratio")} == {
        # log.retention.ms has no default: Kafka drops the log.retention.hours default that follows it
        "retention.ms": [("retention.ms", "1000", TOPIC_CONFIG)],
        "cleanup.policy": [("cleanup.policy", "delete", TOPIC_CONFIG),
                           ("log.cleanup.policy", "delete", DEFAULT_CONFIG)],
        "compression.type": [("compression.type", "zstd", TOPIC_CONFIG),
                             ("compression.type", "producer", DEFAULT_CONFIG)],
        "segment.bytes": [("log.segment.bytes", "1073741824", DEFAULT_CONFIG)],
        "max.message.bytes": [("message.max.bytes", "1048588", DEFAULT_CONFIG)],
        "segment.ms": [], "flush.ms": [], "remote.storage.enable": [],  # no default of the first broker key / none
        "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT_CONFIG)],
    }
    assert all(isinstance(c.documentation, str) and c.documentation for c in found.values())
    plain = entries(describe(client, "t", synonyms=False, documentation=False))
    assert {(c.synonyms, c.documentation) for c in plain.values()} == {((), None)}
    v1 = entries(describe(client, "t", synonyms=True, version=1))  # v1 has synonyms, no types nor docs
    assert synonyms(v1["segment.bytes"]) == [("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]


def test_key_filters_name_the_configs_described(broker, client):
    broker.call(broker.store.create_topic("t", 1, {"flush.ms": "1000"}))
    picked = describe(client, "t", keys=["flush.ms", "compression.type", "no.such.config"], synonyms=True)
    assert sorted((c.name, c.value, c.config_source, synonyms(c)) for c in picked.configs) == [
        ("compression.type", "producer", DEFAULT_CONFIG, [("compression.type", "producer", DEFAULT_CONFIG)]),
        ("flush.ms", "1000", TOPIC_CONFIG, [("flush.ms", "1000", TOPIC_CONFIG)])]


def test_broker_keys_given_at_start_up_are_static_broker_config(tmp_path):
    broker = BrokerThread(tmp_path, overrides={"log.retention.ms": "3600000", "log.segment.bytes": "1073741824",
                                               "message.max.bytes": "2000000"})
    client = RawClient(broker.broker.port)
    try:
        broker.call(broker.store.create_topic("plain", 1))
        broker.call(broker.store.create_topic("own", 1, {"retention.ms": "5000"}))
        plain = entries(describe(client, "plain", synonyms=True))
        assert [(plain[k].value, plain[k].config_source, synonyms(plain[k]))
                for k in ("retention.ms", "segment.bytes", "max.message.bytes", "retention.bytes")] == [
            ("3600000", STATIC_BROKER_CONFIG, [("log.retention.ms", "3600000", STATIC_BROKER_CONFIG),
                                               ("log.retention.hours", "168", DEFAULT_CONFIG)]),
            # given with its default value: still the broker's static config, as Kafka says
            ("1073741824", STATIC_BROKER_CONFIG, [("log.segment.bytes", "1073741824", STATIC_BROKER_CONFIG),
                                                  ("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]),
            ("2000000", STATIC_BROKER_CONFIG, [("message.max.bytes", "2000000", STATIC_BROKER_CONFIG),
                                               ("message.max.bytes", "1048588", DEFAULT_CONFIG)]),
            ("-1", DEFAULT_CONFIG, [("log.retention.bytes", "-1", DEFAULT_CONFIG)])]
        own = entries(describe(client, "own", keys=["retention.ms"], synonyms=True))["retention.ms"]
        assert (own.value, own.config_source, synonyms(own)) == ("5000", TOPIC_CONFIG, [
            ("retention.ms", "5000", TOPIC_CONFIG), ("log.retention.ms", "3600000", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG)])
    finally:
        client.close()
        broker.stop()


def test_retention_hours_alone_give_the_value_but_no_synonym_as_kafka_describes_it(tmp_path):
    broker = BrokerThread(tmp_path, overrides={"log.retention.hours": "2"})
    client = RawClient(broker.broker.port)
    try:
        broker.call(broker.store.create_topic("t", 1))
        entry = entries(describe(client, "t", keys=["retention.ms"], synonyms=True))["retention.ms"]
        assert (entry.value, entry.config_source, synonyms(entry)) == ("7200000", DEFAULT_CONFIG, [])
    finally:
        client.close()
        broker.stop()


def test_keys_serve_does_not_act_on_are_checked_as_kafka_checks_them_then_described(broker, client):
    broker.call(broker.store.create_topic("t", 1))
    assert alter(client, "t", [("compression.type", SET, "gzip"), ("min.insync.replicas", SET, "2"),
                               ("min.cleanable.dirty.ratio", SET, "0.25"),
                               ("leader.replication.throttled.replicas", SET, "0:1, 1:1")]).error_code == NONE
    found = entries(describe(client, "t"))
    keys = ("compression.type", "min.insync.replicas", "min.cleanable.dirty.ratio",
            "leader.replication.throttled.replicas")
    assert [(found[k].value, found[k].config_source) for k in keys] == [
        ("gzip", TOPIC_CONFIG), ("2", TOPIC_CONFIG), ("0.25", TOPIC_CONFIG), ("0:1,1:1", TOPIC_CONFIG)]
    assert alter(client, "t", [("compression.type", DELETE, None)]).error_code == NONE
    assert entries(describe(client, "t"))["compression.type"].config_source == DEFAULT_CONFIG


@pytest.mark.parametrize("key, value, message", [
    ("min.insync.replicas", "abc", "Invalid value abc for configuration min.insync.replicas: Not a number of type INT"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: "
                                 "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("preallocate", "yes",
     "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "2", "Invalid value 2 for configuration min.cleanable.dirty.ratio: "
                                       "Value must be no more than 1"),
    ("cleanup.policy", "delete,tidy", "Invalid value tidy for configuration cleanup.policy: "
                                      "String must be one of: compact, delete"),
    ("cleanup.policy", "compact",
     "cleanup.policy=compact is not supported by this broker (no log compaction; only delete)"),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. "
                                      "Topic cannot be configured with remote log storage."),
    ("message.downconversion.enable", "true", "Unknown topic config name: message.downconversion.enable"),
    ("min.compaction.lag.ms", "10",
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_invalid_or_unhonourable_values_are_invalid_config(broker, client, key, value, message):
    broker.call(broker.store.create_topic("t", 1))
    changes = [(key, SET, value)] + ([("max.compaction.lag.ms", SET, "5")] if key == "min.compaction.lag.ms" else [])
    refused = alter(client, "t", changes)
    assert (refused.error_code, refused.error_message) == (INVALID_CONFIG, message)
    assert broker.store.topic_configs("t") == {}


def test_a_stored_override_kafka_4_no_longer_knows_still_opens_and_is_described(tmp_path):
    """A topic written by an older serve with a key Kafka 4.x dropped (or a value now checked) opens; the
    key is described as Kafka lists such a leftover: source TOPIC_CONFIG, type UNKNOWN."""
    broker = BrokerThread(tmp_path)
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000"}))
    broker.stop()
    path = tmp_path / "topics" / "topics.json"
    doc = json.loads(path.read_text())
    doc["topics"][0]["configs"].update({"message.downconversion.enable": "true", "min.insync.replicas": "abc"})
    path.write_text(json.dumps(doc))
    broker = BrokerThread(tmp_path)
    client = RawClient(broker.broker.port)
    try:
        found = entries(describe(client, "t"))
        assert [(found[k].value, found[k].config_source, found[k].config_type) for k in (
            "message.downconversion.enable", "min.insync.replicas", "retention.ms")] == [
            ("true", TOPIC_CONFIG, UNKNOWN), ("abc", TOPIC_CONFIG, INT), ("1000", TOPIC_CONFIG, LONG)]
    finally:
        client.close()
        broker.stop()
