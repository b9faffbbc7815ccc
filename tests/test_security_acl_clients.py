"""ACLs with real `confluent_kafka` clients (Producer, ShareConsumer, AdminClient) as `User:ANONYMOUS`.

The share path's ACL matrix on one in-process broker: refused with Kafka's code without the ACL, allowed
with it, DENY over ALLOW, PREFIXED patterns, ACLs managed with AdminClient's acl calls; super users on a
second broker; ACLs surviving SIGKILL and a restart of `sharegroup serve`; and the startup errors.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from sharegroup.server.authorization import CLUSTER_NAME
from sharegroup.server.authorization import AclOperation as Op
from sharegroup.server.authorization import ResourceType as RT
from sharegroup.server.security import acls as sg_acls
from tests.server_harness import BrokerThread, ServeProcess, run_cli
from tests.share_clients import WAIT_S, consume_or_refusal

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
TIMINGS = {"group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 5000,
           "group.share.min.heartbeat.interval.ms": 100, "group.share.heartbeat.interval.ms": 250}


def broker_with_acls(tmp_path, super_users: str = "") -> BrokerThread:
    return BrokerThread(tmp_path, share=True,
                        overrides={"authorizer.class.name": STANDARD, "super.users": super_users, **TIMINGS},
                        group_configs={"share.auto.offset.reset": "earliest"})


def let_admin(broker: BrokerThread) -> None:
    """The one ACL written behind the broker's back: ALTER on the cluster, so AdminClient may manage ACLs."""
    binding = sg_acls.AclBinding(RT.CLUSTER, CLUSTER_NAME, sg_acls.PatternType.LITERAL, ANON, "*", Op.ALTER,
                                 sg_acls.AclPermissionType.ALLOW)
    assert broker.call(broker.broker.authorizer.create_acls([binding])) == [None]


# confluent_kafka calls the CLUSTER resource type (4) BROKER; its one name is "kafka-cluster".


def acl(rt, name, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL, host="*") -> AclBinding:
    return AclBinding(rt, name, pattern, ANON, host, op, perm)


def create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=WAIT_S).values():
        assert future.result() is None


def delete(admin: AdminClient, *bindings: AclBinding) -> list:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]
    return [b for f in admin.delete_acls(filters, request_timeout=WAIT_S).values() for b in f.result()]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list:
    """Delivery errors (None for a delivered record), in order."""
    outcomes: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "message.timeout.ms": 5000})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: outcomes.append(err))
    assert producer.flush(WAIT_S) == 0
    return outcomes


