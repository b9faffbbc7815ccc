"""KIP-1191's configs on `sharegroup serve`: the two group keys, the two broker keys and the topic opt-in, with
Kafka's names, types, defaults, sources, checks and documentation; and `share.version` 2 in ApiVersions."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread
from tests.test_admin_cli import cli

DESCRIBE, ALTER = 32, 44
TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE = 0, 1
NONE, INVALID_CONFIG = 0, 40
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG, TOPIC_CONFIG = 4, 5, 8, 1
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
INVALID_REQUEST = 42
BOOLEAN, STRING = 1, 2
DLQ_NAME, DLQ_COPY = "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable"
PREFIX, AUTO_CREATE = "errors.deadletterqueue.topic.name.prefix", "errors.deadletterqueue.auto.create.topics.enable"
OPT_IN = "errors.deadletterqueue.group.enable"


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides={PREFIX: "dead."})
    yield b
    b.stop()


def describe(client, resource_type, name, keys=None):
    body = build(request_class(DESCRIBE, 4), {"resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True})
    return {c.name: c for c in client.request(DESCRIBE, 4, body).results[0].configs}


def alter(client, resource_type, name, changes):
    body = build(request_class(ALTER, 1), {"validate_only": False, "resources": [
        {"resource_type": resource_type, "resource_name": name,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in changes]}]})
    return client.request(ALTER, 1, body).responses[0]


def test_group_keys_default_to_no_dlq_with_kafkas_types_and_docs(client):
    got = describe(client, GROUP, "g", [DLQ_NAME, DLQ_COPY])
    name, copy = got[DLQ_NAME], got[DLQ_COPY]
    assert (name.value, name.config_source, name.config_type) == ("", DEFAULT_CONFIG, STRING)
    assert (copy.value, copy.config_source, copy.config_type) == ("false", DEFAULT_CONFIG, BOOLEAN)
    assert [(s.name, s.value, s.source) for s in copy.synonyms] == [(DLQ_COPY, "false", DEFAULT_CONFIG)]
    assert "dead-letter queue" in name.documentation and "key, value and headers" in copy.documentation


def test_group_keys_are_set_deleted_and_checked(client):
    assert alter(client, GROUP, "g", [(DLQ_NAME, SET, "dead.orders"), (DLQ_COPY, SET, "TRUE")]).error_code == NONE
    got = describe(client, GROUP, "g", [DLQ_NAME, DLQ_COPY])
    assert (got[DLQ_NAME].value, got[DLQ_NAME].config_source) == ("dead.orders", GROUP_CONFIG)
    assert (got[DLQ_COPY].value, got[DLQ_COPY].config_source) == ("true", GROUP_CONFIG)
    refused = alter(client, GROUP, "g", [(DLQ_NAME, SET, "__consumer_offsets")])
    assert refused.error_code == INVALID_CONFIG and "cannot start with '__'" in refused.error_message
    refused = alter(client, GROUP, "g", [(DLQ_COPY, SET, "yes")])
    assert refused.error_code == INVALID_CONFIG and "either true or false" in refused.error_message
    assert describe(client, GROUP, "g", [DLQ_NAME])[DLQ_NAME].value == "dead.orders"  # refusals changed nothing
    assert alter(client, GROUP, "g", [(DLQ_NAME, DELETE, None)]).error_code == NONE
    assert describe(client, GROUP, "g", [DLQ_NAME])[DLQ_NAME].config_source == DEFAULT_CONFIG


def test_broker_keys_are_described_with_their_sources(client):
    got = describe(client, BROKER, "1", [PREFIX, AUTO_CREATE])
    assert (got[PREFIX].value, got[PREFIX].config_source, got[PREFIX].read_only) == ("dead.", STATIC_BROKER_CONFIG, False)
    assert (got[AUTO_CREATE].value, got[AUTO_CREATE].config_source, got[AUTO_CREATE].config_type) == (
        "false", DEFAULT_CONFIG, BOOLEAN)


def test_broker_keys_are_dynamic_per_node_and_cluster_default_and_durable(broker, client):
    """Kafka 4.4 makes the two DLQ broker keys dynamic cluster configs: so does serve (and only those)."""
    assert alter(client, BROKER, "", [(AUTO_CREATE, SET, "true"), (PREFIX, SET, "x.")]).error_code == NONE
    assert alter(client, BROKER, "1", [(PREFIX, SET, "y.")]).error_code == NONE
    got = describe(client, BROKER, "1", [PREFIX, AUTO_CREATE])
    assert (got[PREFIX].value, got[PREFIX].config_source) == ("y.", DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in got[PREFIX].synonyms] == [
        ("y.", DYNAMIC_BROKER_CONFIG), ("x.", DYNAMIC_DEFAULT_BROKER_CONFIG), ("dead.", STATIC_BROKER_CONFIG),
        ("dlq.", DEFAULT_CONFIG)]
    assert (got[AUTO_CREATE].value, got[AUTO_CREATE].config_source) == ("true", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert {c.name: c.value for c in describe(client, BROKER, "").values()} == {AUTO_CREATE: "true", PREFIX: "x."}
    refused = alter(client, BROKER, "", [(AUTO_CREATE, SET, "maybe")])
    assert refused.error_code == INVALID_CONFIG
    refused = alter(client, BROKER, "1", [(PREFIX, SET, "z."), ("num.partitions", SET, "3")])
    assert (refused.error_code, refused.error_message) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)")
    assert broker.share.dead_letters is not None
    from sharegroup.server.dynamic_broker_configs import DynamicBrokerConfigs

    reopened = DynamicBrokerConfigs(broker.share.dynamic_broker_configs.path.rsplit("/", 1)[0], broker.config)
    assert (reopened[PREFIX], reopened[AUTO_CREATE]) == ("y.", True)  # durable
    assert alter(client, BROKER, "1", [(PREFIX, DELETE, None)]).error_code == NONE
    assert describe(client, BROKER, "1", [PREFIX])[PREFIX].value == "x."


def test_broker_key_defaults_and_checks():
    config = ServeConfig.build({})
    assert (config[PREFIX], config[AUTO_CREATE]) == ("dlq.", False)
    assert not config.warnings
    assert ServeConfig.build({PREFIX: "", AUTO_CREATE: "true"})[PREFIX] == ""
    with pytest.raises(ValueError, match=AUTO_CREATE):
        ServeConfig.build({AUTO_CREATE: "maybe"})
    with pytest.raises(ValueError, match="cannot start with '__'"):
        ServeConfig.build({}, (), [(DLQ_NAME, "__x")])


def test_topic_opt_in_is_a_boolean_topic_config(broker, client):
    broker.call(broker.store.create_topic("dead.orders", 1, {OPT_IN: "true"}))
    got = describe(client, TOPIC, "dead.orders", [OPT_IN])[OPT_IN]
    assert (got.value, got.config_source, got.config_type) == ("true", TOPIC_CONFIG, BOOLEAN)
    refused = alter(client, TOPIC, "dead.orders", [(OPT_IN, SET, "on")])
    assert refused.error_code == INVALID_CONFIG
    assert alter(client, TOPIC, "dead.orders", [(OPT_IN, DELETE, None)]).error_code == NONE
    assert describe(client, TOPIC, "dead.orders", [OPT_IN])[OPT_IN].value == "false"


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_reports_share_version_2_finalized(client, version):
    body = build(request_class(18, version), {"client_software_name": "t", "client_software_version": "1"})
    resp = client.request(18, version, body)
    assert resp.error_code == ErrorCode.none and resp.finalized_features_epoch == 0
    assert [(f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features] == [
        ("share.version", 2, 2)]
    supported = [(f.name, f.min_version, f.max_version) for f in resp.supported_features]
    assert supported == ([("share.version", 0, 2)] if version == 4 else [])  # v3 omits a minimum of 0


def test_configs_cli_sets_and_describes_the_group_dlq(broker):
    base = ("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", "g")
    code, out, _ = cli(*base, "--alter", "--add-config", f"{DLQ_NAME}=dead.orders,{DLQ_COPY}=true")
    assert (code, out) == (0, "Completed updating config for group g.\n")
    code, out, _ = cli(*base, "--describe")
    assert f"  {DLQ_NAME}=dead.orders sensitive=false" in out and f"  {DLQ_COPY}=true sensitive=false" in out
    code, out, _ = cli(*base, "--alter", "--add-config", f"{DLQ_NAME}=__x")
    assert code == 1 and "cannot start with '__'" in out


def test_configs_cli_alters_and_describes_the_broker_default(broker):
    base = ("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-default")
    code, out, _ = cli(*base, "--alter", "--add-config", f"{AUTO_CREATE}=true")
    assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    code, out, _ = cli(*base, "--describe")
    assert out == ("Default configs for brokers in the cluster are:\n"
                   f"  {AUTO_CREATE}=true sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{AUTO_CREATE}=true}}\n")
    code, out, _ = cli("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
                       "--entity-name", "1", "--describe")
    assert out == "Dynamic configs for broker 1 are:\n"  # the default is not this broker's own value
