"""DescribeGroups (the classic API, key 15) on KIP-848 consumer groups: Kafka answers it with the group
in classic form (protocol type "consumer", the assignor as the protocol, members with their
ConsumerProtocolAssignment), so tools that only know DescribeGroups still see the group. Raw kio
requests over every version, plus the in-process coordinator view."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup.coordinator.classic.consumer_protocol import decode_assignment, subscribed_topics
from sharegroup.server.codec import build, request_class
from tests.consumer_group_env import T1, T2, ConsumerEnv
from tests.server_harness import BrokerThread
from tests.test_server_consumer_group_wire import OVERRIDES, describe, heartbeat

DESCRIBE_GROUPS = 15
NONE, GROUP_ID_NOT_FOUND = 0, 69


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("dg"), share=True, overrides=OVERRIDES)
    b.call(b.store.create_topic("t", 4))
    b.call(b.store.create_topic("u", 2))
    yield b
    b.stop()


def describe_groups(client, *groups, version=5):
    body = {"groups": list(groups)}
    if version >= 3:
        body["include_authorized_operations"] = False
    return client.request(DESCRIBE_GROUPS, version, build(request_class(DESCRIBE_GROUPS, version), body)).groups


@pytest.mark.parametrize("version", range(0, 7))
def test_a_consumer_group_is_described_in_classic_form(broker, client, version):
    group = f"dg-v{version}"
    r = heartbeat(client, "m1", 0, ["t", "u"], group=group, server_assignor="range", instance_id="i1")
    assert (r.error_code, r.member_epoch) == (NONE, 1)
    (g,) = describe_groups(client, group, version=version)
    assert (g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data) == (
        NONE, group, "Stable", "consumer", "range")
    (m,) = g.members
    assert (m.member_id, m.client_host) == ("m1", "/127.0.0.1")
    if version >= 4:
        assert m.group_instance_id == "i1"
    assert subscribed_topics(m.member_metadata) == ["t", "u"]
    assert decode_assignment(m.member_assignment) == {"t": [0, 1, 2, 3], "u": [0, 1]}
    assert heartbeat(client, "m1", -1, group=group, instance_id="i1").error_code == NONE
    (g,) = describe_groups(client, group, version=version)
    assert (g.error_code, g.group_state, g.protocol_type, g.members) == (NONE, "Empty", "consumer", ())


def test_a_missing_group_is_still_dead(client):
    (g,) = describe_groups(client, "nobody", version=6)
    assert (g.error_code, g.group_state) == (GROUP_ID_NOT_FOUND, "Dead")
    (g,) = describe_groups(client, "nobody", version=5)
    assert (g.error_code, g.group_state) == (NONE, "Dead")


def test_the_coordinator_leaves_out_a_deleted_topic_and_uses_the_default_assignor():
    env = asyncio.run(ConsumerEnv(t1=4, t2=2).start())
    r = asyncio.run(env.join("a", topics=("t1", "t2")))
    assert r.assignment == {T1: [0, 1, 2, 3], T2: [0, 1]}
    env.topics.delete_topic("t2")
    (d,) = env.gc.describe_groups(["cg"])
    assert (d.error, d.state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "uniform")
    assert decode_assignment(d.members[0].assignment) == {"t1": [0, 1, 2, 3]}


def test_consumer_group_describe_answers_the_authorized_operations_when_asked(broker, client):
    from sharegroup.server.authorization import AclOperation, ResourceType
    from tests.test_server_consumer_group_wire import DESCRIBE, Recording

    assert heartbeat(client, "m1", 0, ["t"], group="ops").error_code == NONE
    body = {"group_ids": ["ops"], "include_authorized_operations": True}
    saved = broker.broker.authorizer
    broker.broker.authorizer = Recording(deny={(AclOperation.DELETE, ResourceType.GROUP, "ops")})
    try:
        (g,) = client.request(DESCRIBE, 1, build(request_class(DESCRIBE, 1), body)).groups
        # READ 3, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 (DELETE 6 refused)
        assert (g.error_code, g.authorized_operations) == (NONE, (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11))
        (g,) = client.request(DESCRIBE, 1, build(request_class(DESCRIBE, 1), {**body, "include_authorized_operations": False})).groups
        assert g.authorized_operations == -2147483648
    finally:
        broker.broker.authorizer = saved


def test_consumer_group_describe_checks_only_assigned_topics_with_kafkas_message(broker, client):
    """Kafka checks DESCRIBE on the topics of the members' assignments and target assignments (not on
    the subscription), and a refusal reads "The group has described topic(s) that the client is not
    authorized to describe." with no members."""
    from sharegroup.server.authorization import AclOperation, ResourceType
    from tests.test_server_consumer_group_wire import DESCRIBE, Recording

    r = heartbeat(client, "m1", 0, ["t", "absent-topic"], group="assigned-only")
    assert r.error_code == NONE
    saved = broker.broker.authorizer
    try:
        broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.TOPIC, "absent-topic")})
        (g,) = describe(client, "assigned-only").groups
        assert (g.error_code, [m.member_id for m in g.members]) == (NONE, ["m1"])
        broker.broker.authorizer = Recording(deny={(AclOperation.DESCRIBE, ResourceType.TOPIC, "t")})
        (g,) = describe(client, "assigned-only").groups
        assert (g.error_code, g.error_message, g.members) == (
            29, "The group has described topic(s) that the client is not authorized to describe.", ())
    finally:
        broker.broker.authorizer = saved