def consume(bootstrap: str, group: str, topic: str, count: int) -> tuple[list[bytes], int | None]:
    """(values consumed, the error code that stopped the consumer or None), polling at most WAIT_S."""
    return consume_or_refusal({"bootstrap.servers": bootstrap}, group, topic, count)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = broker_with_acls(tmp_path_factory.mktemp("acl-clients"))
    let_admin(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    yield broker, admin
    broker.stop()


def test_the_share_path_is_refused_without_acls_and_allowed_with_them(secured):
    broker, admin = secured
    boot = broker.bootstrap
    [refused] = produce(boot, "orders", [b"x"])
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume(boot, "billing", "orders", 1) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    # PREFIXED: WRITE on every topic starting with "ord" (also enough for the idempotent InitProducerId)
    create(admin, acl(ResourceType.TOPIC, "ord", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
           acl(ResourceType.TOPIC, "orders", AclOperation.CREATE))
    assert produce(boot, "orders", [b"1", b"2", b"3"]) == [None, None, None]
    # READ on the group alone: the heartbeat's subscribed topic is not describable
    create(admin, acl(ResourceType.GROUP, "billing", AclOperation.READ))
    assert consume(boot, "billing", "orders", 1) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    create(admin, acl(ResourceType.TOPIC, "orders", AclOperation.READ))
    assert consume(boot, "billing", "orders", 3) == ([b"1", b"2", b"3"], None)
    # DENY wins over ALLOW, here a PREFIXED DENY for everyone over the literal ALLOW on the group
    deny = AclBinding(ResourceType.GROUP, "bill", ResourcePatternType.PREFIXED, "User:*", "*", AclOperation.READ,
                      AclPermissionType.DENY)
    create(admin, deny)
    assert consume(boot, "billing", "orders", 1) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert [(b.name, b.permission_type) for b in delete(admin, deny)] == [("bill", AclPermissionType.DENY)]
    assert produce(boot, "orders", [b"4"]) == [None]
    assert consume(boot, "billing", "orders", 1) == ([b"4"], None)


def test_admin_client_acl_calls(secured):
    broker, admin = secured
    read_on_prefix = acl(ResourceType.TOPIC, "audit-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    from_elsewhere = acl(ResourceType.TOPIC, "audit-log", AclOperation.WRITE, AclPermissionType.DENY, host="10.0.0.7")
    create(admin, read_on_prefix, from_elsewhere)
    matching = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "audit-log", ResourcePatternType.MATCH, None,
                                                    None, AclOperation.ANY, AclPermissionType.ANY),
                                   request_timeout=WAIT_S).result()
    assert sorted((b.name, b.resource_pattern_type, b.host, b.operation, b.permission_type) for b in matching) == [
        ("audit-", ResourcePatternType.PREFIXED, "*", AclOperation.READ, AclPermissionType.ALLOW),
        ("audit-log", ResourcePatternType.LITERAL, "10.0.0.7", AclOperation.WRITE, AclPermissionType.DENY)]
    bad = AclBinding(ResourceType.BROKER, "other", ResourcePatternType.LITERAL, ANON, "*", AclOperation.ALTER,
                     AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad], request_timeout=WAIT_S)[bad].result()
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert sorted(b.name for b in delete(admin, read_on_prefix, from_elsewhere)) == ["audit-", "audit-log"]


def test_super_users_need_no_acls_and_ignore_deny(tmp_path):
    broker = broker_with_acls(tmp_path, super_users="User:root;User:ANONYMOUS")
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        create(admin, AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:*", "*",
                                 AclOperation.ALL, AclPermissionType.DENY))
        assert produce(broker.bootstrap, "payments", [b"p"]) == [None]
        assert consume(broker.bootstrap, "any-group", "payments", 1) == ([b"p"], None)
    finally:
        broker.stop()


def test_acls_survive_sigkill_and_restart(tmp_path):
    base = ("--override", f"authorizer.class.name={STANDARD}")
    server = ServeProcess(tmp_path, *base, "--override", "super.users=User:ANONYMOUS")
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        create(admin, acl(ResourceType.BROKER, CLUSTER_NAME, AclOperation.DESCRIBE),
               acl(ResourceType.TOPIC, "kept", AclOperation.WRITE))
    finally:
        server.kill()  # SIGKILL: no clean shutdown
    assert server.proc.returncode == -9
    server = ServeProcess(tmp_path, *base)  # no super users now: only the ACLs decide
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        kept = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                    AclOperation.ANY, AclPermissionType.ANY),
                                   request_timeout=WAIT_S).result()
        assert sorted((b.restype, b.name, b.operation) for b in kept) == [
            (ResourceType.TOPIC, "kept", AclOperation.WRITE), (ResourceType.BROKER, CLUSTER_NAME, AclOperation.DESCRIBE)]
        assert produce(server.bootstrap, "kept", [b"k"])[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # no CREATE
    finally:
        code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def test_startup_refuses_an_unknown_authorizer_and_a_corrupt_acl_file(tmp_path):
    bad_class = run_cli("serve", "--port", "0", "--data", str(tmp_path), "--override", "authorizer.class.name=com.x.Y")
    assert bad_class.returncode == 2
    assert "authorizer.class.name 'com.x.Y' is not supported" in bad_class.stderr
    (tmp_path / "security").mkdir()
    (tmp_path / "security" / "acls.json").write_text('{"version": 1, "acls": [')
    corrupt = run_cli("serve", "--port", "0", "--data", str(tmp_path), "--override", f"authorizer.class.name={STANDARD}")
    assert corrupt.returncode == 2
    assert "acls.json: not a JSON ACL file" in corrupt.stderr
