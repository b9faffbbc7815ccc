"""Raw kio ConsumerGroupHeartbeat / ConsumerGroupDescribe requests against the broker: versions,
Kafka's authorization checks and their order, error responses, describe fields, ApiVersions, and the
group records surviving a broker restart."""

from __future__ import annotations

import uuid

import pytest

from sharegroup.server.authorization import AclOperation, ResourceType
from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient
from tests.test_server_classic_wire import stable_member

HEARTBEAT, DESCRIBE, API_VERSIONS, SHARE_HEARTBEAT = 68, 69, 18, 76
NONE, UNKNOWN_MEMBER_ID, GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 0, 25, 30, 29
INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNSUPPORTED_ASSIGNOR, INVALID_GROUP_ID = 42, 69, 112, 24
OVERRIDES = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 3000,
             "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 200}


class Recording:
    """An authorizer that records every question and refuses what `deny` holds."""

    def __init__(self, deny=()):
        self.deny = set(deny)
        self.asked: list[tuple] = []

    def authorize(self, principal, host, operation, resource_type, name):
        self.asked.append((AclOperation(operation), ResourceType(resource_type), name))
        return (AclOperation(operation), ResourceType(resource_type), name) not in self.deny


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    b.call(b.store.create_topic("t", 4))
    yield b
    b.stop()


def heartbeat(client, member, epoch, topics=None, version=1, group="g", **fields):
    data = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 5000 if epoch == 0 else -1, "subscribed_topic_names": topics,
            "server_assignor": None, "topic_partitions": [] if epoch == 0 else None}
    if version >= 1:
        data["subscribed_topic_regex"] = None
    data.update(fields)
    return client.request(HEARTBEAT, version, build(request_class(HEARTBEAT, version), data))


def describe(client, *groups, version=1):
    return client.request(DESCRIBE, version, build(request_class(DESCRIBE, version),
                                                   {"group_ids": list(groups), "include_authorized_operations": False}))


def test_apis_are_advertised(client):
    body = build(request_class(API_VERSIONS, 3), {"client_software_name": "t", "client_software_version": "1"})
    keys = {k.api_key: (k.min_version, k.max_version) for k in client.request(API_VERSIONS, 3, body).api_keys}
    assert keys[HEARTBEAT] == (0, 1) and keys[DESCRIBE] == (0, 1)


def test_join_heartbeat_and_describe_over_the_wire(broker, client):
    topic_id = broker.store.topic_by_name("t").topic_id
    r = heartbeat(client, "m1", 0, ["t"])
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval.total_seconds()) == (NONE, "m1", 1, 0.2)
    assert [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions] == [(topic_id, [0, 1, 2, 3])]
    r = heartbeat(client, "m1", 1, topic_partitions=[{"topic_id": topic_id, "partitions": [0, 1, 2, 3]}])
    assert (r.error_code, r.member_epoch, r.assignment) == (NONE, 1, None)
    (group,) = describe(client, "g").groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        NONE, "Stable", 1, 1, "uniform")
    (m,) = group.members
    assert (m.member_id, m.member_epoch, m.client_host.startswith("/127.0.0.1"), list(m.subscribed_topic_names),
            m.member_type) == ("m1", 1, True, ["t"], 1)
    assert [(tp.topic_name, list(tp.partitions)) for tp in m.assignment.topic_partitions] == [("t", [0, 1, 2, 3])]
    assert [(tp.topic_name, list(tp.partitions)) for tp in m.target_assignment.topic_partitions] == [
        ("t", [0, 1, 2, 3])]


def test_v0_join_gets_a_generated_member_id(client):
    r = heartbeat(client, "", 0, ["t"], version=0)
    assert r.error_code == NONE and len(r.member_id) == 36
    r = heartbeat(client, "", 0, ["t"], version=1)
    assert (r.error_code, r.error_message, r.member_id, r.member_epoch) == (
        INVALID_REQUEST, "MemberId can't be empty.", None, 0)


def test_errors_are_top_level(client):
    assert heartbeat(client, "m1", 3, group="nope").error_code == GROUP_ID_NOT_FOUND
    assert heartbeat(client, "m1", 0, ["t"], server_assignor="sticky").error_code == UNSUPPORTED_ASSIGNOR
    assert heartbeat(client, "m1", 0, ["t"]).error_code == NONE
    assert heartbeat(client, "ghost", 1).error_code == UNKNOWN_MEMBER_ID
    share = client.request(SHARE_HEARTBEAT, 1, build(request_class(SHARE_HEARTBEAT, 1), {
        "group_id": "g", "member_id": "s1", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}))
    assert (share.error_code, share.error_message) == (GROUP_ID_NOT_FOUND, "Group g is not a share group.")
    (missing, blank) = describe(client, "nope", "").groups
    assert (missing.error_code, blank.error_code) == (GROUP_ID_NOT_FOUND, INVALID_GROUP_ID)
    # an error entry leaves the other fields at the schema's defaults, as Kafka's does
    assert (missing.group_state, missing.group_epoch, missing.assignment_epoch, missing.assignor_name,
            missing.members, missing.authorized_operations) == ("", 0, 0, "", (), -(2**31))


