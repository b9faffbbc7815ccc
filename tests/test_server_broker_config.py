"""Broker configs of `sharegroup serve`: Kafka's names, defaults and bounds; typos refused; unused Kafka keys warned."""

from __future__ import annotations

import pytest

from sharegroup.server.broker_config import CONFIG_DEFS, KNOWN_UNUSED, ServeConfig, parse_properties, split_assignment


def test_defaults_are_kafkas():
    config = ServeConfig.build()
    assert config["num.partitions"] == 1
    assert config["auto.create.topics.enable"] is True
    assert config["socket.request.max.bytes"] == 104_857_600
    assert config["message.max.bytes"] == 1_048_588
    assert config["log.segment.bytes"] == 1_073_741_824
    assert config["log.retention.bytes"] == -1
    assert config.log_retention_ms == 168 * 3_600_000
    assert config["group.share.record.lock.duration.ms"] == 30_000
    assert config["group.share.delivery.count.limit"] == 5
    assert config["group.share.session.timeout.ms"] == 45_000
    assert config["group.share.heartbeat.interval.ms"] == 5_000
    assert config["group.share.max.size"] == 200
    assert config["group.share.max.share.sessions"] == 2000
    assert config["share.coordinator.snapshot.update.records.per.snapshot"] == 500
    assert config.warnings == ()


def test_overrides_parse_strings_and_win_over_the_properties_file():
    config = ServeConfig.build(
        {"num.partitions": "3", "auto.create.topics.enable": "false"},
        [("num.partitions", "5"), ("group.share.record.lock.duration.ms", "15000")],
    )
    assert config["num.partitions"] == 5
    assert config["auto.create.topics.enable"] is False
    assert config["group.share.record.lock.duration.ms"] == 15_000


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("num.partitions", "0", "num.partitions must be in [1,"),
        ("group.share.delivery.count.limit", "11", "group.share.delivery.count.limit must be in [2, 10], got 11"),
        ("group.share.delivery.count.limit", "1", "must be in [2, 10], got 1"),
        ("log.segment.bytes", "1000", "log.segment.bytes must be in [1048576,"),
        ("group.share.max.size", "1001", "group.share.max.size must be in [1, 1000], got 1001"),
        ("auto.create.topics.enable", "yes", "auto.create.topics.enable must be true or false"),
        ("socket.request.max.bytes", "lots", "socket.request.max.bytes must be an integer"),
        ("group.share.record.lock.duration.ms", "70000", "group.share.record.lock.duration.ms must be in [15000, 60000]"),
        ("group.share.session.timeout.ms", "30000", "group.share.session.timeout.ms must be in [45000, 60000]"),
    ],
)
def test_values_outside_kafkas_bounds_are_refused_naming_the_key(key, value, words):
    with pytest.raises(ValueError) as info:
        ServeConfig.build({}, [(key, value)])
    assert words in str(info.value)


def test_no_key_serve_reads_is_listed_as_unused():
    assert not KNOWN_UNUSED & CONFIG_DEFS.keys()
    assert "max.connections" in CONFIG_DEFS and "offsets.topic.segment.bytes" in KNOWN_UNUSED


def test_a_key_that_is_no_kafka_broker_config_is_refused():
    with pytest.raises(ValueError, match="unknown broker config 'num.partition'"):
        ServeConfig.build({}, [("num.partition", "3")])


def test_real_kafka_configs_serve_does_not_use_are_accepted_with_one_warning_each():
    config = ServeConfig.build(
        {"log.dirs": "/tmp/kafka-logs", "process.roles": "broker,controller", "node.id": "1",
         "controller.quorum.voters": "1@localhost:9093", "listener.name.controller.sasl.enabled.mechanisms": "PLAIN"},
        [("group.consumer.assignment.interval.ms", "1000")],
    )
    assert len(config.warnings) == 6
    for key in ("log.dirs", "process.roles", "node.id", "controller.quorum.voters",
                "group.consumer.assignment.interval.ms", "listener.name.controller.sasl.enabled.mechanisms"):
        assert sum(f"'{key}'" in w for w in config.warnings) == 1, key


KAFKA_4_4_BROKER_KEYS = {
    "group.share.assignor.offload.enable": "true",  # KIP-1263
    "group.consumer.assignor.offload.enable": "true",  # KIP-1263
    "group.share.initialize.retry.interval.ms": "30000",
    "group.share.min.delivery.count.limit": "2",  # KIP-1240
    "group.share.max.delivery.count.limit": "10",
    "group.share.min.partition.max.record.locks": "100",
    "add.partitions.to.txn.retry.backoff.ms": "20",
    "add.partitions.to.txn.retry.backoff.max.ms": "100",
    "transaction.two.phase.commit.enable": "false",
}


