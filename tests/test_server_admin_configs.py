"""Raw kio DescribeConfigs and IncrementalAlterConfigs on `sharegroup serve`: topics, the broker, and
share groups (resource type 32) with their bounds, durability and use by new share-partitions."""

from __future__ import annotations

import pytest

from sharegroup.server.broker_config import CONFIG_DEFS
from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient

DESCRIBE, ALTER = 32, 44
TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND = 0, 1, 2
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST = 0, 3, 40, 42
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8


def start(tmp_path) -> BrokerThread:
    return BrokerThread(tmp_path, share=True,
                        overrides={"group.share.min.record.lock.duration.ms": 1000,
                                   "group.share.max.record.lock.duration.ms": 60000},
                        group_configs={"share.auto.offset.reset": "earliest"})


@pytest.fixture
def broker(tmp_path):
    b = start(tmp_path)
    yield b
    b.stop()



def describe(client: RawClient, resource_type: int, name: str, keys=None, version: int = 4):
    body = build(request_class(DESCRIBE, version), {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    return client.request(DESCRIBE, version, body).results[0]


def alter(client: RawClient, resource_type: int, name: str, changes, validate_only: bool = False, version: int = 1):
    body = build(request_class(ALTER, version), {"validate_only": validate_only, "resources": [
        {"resource_type": resource_type, "resource_name": name,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in changes]}]})
    return client.request(ALTER, version, body).responses[0]


def values(result) -> dict[str, tuple[str | None, int]]:
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_group_configs_described_with_defaults_then_set_values(client):
    """A group config's source: GROUP_CONFIG when set on the group, else that of the broker default it
    inherits (the fixture's --group-config share.auto.offset.reset, given at start-up: STATIC_BROKER_CONFIG)."""
    before = describe(client, GROUP, "g")
    assert (before.error_code, before.resource_type, before.resource_name) == (NONE, GROUP, "g")
    assert values(before) == {
        "consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG), "consumer.session.timeout.ms": ("45000", DEFAULT_CONFIG),
        "share.auto.offset.reset": ("earliest", STATIC_BROKER_CONFIG), "share.delivery.count.limit": ("5", DEFAULT_CONFIG),
        "share.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG), "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG),
        "share.record.lock.duration.ms": ("30000", DEFAULT_CONFIG), "share.session.timeout.ms": ("45000", DEFAULT_CONFIG),
        "errors.deadletterqueue.copy.record.enable": ("false", DEFAULT_CONFIG),
        "errors.deadletterqueue.topic.name": ("", DEFAULT_CONFIG)}
    done = alter(client, GROUP, "g", [("share.record.lock.duration.ms", SET, "2000"),
                                      ("share.isolation.level", SET, "read_committed")])
    assert (done.error_code, done.resource_name) == (NONE, "g")
    after = values(describe(client, GROUP, "g", keys=["share.record.lock.duration.ms", "share.isolation.level"]))
    assert after == {"share.record.lock.duration.ms": ("2000", GROUP_CONFIG),
                     "share.isolation.level": ("read_committed", GROUP_CONFIG)}
    assert alter(client, GROUP, "g", [("share.isolation.level", DELETE, None)]).error_code == NONE
    assert values(describe(client, GROUP, "g", keys=["share.isolation.level"])) == {
        "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG)}


@pytest.mark.parametrize("key,value", [
    ("share.record.lock.duration.ms", "999"),      # below group.share.min.record.lock.duration.ms
    ("share.record.lock.duration.ms", "60001"),    # above the max
    ("share.delivery.count.limit", "1"),
    ("share.auto.offset.reset", "sometimes"),
    ("share.isolation.level", "read_maybe"),
    ("share.session.timeout.ms", "100"),
    ("share.heartbeat.interval.ms", "50000"),      # not below the session timeout
    ("share.fetch.anything", "1"),                 # not a group config
    ("consumer.session.timeout.ms", "44999"),      # below group.consumer.min.session.timeout.ms
    ("consumer.session.timeout.ms", "60001"),      # above group.consumer.max.session.timeout.ms
    ("consumer.heartbeat.interval.ms", "4999"),    # below group.consumer.min.heartbeat.interval.ms
    ("consumer.heartbeat.interval.ms", "15001"),   # above the max
    ("consumer.heartbeat.interval.ms", "x"),
])
def test_group_configs_outside_the_broker_bounds_are_invalid_config(client, key, value):
    refused = alter(client, GROUP, "g", [(key, SET, value)])
    assert refused.error_code == INVALID_CONFIG
    assert all(source != GROUP_CONFIG for _v, source in values(describe(client, GROUP, "g")).values())


def test_group_config_operations_and_validate_only(client):
    assert alter(client, GROUP, "g", [("share.delivery.count.limit", APPEND, "3")]).error_code == INVALID_CONFIG
    assert alter(client, GROUP, "g", [("share.delivery.count.limit", SET, "3"),
                                      ("share.delivery.count.limit", SET, "4")]).error_code == INVALID_REQUEST
    assert alter(client, GROUP, "g", [("share.delivery.count.limit", SET, "3")], validate_only=True).error_code == NONE
    assert values(describe(client, GROUP, "g"))["share.delivery.count.limit"] == ("5", DEFAULT_CONFIG)


def test_group_configs_are_durable_and_used_by_new_share_partitions(tmp_path):
    broker = start(tmp_path)
    try:
        client = RawClient(broker.broker.port)
        assert alter(client, GROUP, "g", [("share.record.lock.duration.ms", SET, "7000"),
                                          ("share.delivery.count.limit", SET, "3")]).error_code == NONE
        client.close()
        config = broker.share.manager.group_config("g")
        assert (config.record_lock_duration_ms, config.delivery_count_limit, config.auto_offset_reset) == (
            7000, 3, "earliest")
        assert broker.share.manager.group_config("other").record_lock_duration_ms == 30000
    finally:
        broker.stop()
    broker = start(tmp_path)
    try:
        client = RawClient(broker.broker.port)
        assert values(describe(client, GROUP, "g"))["share.delivery.count.limit"] == ("3", GROUP_CONFIG)
        assert broker.share.manager.group_config("g").record_lock_duration_ms == 7000
        client.close()
    finally:
        broker.stop()


def test_topic_configs_describe_and_alter(broker, client):
    broker.call(broker.store.create_topic("t", 1, {"retention.ms": "1000"}))
    described = describe(client, TOPIC, "t", version=1)
    assert described.error_code == NONE
    assert values(described)["retention.ms"] == ("1000", TOPIC_CONFIG)
    assert values(described)["segment.bytes"] == (str(1 << 30), DEFAULT_CONFIG)
    assert alter(client, TOPIC, "t", [("retention.ms", DELETE, None), ("segment.bytes", SET, "1048576"),
                                      ("cleanup.policy", SET, "delete")], version=0).error_code == NONE
    assert broker.store.topic_configs("t") == {"segment.bytes": "1048576", "cleanup.policy": "delete"}
    assert broker.store.topic_log_config("t").segment_bytes == 1048576
    refused = alter(client, TOPIC, "t", [("segment.bytes", SET, "1")])
    assert refused.error_code == INVALID_CONFIG
    assert broker.store.topic_configs("t") == {"segment.bytes": "1048576", "cleanup.policy": "delete"}
    assert alter(client, TOPIC, "nope", [("retention.ms", SET, "1")]).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert describe(client, TOPIC, "nope").error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_broker_configs_are_read_only(broker, client):
    described = describe(client, BROKER, "1")
    assert described.error_code == NONE
    by_name = {c.name: c for c in described.configs}
    assert by_name["group.share.min.record.lock.duration.ms"].value == "1000"
    assert by_name["group.share.min.record.lock.duration.ms"].read_only is True
    assert alter(client, BROKER, "1", [("num.partitions", SET, "3")]).error_code == INVALID_REQUEST
    assert describe(client, BROKER, "7").error_code == INVALID_REQUEST
    assert describe(client, 99, "x").error_code == INVALID_REQUEST


def test_group_session_timeout_and_heartbeat_interval_reach_the_coordinator(client):
    from tests.test_server_share_wire import heartbeat

    assert alter(client, GROUP, "g", [("share.heartbeat.interval.ms", SET, "9000")]).error_code == NONE
    joined = heartbeat(client, "AAAAAAAAAAAAAAAAAAAAAA", 0, ["t"])
    assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (NONE, 9.0)
    other = heartbeat(client, "BBBBBBBBBBBBBBBBBBBBBB", 0, ["t"], group="other")
    assert other.heartbeat_interval.total_seconds() == 5.0


def test_deleting_a_group_deletes_its_configs(broker, client):
    broker.call(broker.store.create_topic("t", 1))
    assert alter(client, GROUP, "g", [("share.delivery.count.limit", SET, "3")]).error_code == NONE
    created = client.request(91, 0, build(request_class(91, 0), {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}))
    assert created.error_code == NONE
    deleted = client.request(42, 2, build(request_class(42, 2), {"groups_names": ["g"]}))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", NONE)]
    assert values(describe(client, GROUP, "g"))["share.delivery.count.limit"] == ("5", DEFAULT_CONFIG)


def test_consumer_group_timing_configs_are_durable_and_reach_the_coordinator(tmp_path):
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms (Kafka 4.x group configs): bounded by
    the broker's group.consumer.min/max.*, kept across a restart, and used for that consumer group only;
    the share keys of the same group id stay as they were."""
    from tests.test_server_consumer_group_wire import heartbeat as consumer_heartbeat

    overrides = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 4000,
                 "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 500,
                 "group.consumer.max.heartbeat.interval.ms": 15000}
    broker = BrokerThread(tmp_path, share=True, overrides=overrides)
    try:
        broker.call(broker.store.create_topic("t", 2))
        client = RawClient(broker.broker.port)
        # An interval not below the session timeout is refused, even when each is within its bounds.
        assert alter(client, GROUP, "cg", [("consumer.heartbeat.interval.ms", SET, "4000")]).error_code == INVALID_CONFIG
        assert alter(client, GROUP, "cg", [("consumer.session.timeout.ms", SET, "20000"),
                                           ("consumer.heartbeat.interval.ms", SET, "1500")]).error_code == NONE
        assert values(describe(client, GROUP, "cg", keys=["consumer.session.timeout.ms", "share.session.timeout.ms"])) == {
            "consumer.session.timeout.ms": ("20000", GROUP_CONFIG), "share.session.timeout.ms": ("45000", DEFAULT_CONFIG)}
        joined = consumer_heartbeat(client, "m1", 0, ["t"], group="cg")
        assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (NONE, 1.5)
        other = consumer_heartbeat(client, "m2", 0, ["t"], group="plain")
        assert other.heartbeat_interval.total_seconds() == 0.5
        assert session_left_ms(broker, "cg", "m1") in range(19_000, 20_001)
        assert broker.share.manager.group_config("cg") == broker.share.manager.group_config("plain")  # share side untouched
        assert broker.share.coordinator._membership.timing("cg") == (45_000, 5_000)
        client.close()
    finally:
        broker.stop()
    broker = BrokerThread(tmp_path, share=True, overrides=overrides)
    try:
        client = RawClient(broker.broker.port)
        assert session_left_ms(broker, "cg", "m1") in range(19_000, 20_001)  # a reloaded member's session too
        assert values(describe(client, GROUP, "cg", keys=["consumer.heartbeat.interval.ms"])) == {
            "consumer.heartbeat.interval.ms": ("1500", GROUP_CONFIG)}
        again = consumer_heartbeat(client, "m1", 1, group="cg")
        assert (again.error_code, again.heartbeat_interval.total_seconds()) == (NONE, 1.5)
        assert alter(client, GROUP, "cg", [("consumer.heartbeat.interval.ms", DELETE, None)]).error_code == NONE
        assert consumer_heartbeat(client, "m1", 1, group="cg").heartbeat_interval.total_seconds() == 0.5
        client.close()
    finally:
        broker.stop()


def session_left_ms(broker: BrokerThread, group_id: str, member_id: str) -> int:
    coordinator = broker.share.coordinator
    return coordinator._store.groups[group_id].sessions.deadlines[member_id] - coordinator._clock.now_ms()


def test_broker_passwords_are_described_as_sensitive_without_their_values(tmp_path):
    """Kafka never shows a PASSWORD-type broker config: value null, is_sensitive true, type PASSWORD (9);
    other entries carry their config's own type (INT 3 for an int config)."""
    b = BrokerThread(tmp_path, overrides={"ssl.keystore.password": "s3cret", "sasl.jaas.config": "x required;"})
    c = RawClient(b.broker.port)
    try:
        by_name = {e.name: e for e in describe(c, BROKER, "1").configs}
    finally:
        c.close()
        b.stop()
    for key in ("ssl.keystore.password", "sasl.jaas.config", "ssl.key.password", "ssl.truststore.password"):
        assert (by_name[key].value, by_name[key].is_sensitive, by_name[key].config_type) == (None, True, 9), key
    assert (by_name["num.partitions"].value, by_name["num.partitions"].is_sensitive,
            by_name["num.partitions"].config_type) == ("1", False, 3)
    assert by_name["log.retention.ms"].config_type == 5  # LONG, also while unset (value null)


def test_cluster_default_broker_resource_describes_only_dynamic_defaults(client):
    """The broker resource named "" is Kafka's cluster-wide dynamic defaults: none are set here."""
    described = describe(client, BROKER, "")
    assert (described.error_code, described.configs) == (NONE, ())


def test_alter_null_values_are_invalid_request_for_every_operation_but_delete(broker, client):
    """Kafka refuses a null value on SET, APPEND or SUBTRACT before looking at the operation itself."""
    broker.call(broker.store.create_topic("t", 1))
    for changes in ([("cleanup.policy", APPEND, None)], [("retention.ms", APPEND, "1"), ("segment.bytes", SET, None)]):
        refused = alter(client, TOPIC, "t", changes)
        assert (refused.error_code, refused.error_message) == (
            INVALID_REQUEST, f"Null value not supported for : {changes[-1][0]}")
    assert broker.store.topic_configs("t") == {}


def test_alter_a_missing_topic_checks_its_configs_before_its_existence(client):
    """Kafka validates the new configs before it looks the topic up: a bad value or an unknown key on a
    topic that does not exist is INVALID_CONFIG."""
    assert alter(client, TOPIC, "nope", [("segment.bytes", SET, "1")]).error_code == INVALID_CONFIG
    assert alter(client, TOPIC, "nope", [("retention.msec", SET, "1")]).error_code == INVALID_CONFIG
    missing = alter(client, TOPIC, "nope", [("retention.ms", SET, "1")])
    assert (missing.error_code, missing.error_message) == (
        UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")


def test_alter_broker_configs_is_invalid_request_as_kafka_refuses_a_static_config(client):
    refused = alter(client, BROKER, "1", [("num.partitions", SET, "3")])
    assert (refused.error_code, refused.error_message) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)")


def test_alter_the_same_resource_twice_is_invalid_request_for_both(broker, client):
    broker.call(broker.store.create_topic("t", 1))
    body = build(request_class(ALTER, 1), {"validate_only": False, "resources": [
        {"resource_type": TOPIC, "resource_name": "t", "configs": [
            {"name": "retention.ms", "config_operation": SET, "value": str(v)}]} for v in (1000, 2000)]})
    responses = client.request(ALTER, 1, body).responses
    assert [(r.error_code, r.error_message) for r in responses] == [
        (INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert broker.store.topic_configs("t") == {}


def test_describe_topic_configs_checks_the_name_then_existence_and_empty_keys_mean_all(broker, client):
    """Kafka validates the topic name first (INVALID_TOPIC_EXCEPTION), answers a missing topic with
    UNKNOWN_TOPIC_OR_PARTITION and no message, and treats an empty key list like null (every config)."""
    for name in ("bad name", "", "x" * 250, ".."):
        assert describe(client, TOPIC, name).error_code == 17, name  # INVALID_TOPIC_EXCEPTION
    missing = describe(client, TOPIC, "nope")
    assert (missing.error_code, missing.error_message) == (UNKNOWN_TOPIC_OR_PARTITION, None)
    broker.call(broker.store.create_topic("t", 1))
    assert {c.name for c in describe(client, TOPIC, "t", keys=[]).configs} == {
        c.name for c in describe(client, TOPIC, "t").configs} != set()


@pytest.mark.parametrize("changes, message", [
    ([("share.session.timeout.ms", "44999")],
     "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ([("share.record.lock.duration.ms", "60001")],
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ([("share.session.timeout.ms", "60001")],
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ([("share.heartbeat.interval.ms", "4999")],
     "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ([("consumer.session.timeout.ms", "44999")],
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
])
def test_group_config_bounds_answer_kafkas_messages(client, changes, message):
    refused = alter(client, GROUP, "g", [(k, SET, v) for k, v in changes])
    assert (refused.error_code, refused.error_message) == (INVALID_CONFIG, message)


@pytest.mark.parametrize("changes, message", [
    # Kafka's GroupConfig ConfigDef first (atLeast, ValidString, INT), then the broker's min/max keys
    ([("share.record.lock.duration.ms", "999")],
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ([("share.delivery.count.limit", "1")],
     "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
    ([("share.delivery.count.limit", "11")],
     "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ([("share.isolation.level", "serializable")],
     "Invalid value serializable for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ([("share.session.timeout.ms", "soon")],
     "Invalid value soon for configuration share.session.timeout.ms: Not a number of type INT"),
])
def test_group_config_out_of_bounds_answers_kafkas_groupconfig_messages(client, changes, message):
    refused = alter(client, GROUP, "g", [(k, SET, v) for k, v in changes])
    assert (refused.error_code, refused.error_message) == (INVALID_CONFIG, message)
    assert describe(client, GROUP, "g").error_code == 0  # nothing was set
    assert alter(client, GROUP, "g", [("share.delivery.count.limit", SET, "10")]).error_code == 0


def test_describe_group_configs_needs_a_name_and_types_ints_as_int(client):
    empty = describe(client, GROUP, "")
    assert (empty.error_code, empty.error_message, empty.configs) == (
        INVALID_REQUEST, "Group name must not be empty", ())
    types = {c.name: c.config_type for c in describe(client, GROUP, "g").configs}
    assert (types["share.record.lock.duration.ms"], types["share.delivery.count.limit"],
            types["share.auto.offset.reset"]) == (3, 3, 2)  # INT, INT, STRING as Kafka's GroupConfig types them


def test_describe_broker_resource_names_parse_as_kafka_parses_a_broker_id(client):
    assert describe(client, BROKER, "01").error_code == NONE  # Kafka reads the id as an integer
    named = describe(client, BROKER, "one")
    assert (named.error_code, named.error_message) == (INVALID_REQUEST, "Broker id must be an integer, but it is: one")


@pytest.mark.parametrize("key, value, message", [
    ("retention.msec", "1", "Unknown topic config name: retention.msec"),
    ("segment.bytes", "1", "Invalid value 1 for configuration segment.bytes: Value must be at least 14"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("segment.bytes", "x", "Invalid value x for configuration segment.bytes: Not a number of type INT"),
    ("retention.bytes", "x", "Invalid value x for configuration retention.bytes: Not a number of type LONG"),
])
def test_topic_config_refusals_carry_kafkas_messages(broker, client, key, value, message):
    broker.call(broker.store.create_topic("t", 1))
    refused = alter(client, TOPIC, "t", [(key, SET, value)])
    assert (refused.error_code, refused.error_message) == (INVALID_CONFIG, message)
    assert broker.store.topic_configs("t") == {}


def test_alter_of_an_unknown_resource_type_is_unsupported_version(client):
    """Kafka's controller answers a resource type it does not know (not 2, 4, 8, 16 or 32) with
    UNSUPPORTED_VERSION for that resource."""
    for resource_type in (99, 0):
        refused = alter(client, resource_type, "x", [("a", SET, "1")])
        assert (refused.error_code, refused.error_message) == (35, f"Unknown resource type {resource_type}.")


def describe_with(client: RawClient, resource_type: int, name: str, synonyms: bool, documentation: bool = False):
    body = build(request_class(DESCRIBE, 4), {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": synonyms, "include_documentation": documentation})
    result = client.request(DESCRIBE, 4, body).results[0]
    assert result.error_code == NONE
    return {c.name: c for c in result.configs}


def synonyms_of(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_broker_configs_given_at_start_up_are_static_with_kafkas_synonyms(tmp_path):
    """Kafka's source of a broker config is its first synonym's: a key given at start-up is
    STATIC_BROKER_CONFIG even at its default's value. With IncludeSynonyms each entry lists its family
    (log.retention.ms / .minutes / .hours) given at start-up, then with its default, from its own name on;
    a PASSWORD key's synonyms have no value. With IncludeDocumentation each carries a text."""
    b = BrokerThread(tmp_path, overrides={"num.partitions": 1, "log.retention.ms": 60000, "log.retention.hours": 2,
                                          "ssl.keystore.password": "s3cret"})
    c = RawClient(b.broker.port)
    try:
        plain = describe_with(c, BROKER, "1", synonyms=False)
        full = describe_with(c, BROKER, "1", synonyms=True, documentation=True)
    finally:
        c.close()
        b.stop()
    assert (plain["num.partitions"].value, plain["num.partitions"].config_source) == ("1", STATIC_BROKER_CONFIG)
    assert (plain["message.max.bytes"].value, plain["message.max.bytes"].config_source) == ("1048588", DEFAULT_CONFIG)
    assert all(entry.synonyms == () and entry.documentation is None for entry in plain.values())
    assert {k: (e.value, e.config_source) for k, e in full.items()} == {
        k: (e.value, e.config_source) for k, e in plain.items()}
    assert synonyms_of(full["num.partitions"]) == [("num.partitions", "1", STATIC_BROKER_CONFIG),
                                                   ("num.partitions", "1", DEFAULT_CONFIG)]
    assert synonyms_of(full["message.max.bytes"]) == [("message.max.bytes", "1048588", DEFAULT_CONFIG)]
    assert synonyms_of(full["log.retention.ms"]) == [
        ("log.retention.ms", "60000", STATIC_BROKER_CONFIG), ("log.retention.hours", "2", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert synonyms_of(full["log.retention.hours"]) == [("log.retention.hours", "2", STATIC_BROKER_CONFIG),
                                                        ("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert (full["log.retention.minutes"].value, full["log.retention.minutes"].config_source,
            synonyms_of(full["log.retention.minutes"])) == (None, DEFAULT_CONFIG, [])
    password = full["ssl.keystore.password"]
    assert (password.value, password.is_sensitive, password.config_source, synonyms_of(password)) == (
        None, True, STATIC_BROKER_CONFIG, [("ssl.keystore.password", None, STATIC_BROKER_CONFIG)])
    assert (full["ssl.key.password"].config_source, synonyms_of(full["ssl.key.password"])) == (DEFAULT_CONFIG, [])
    assert full["num.partitions"].documentation == CONFIG_DEFS["num.partitions"].doc != ""
    assert all(entry.documentation for entry in full.values())


def test_group_configs_list_kafkas_synonyms_the_group_value_then_its_broker_default(tmp_path):
    """Kafka 4.3's group config synonyms: the value set on the group (GROUP_CONFIG), then the broker key
    `group.<key>` given at start-up (STATIC_BROKER_CONFIG, even at its default's value) and its default
    (DEFAULT_CONFIG); a key no broker key sets has the group config's own default. serve's --group-config
    default is a STATIC_BROKER_CONFIG synonym under the group key. The source is the first synonym's."""
    b = BrokerThread(tmp_path, share=True, overrides={"group.share.record.lock.duration.ms": 30000},
                     group_configs={"share.auto.offset.reset": "earliest"})
    c = RawClient(b.broker.port)
    try:
        assert alter(c, GROUP, "g", [("share.record.lock.duration.ms", SET, "20000"),
                                     ("share.isolation.level", SET, "read_committed")]).error_code == NONE
        plain = describe_with(c, GROUP, "g", synonyms=False)
        full = describe_with(c, GROUP, "g", synonyms=True, documentation=True)
        unset = describe_with(c, GROUP, "other", synonyms=True)
    finally:
        c.close()
        b.stop()
    assert {k: (e.value, e.config_source) for k, e in plain.items()} == {
        k: (e.value, e.config_source) for k, e in full.items()}
    assert all(entry.synonyms == () and entry.documentation is None for entry in plain.values())
    lock = [("group.share.record.lock.duration.ms", "30000", STATIC_BROKER_CONFIG),
            ("group.share.record.lock.duration.ms", "30000", DEFAULT_CONFIG)]
    assert (full["share.record.lock.duration.ms"].config_source, synonyms_of(full["share.record.lock.duration.ms"])) == (
        GROUP_CONFIG, [("share.record.lock.duration.ms", "20000", GROUP_CONFIG), *lock])
    assert (unset["share.record.lock.duration.ms"].config_source,
            synonyms_of(unset["share.record.lock.duration.ms"])) == (STATIC_BROKER_CONFIG, lock)
    assert synonyms_of(full["share.isolation.level"]) == [("share.isolation.level", "read_committed", GROUP_CONFIG),
                                                          ("share.isolation.level", "read_uncommitted", DEFAULT_CONFIG)]
    assert (unset["share.isolation.level"].config_source, synonyms_of(unset["share.isolation.level"])) == (
        DEFAULT_CONFIG, [("share.isolation.level", "read_uncommitted", DEFAULT_CONFIG)])
    assert (unset["share.auto.offset.reset"].config_source, synonyms_of(unset["share.auto.offset.reset"])) == (
        STATIC_BROKER_CONFIG, [("share.auto.offset.reset", "earliest", STATIC_BROKER_CONFIG),
                               ("share.auto.offset.reset", "latest", DEFAULT_CONFIG)])
    assert (unset["share.delivery.count.limit"].config_source, synonyms_of(unset["share.delivery.count.limit"])) == (
        DEFAULT_CONFIG, [("group.share.delivery.count.limit", "5", DEFAULT_CONFIG)])
    assert synonyms_of(unset["consumer.session.timeout.ms"]) == [
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
    assert all(entry.documentation for entry in full.values())