def test_heartbeat_authorization_read_group_then_describe_topics(broker, client):
    auth = broker.broker.authorizer = Recording(deny={(AclOperation.READ, ResourceType.GROUP, "g")})
    assert heartbeat(client, "m1", 0, ["t", "u"]).error_code == GROUP_AUTHORIZATION_FAILED
    assert auth.asked == [(AclOperation.READ, ResourceType.GROUP, "g")]
    auth = broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.TOPIC, "u")})
    r = heartbeat(client, "m1", 0, ["t", "u"])
    assert (r.error_code, r.member_id) == (TOPIC_AUTHORIZATION_FAILED, None)
    assert auth.asked == [(AclOperation.READ, ResourceType.GROUP, "g"),
                          (AclOperation.DESCRIBE, ResourceType.TOPIC, "t"),
                          (AclOperation.DESCRIBE, ResourceType.TOPIC, "u")]
    assert describe(client, "g").groups[0].error_code == GROUP_ID_NOT_FOUND  # nothing was joined


def test_describe_authorization_per_group_and_on_its_topics(broker, client):
    assert heartbeat(client, "m1", 0, ["t"]).error_code == NONE
    broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.GROUP, "g")})
    assert describe(client, "g").groups[0].error_code == GROUP_AUTHORIZATION_FAILED
    broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.TOPIC, "t")})
    assert describe(client, "g").groups[0].error_code == TOPIC_AUTHORIZATION_FAILED


def test_groups_survive_a_broker_restart(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    try:
        b.call(b.store.create_topic("t", 2))
        c = RawClient(b.broker.port)
        assert heartbeat(c, "m1", 0, ["t"], instance_id="i1").error_code == NONE
        c.close()
    finally:
        b.stop()
    b = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    try:
        c = RawClient(b.broker.port)
        (group,) = describe(c, "g").groups
        assert (group.error_code, group.group_epoch, [(m.member_id, m.instance_id, m.member_epoch)
                                                      for m in group.members]) == (NONE, 1, [("m1", "i1", 1)])
        topic_id = b.store.topic_by_name("t").topic_id
        r = heartbeat(c, "m1", 1, instance_id="i1", topic_partitions=[{"topic_id": topic_id, "partitions": [0, 1]}])
        assert (r.error_code, r.member_epoch) == (NONE, 1)
        c.close()
    finally:
        b.stop()


def test_unknown_owned_topic_id_is_harmless(client):
    assert heartbeat(client, "m1", 0, ["t"]).error_code == NONE
    r = heartbeat(client, "m1", 1, topic_partitions=[{"topic_id": uuid.uuid4(), "partitions": [7]}])
    assert (r.error_code, r.member_epoch) == (NONE, 1)


def test_regex_matches_only_topics_the_member_may_describe(broker, client):
    broker.call(broker.store.create_topic("t2", 1))
    broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.TOPIC, "t2")})
    r = heartbeat(client, "m1", 0, None, subscribed_topic_regex="t.*")
    assert r.error_code == NONE
    assert [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions] == [
        (broker.store.topic_by_name("t").topic_id, [0, 1, 2, 3])]


FENCED_MEMBER_EPOCH = 110


def test_an_older_epoch_whose_owned_partitions_are_not_a_subset_is_fenced_member_epoch(broker, client):
    """Kafka's GroupMetadataManager: an older epoch is accepted only when it is the previous epoch and
    the owned partitions are a subset of the assignment; anything else is FENCED_MEMBER_EPOCH, never
    INVALID_REQUEST, also for the zero topic id (which kio reads back as None)."""
    topic_id = broker.store.topic_by_name("t").topic_id
    assert heartbeat(client, "m1", 0, ["t"]).member_epoch == 1
    assert heartbeat(client, "m2", 0, ["t"]).error_code == NONE  # epoch 2: m1 gives up two partitions
    r = heartbeat(client, "m1", 1, topic_partitions=[{"topic_id": topic_id, "partitions": [0, 1]}])
    assert (r.error_code, r.member_epoch) == (NONE, 2)
    for owned in ([{"topic_id": topic_id, "partitions": [0, 1, 2]}],
                  [{"topic_id": uuid.UUID(int=0), "partitions": [0]}], None):
        r = heartbeat(client, "m1", 1, topic_partitions=owned)
        assert (r.error_code, r.member_id, r.member_epoch) == (FENCED_MEMBER_EPOCH, None, 0), owned
    # the previous epoch with a subset of the assignment is accepted (the response with epoch 2 was lost)
    r = heartbeat(client, "m1", 1, topic_partitions=[{"topic_id": topic_id, "partitions": [1]}])
    assert (r.error_code, r.member_epoch) == (NONE, 2)


def test_empty_consumer_group_id_gets_kafkas_text(client):
    """Kafka's ConsumerGroupHeartbeatRequestTest.testEmptyConsumerGroupId."""
    for group in ("", " "):
        r = heartbeat(client, "m1", 0, ["t"], group=group)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "GroupId can't be empty.")


def test_consumer_group_describe_shows_a_member_without_regex_with_subscribed_topic_regex_empty(client):
    assert heartbeat(client, "m1", 0, ["t"]).error_code == NONE
    assert heartbeat(client, "m2", 0, None, subscribed_topic_regex="t.*").error_code == NONE
    (group,) = describe(client, "g").groups
    assert sorted((m.member_id, m.subscribed_topic_regex) for m in group.members) == [("m1", ""), ("m2", "t.*")]


def test_consumer_group_heartbeat_and_describe_of_a_classic_group_are_group_id_not_found(broker, client):
    stable_member(client, group="classic-g")
    r = heartbeat(client, "m1", 0, ["t"], group="classic-g")
    assert (r.error_code, r.error_message) == (GROUP_ID_NOT_FOUND, "Group classic-g is not a consumer group.")
    (group,) = describe(client, "classic-g").groups
    assert (group.error_code, group.error_message) == (GROUP_ID_NOT_FOUND, "Group classic-g is not a consumer group.")
