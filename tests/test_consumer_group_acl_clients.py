"""ACLs for consumer groups with real `confluent_kafka.Consumer`s (classic and KIP-848) as `User:ANONYMOUS`.

One broker with `authorizer.class.name` set serves the module. Without READ on the group a consumer is
refused with GROUP_AUTHORIZATION_FAILED (FindCoordinator, JoinGroup or ConsumerGroupHeartbeat ask for it);
with READ on the group but no ACL on the topic it gets TOPIC_AUTHORIZATION_FAILED (Metadata for a classic
consumer, the heartbeat's DESCRIBE on its subscription for a KIP-848 one); with READ on both it consumes
and commits (OffsetCommit needs READ on the group and the topic). `AdminClient.describe_consumer_groups`
then sees either kind of group (librdkafka asks ConsumerGroupDescribe first and falls back to
DescribeGroups for a classic group).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka import ConsumerGroupType  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from sharegroup.server.authorization import AclOperation as Op  # noqa: E402
from sharegroup.server.authorization import ResourceType as RT  # noqa: E402
from sharegroup.server.security import acls as sg_acls  # noqa: E402
from tests.server_harness import BrokerThread  # noqa: E402
from tests.share_clients import WAIT_S  # noqa: E402

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
TIMINGS = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 6000,
           "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 200,
           "group.initial.rebalance.delay.ms": 0}
PROTOCOLS = ("classic", "consumer")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("cg-acl"), share=True,
                     overrides={"authorizer.class.name": STANDARD, **TIMINGS})
    for topic in ("open", "hidden"):
        b.call(b.store.create_topic(topic, 2))
    allow(b, (RT.TOPIC, "open", Op.WRITE))
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(4):
        producer.produce("open", key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(WAIT_S) == 0
    yield b
    b.stop()


def allow(broker: BrokerThread, *grants: tuple) -> None:
    """ALLOW User:ANONYMOUS each (resource type, name, operation), written behind the broker's back."""
    bindings = [sg_acls.AclBinding(rt, name, sg_acls.PatternType.LITERAL, ANON, "*", op, sg_acls.AclPermissionType.ALLOW)
                for rt, name, op in grants]
    assert broker.call(broker.broker.authorizer.create_acls(bindings)) == [None] * len(bindings)


def consumer(broker: BrokerThread, protocol: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": f"acl-{protocol}"})
    c.subscribe([topic])
    return c


def consume(c: Consumer, count: int) -> tuple[list[bytes], int | None]:
    """Up to `count` values, or (values so far, the error code that stopped the consumer)."""
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        try:
            message = c.poll(0.2)
        except KafkaException as exc:
            return values, exc.args[0].code()
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
                return values, message.error().code()
            continue
        values.append(message.value())
    return values, None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_without_read_on_the_group_the_consumer_is_refused(broker, protocol):
    allow(broker, (RT.TOPIC, "open", Op.READ))
    c = consumer(broker, protocol, f"no-group-acl-{protocol}", "open")
    try:
        assert consume(c, 1) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_without_an_acl_on_the_topic_the_consumer_is_refused(broker, protocol):
    group = f"no-topic-acl-{protocol}"
    allow(broker, (RT.GROUP, group, Op.READ))
    c = consumer(broker, protocol, group, "hidden")
    try:
        assert consume(c, 1) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_with_read_on_group_and_topic_it_consumes_commits_and_is_described(broker, protocol):
    group = f"allowed-{protocol}"
    allow(broker, (RT.GROUP, group, Op.READ), (RT.TOPIC, "open", Op.READ))
    c = consumer(broker, protocol, group, "open")
    try:
        values, error = consume(c, 4)
        assert (sorted(values), error) == ([b"v0", b"v1", b"v2", b"v3"], None)
        committed = c.commit(asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
        stored = c.committed([TopicPartition("open", 0), TopicPartition("open", 1)], timeout=WAIT_S)
        topic_id = broker.store.topic_by_name("open").topic_id
        ends = [broker.store.log_end_offset(topic_id, p) for p in (0, 1)]
        assert sum(ends) == 4
        # A partition's committed offset is its end; one that got no record has nothing committed (-1001).
        assert [tp.offset for tp in stored] == [end if end else -1001 for end in ends]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        description = admin.describe_consumer_groups([group], request_timeout=WAIT_S)[group].result()
        expected_type = ConsumerGroupType.CLASSIC if protocol == "classic" else ConsumerGroupType.CONSUMER
        assert (description.group_id, description.type, str(description.state)) == (
            group, expected_type, "ConsumerGroupState.STABLE")
        (member,) = description.members
        assert (member.client_id, member.host) == (f"acl-{protocol}", "/127.0.0.1")
        assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == [("open", 0), ("open", 1)]
    finally:
        c.close()


def test_admin_client_sets_a_consumer_groups_session_timeout_with_alter_configs_on_the_group(broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    change = ConfigResource(ConfigResource.Type.GROUP, "tuned", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        list(admin.incremental_alter_configs([change], request_timeout=WAIT_S).values())[0].result()
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(broker, (RT.GROUP, "tuned", Op.ALTER_CONFIGS), (RT.GROUP, "tuned", Op.DESCRIBE_CONFIGS))
    assert list(admin.incremental_alter_configs([change], request_timeout=WAIT_S).values())[0].result() is None
    described = list(admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, "tuned")],
                                            request_timeout=WAIT_S).values())[0].result()
    assert (described["consumer.session.timeout.ms"].value, described["consumer.heartbeat.interval.ms"].value) == (
        "5000", "200")
    assert broker.share.coordinator._consumer.timing("tuned") == (5000, 200)


def test_admin_client_lists_only_describable_groups_with_state_and_type_filters(broker):
    from confluent_kafka import ConsumerGroupState

    allow(broker, (RT.GROUP, "listed-consumer", Op.READ), (RT.GROUP, "listed-classic", Op.READ),
          (RT.TOPIC, "open", Op.READ))
    consumers = [consumer(broker, p, f"listed-{p}", "open") for p in PROTOCOLS]
    try:
        for c in consumers:
            assert consume(c, 1)[1] is None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def listed(**filters):
            result = admin.list_consumer_groups(request_timeout=WAIT_S, **filters).result()
            return sorted((g.group_id, g.type.name, g.state.name) for g in result.valid if g.group_id.startswith("listed-"))

        assert listed() == [("listed-classic", "CLASSIC", "STABLE"), ("listed-consumer", "CONSUMER", "STABLE")]
        assert listed(types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.STABLE}) == [
            ("listed-consumer", "CONSUMER", "STABLE")]
        assert listed(states={ConsumerGroupState.EMPTY}) == []
        for c in consumers:
            c.close()
        consumers = []
        assert listed(states={ConsumerGroupState.EMPTY}) == [
            ("listed-classic", "CLASSIC", "EMPTY"), ("listed-consumer", "CONSUMER", "EMPTY")]
        # Without DESCRIBE on the cluster, a group the client may not DESCRIBE is not listed at all.
        broker.call(broker.share.coordinator.consumer_group_heartbeat(
            "hidden-group", "h1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["open"],
            owned_topic_partitions={}))
        assert "hidden-group" in broker.share.coordinator.group_types()
        assert "hidden-group" not in [g.group_id for g in admin.list_consumer_groups(request_timeout=WAIT_S).result().valid]
    finally:
        for c in consumers:
            c.close()