def test_real_kafka_4_4_broker_configs_are_accepted_with_the_warning():
    """A server.properties of Kafka 4.3/4.4 (KIP-1263 offload keys, transactions) starts serve (the KIP-1191
    DLQ keys are used: tests/test_dead_letter_configs.py)."""
    config = ServeConfig.build(KAFKA_4_4_BROKER_KEYS)
    assert len(config.warnings) == len(KAFKA_4_4_BROKER_KEYS)
    for key in KAFKA_4_4_BROKER_KEYS:
        assert [w for w in config.warnings if f"'{key}'" in w] == [
            f"sharegroup serve: warning: Kafka broker config '{key}' is not used by serve; ignored"], key


def test_min_max_pairs_are_checked_together():
    config = ServeConfig.build({}, [("group.share.min.record.lock.duration.ms", "1000"),
                                    ("group.share.record.lock.duration.ms", "1000")])
    assert config["group.share.record.lock.duration.ms"] == 1000
    with pytest.raises(ValueError, match="group.share.min.session.timeout.ms .* must not exceed"):
        ServeConfig.build({}, [("group.share.min.session.timeout.ms", "70000")])
    with pytest.raises(ValueError, match="heartbeat.interval.ms must be less than"):
        ServeConfig.build({}, [("group.share.min.session.timeout.ms", "1000"), ("group.share.session.timeout.ms", "5000"),
                               ("group.share.min.heartbeat.interval.ms", "1000")])


def test_group_config_defaults_are_validated_against_the_broker_bounds():
    config = ServeConfig.build(
        {},
        [("group.share.min.record.lock.duration.ms", "1000")],
        [("share.record.lock.duration.ms", "2000"), ("share.delivery.count.limit", "3"),
         ("share.auto.offset.reset", "Earliest"), ("share.isolation.level", "read_committed")],
    )
    assert dict(config.group_defaults) == {
        "share.record.lock.duration.ms": 2000,
        "share.delivery.count.limit": 3,
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
    }
    with pytest.raises(ValueError, match=r"share.record.lock.duration.ms must be in \[15000, 60000\]"):
        ServeConfig.build({}, [], [("share.record.lock.duration.ms", "2000")])
    with pytest.raises(ValueError, match="share.delivery.count.limit must be in"):
        ServeConfig.build({}, [], [("share.delivery.count.limit", "11")])
    with pytest.raises(ValueError, match="unknown group config 'share.lock.duration.ms'"):
        ServeConfig.build({}, [], [("share.lock.duration.ms", "2000")])
    with pytest.raises(ValueError, match="share.auto.offset.reset must be one of"):
        ServeConfig.build({}, [], [("share.auto.offset.reset", "newest")])
    # A consumer group's timing defaults are the broker's group.consumer.* keys, not --group-config ones.
    with pytest.raises(ValueError, match="set the broker's group.consumer.session.timeout.ms instead"):
        ServeConfig.build({}, [], [("consumer.session.timeout.ms", "45000")])
    assert ServeConfig.build({}, [], [("share.auto.offset.reset", "by_duration:PT1H")]).group_defaults == {
        "share.auto.offset.reset": "by_duration:PT1H"}


def test_retention_precedence_is_ms_then_minutes_then_hours():
    assert ServeConfig.build({"log.retention.hours": "1"}).log_retention_ms == 3_600_000
    assert ServeConfig.build({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms == 120_000
    assert ServeConfig.build({"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_ms == 5
    assert ServeConfig.build({"log.retention.ms": "-1"}).log_retention_ms == -1


def test_properties_file_syntax():
    text = "# comment\n! also a comment\n\nnum.partitions=3\nlog.dirs : /tmp/a\nkey.with.cont = a,\\\n  b\nempty=\n"
    assert parse_properties(text) == {"num.partitions": "3", "log.dirs": "/tmp/a", "key.with.cont": "a,b", "empty": ""}


def test_split_assignment():
    assert split_assignment("num.partitions=3") == ("num.partitions", "3")
    assert split_assignment("a=b=c") == ("a", "b=c")
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        split_assignment("num.partitions")


def test_every_default_lies_within_its_own_bounds():
    for d in CONFIG_DEFS.values():
        if d.default is not None and d.type in ("int", "long"):
            assert d.parse(d.default) == d.default, d.name
