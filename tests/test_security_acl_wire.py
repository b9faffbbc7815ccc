"""Every API under ACLs, by raw kio requests: Kafka's checks, order and codes, and what stays hidden.

One broker (share services on, `authorizer.class.name` set, `super.users=User:admin`) serves every test;
each test starts with no ACL. The connection's principal is `User:ANONYMOUS` from 127.0.0.1 (a PLAINTEXT
listener); other principals are exercised through a `RequestContext` built in the test.
"""

from __future__ import annotations

import uuid

import pytest

from sharegroup.server.api import RequestContext
from sharegroup.server.authorization import CLUSTER_NAME, AclOperation as Op, ResourceType as RT
from sharegroup.server.codec import ZERO_UUID, build, request_class
from sharegroup.server.security.acls import AclBinding, AclBindingFilter, AclPermissionType as Perm, PatternType as PT
from tests.server_harness import BrokerThread, RawClient, batch_bytes

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON, HOST = "User:ANONYMOUS", "127.0.0.1"
NONE, UNKNOWN_TOPIC, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 0, 3, 42, 100
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, SECURITY_DISABLED = 29, 30, 31, 53, 54
MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("acl-wire"), share=True,
                     overrides={"authorizer.class.name": STANDARD, "super.users": "User:admin"},
                     group_configs={"share.auto.offset.reset": "earliest"})
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    broker.call(broker.broker.authorizer.delete_acls([AclBindingFilter()]))  # every test starts without ACLs
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def grant(broker, rt: RT, name: str, *ops: Op, perm: Perm = Perm.ALLOW, pattern: PT = PT.LITERAL,
          principal: str = ANON, host: str = "*") -> None:
    bindings = [AclBinding(rt, name, pattern, principal, host, op, perm) for op in ops]
    assert broker.call(broker.broker.authorizer.create_acls(bindings)) == [None] * len(ops)


def call(client: RawClient, key: int, version: int, data: dict):
    return client.request(key, version, build(request_class(key, version), data))


def topic(broker, name: str, partitions: int = 1, records: int = 0) -> uuid.UUID:
    info = broker.store.topic_by_name(name) or broker.call(broker.store.create_topic(name, partitions))
    if records:
        broker.call(broker.store.append(info.topic_id, 0, batch_bytes(records), acks=-1))
    return info.topic_id


def metadata(client, names, allow_auto=False, version=12):
    topics = None if names is None else [
        {"name": None, "topic_id": n} if isinstance(n, uuid.UUID) else {"name": n, "topic_id": ZERO_UUID} for n in names]
    return call(client, 3, version, {"topics": topics, "allow_auto_topic_creation": allow_auto,
                                     "include_topic_authorized_operations": True,
                                     "include_cluster_authorized_operations": False})


# -- Metadata -------------------------------------------------------------------------------------------


def test_metadata_never_reveals_whether_an_undescribable_topic_exists(broker, client):
    existing = topic(broker, "md-secret")
    answer = metadata(client, ["md-secret", "md-missing"])
    assert [(t.name, t.error_code, t.topic_id, t.partitions) for t in answer.topics] == [
        ("md-secret", TOPIC_DENIED, None, ()), ("md-missing", TOPIC_DENIED, None, ())]  # topic id zero
    # by id, ids are not secret: the real id and name null; an unknown id is UNKNOWN_TOPIC_ID
    by_id = metadata(client, [existing, uuid.uuid4()])
    assert [(t.name, t.error_code) for t in by_id.topics] == [(None, TOPIC_DENIED), (None, UNKNOWN_TOPIC_ID)]
    assert by_id.topics[0].topic_id == existing
    # the all-topics request leaves it out
    assert "md-secret" not in [t.name for t in metadata(client, None).topics]
    grant(broker, RT.TOPIC, "md-", Op.READ, pattern=PT.PREFIXED)
    described = metadata(client, ["md-secret"]).topics[0]
    assert (described.error_code, described.topic_id, len(described.partitions)) == (NONE, existing, 1)
    assert described.topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    cluster_ops = call(client, 3, 10, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_cluster_authorized_operations": True,
                                       "include_topic_authorized_operations": False})
    assert cluster_ops.cluster_authorized_operations == 0
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)  # ALTER implies DESCRIBE
    assert call(client, 3, 10, {"topics": [], "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": True,
                                "include_topic_authorized_operations": False}).cluster_authorized_operations == (
        (1 << Op.ALTER) | (1 << Op.DESCRIBE))
    assert "md-secret" in [t.name for t in metadata(client, None).topics]


def test_metadata_cluster_operations_need_describe_on_the_cluster(broker, client):
    """Kafka reports the cluster's authorized operations only to a principal that may DESCRIBE the
    cluster; anyone else gets 0, whatever else it may do there."""
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.CREATE)  # CREATE does not imply DESCRIBE
    ask = {"topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
           "include_topic_authorized_operations": False}
    assert call(client, 3, 10, ask).cluster_authorized_operations == 0
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)
    assert call(client, 3, 10, ask).cluster_authorized_operations == (1 << Op.CREATE) | (1 << Op.DESCRIBE)


def test_metadata_auto_creation_needs_create(broker, client):
    grant(broker, RT.TOPIC, "auto-a", Op.DESCRIBE)
    grant(broker, RT.TOPIC, "auto-b", Op.DESCRIBE, Op.CREATE)
    answer = metadata(client, ["auto-a", "auto-b"], allow_auto=True)
    assert [(t.name, t.error_code) for t in answer.topics] == [("auto-a", TOPIC_DENIED), ("auto-b", NONE)]
    assert broker.store.topic_by_name("auto-a") is None and broker.store.topic_by_name("auto-b") is not None
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.CREATE)
    assert metadata(client, ["auto-a"], allow_auto=True).topics[0].error_code == NONE
    # without auto-creation a describable missing topic is simply unknown
    grant(broker, RT.TOPIC, "auto-c", Op.DESCRIBE)
    assert metadata(client, ["auto-c"]).topics[0].error_code == UNKNOWN_TOPIC


# -- Produce, InitProducerId, Fetch, ListOffsets ----------------------------------------------------------


def produce(client, name, records=None, transactional_id=None, acks=-1, index=0):
    answer = call(client, 0, 9, {"transactional_id": transactional_id, "acks": acks, "timeout": 5000,
                                 "topic_data": [{"name": name, "partition_data": [
                                     {"index": index, "records": records or batch_bytes(1)}]}]})
    return answer.responses[0].partition_responses[0].error_code


def test_produce_needs_write_before_existence_and_acks(broker, client):
    topic(broker, "p-exists")
    assert produce(client, "p-exists") == TOPIC_DENIED
    assert produce(client, "p-missing") == TOPIC_DENIED
    assert produce(client, "p-exists", index=7) == TOPIC_DENIED
    grant(broker, RT.TOPIC, "p-", Op.WRITE, pattern=PT.PREFIXED)
    assert produce(client, "p-exists") == NONE
    assert produce(client, "p-exists", index=7) == UNKNOWN_TOPIC
    assert produce(client, "p-exists", acks=5) == 21  # INVALID_REQUIRED_ACKS, once authorized
    assert produce(client, "p-missing") == UNKNOWN_TOPIC
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.CREATE)  # a Produce never creates a topic, whatever the rights
    assert produce(client, "p-missing") == UNKNOWN_TOPIC
    assert broker.store.topic_by_name("p-missing") is None


def test_produce_of_transactional_batches_needs_write_on_the_transactional_id(broker, client):
    topic(broker, "tx-t")
    grant(broker, RT.TOPIC, "tx-t", Op.WRITE)
    txn = batch_bytes(1, producer_id=5, producer_epoch=0, base_sequence=0)
    txn = txn[:21] + bytes([txn[21], txn[22] | 0x10]) + txn[23:]  # the transactional attribute bit
    assert produce(client, "tx-t", txn) == TXN_DENIED  # no transactional id at all
    assert produce(client, "tx-t", txn, transactional_id="tx-1") == TXN_DENIED
    grant(broker, RT.TRANSACTIONAL_ID, "tx-1", Op.WRITE)
    assert produce(client, "tx-t", txn, transactional_id="tx-1") != TXN_DENIED


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(broker, client):
    def init(tid=None):
        return call(client, 22, 4, {"transactional_id": tid, "transaction_timeout": 60_000, "producer_id": -1,
                                    "producer_epoch": -1}).error_code

    assert init() == CLUSTER_DENIED
    grant(broker, RT.TOPIC, "ipi-", Op.WRITE, pattern=PT.PREFIXED)
    assert init() == NONE
    grant(broker, RT.TOPIC, "ipi-", Op.WRITE, pattern=PT.PREFIXED, perm=Perm.DENY)
    assert init() == CLUSTER_DENIED
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)
    assert init() == NONE
    assert init("tx") == TXN_DENIED
    grant(broker, RT.TRANSACTIONAL_ID, "tx", Op.WRITE)
    assert init("tx") == 15  # COORDINATOR_NOT_AVAILABLE: authorized, but transactions are not served


def test_fetch_and_list_offsets_check_the_topic_first(broker, client):
    topic_id = topic(broker, "fr", records=2)

    def fetch(version, ref, partition=0):
        key = "topic_id" if version >= 13 else "topic"
        answer = call(client, 1, version, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{key: ref, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                   "partition_max_bytes": 1 << 20, "log_start_offset": -1}]}]})
        return answer.responses[0].partitions[0].error_code

    def list_offsets(name, partition=0):
        answer = call(client, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
        return answer.topics[0].partitions[0].error_code

    assert (fetch(12, "fr"), fetch(12, "fr-missing"), fetch(13, topic_id), fetch(13, uuid.uuid4())) == (
        TOPIC_DENIED, TOPIC_DENIED, TOPIC_DENIED, UNKNOWN_TOPIC_ID)
    assert (list_offsets("fr"), list_offsets("fr-missing")) == (TOPIC_DENIED, TOPIC_DENIED)
    grant(broker, RT.TOPIC, "fr", Op.DESCRIBE)
    assert (fetch(12, "fr"), list_offsets("fr"), list_offsets("fr", 3)) == (TOPIC_DENIED, NONE, UNKNOWN_TOPIC)
    grant(broker, RT.TOPIC, "fr", Op.READ)
    assert (fetch(12, "fr"), fetch(13, topic_id), fetch(12, "fr", 3)) == (NONE, NONE, UNKNOWN_TOPIC)


# -- FindCoordinator and the share APIs -------------------------------------------------------------------


def test_find_coordinator_checks_the_group_or_the_cluster(broker, client):
    topic_id = topic(broker, "fc")
    key = f"g1:{__import__('base64').urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:0"

    def find(key_type, keys):
        answer = call(client, 10, 6, {"key_type": key_type, "coordinator_keys": keys})
        return [(c.error_code, c.error_message) for c in answer.coordinators]

    assert find(0, ["g1", ""]) == [(GROUP_DENIED, "Group authorization failed."),
                                   (GROUP_DENIED, "Group authorization failed.")]
    assert find(2, [key, "bad"]) == [(CLUSTER_DENIED, "Cluster authorization failed.")] * 2
    assert find(1, ["tx"]) == [(TXN_DENIED, "Transactional Id authorization failed.")]
    grant(broker, RT.GROUP, "g1", Op.READ)  # READ implies DESCRIBE
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)
    assert [code for code, _m in find(0, ["g1"])] == [NONE]
    assert [code for code, _m in find(2, [key, "bad"])] == [NONE, INVALID_REQUEST]


def heartbeat(client, group="sg", topics=("st",), epoch=0):
    return call(client, 76, 1, {"group_id": group, "member_id": MEMBER, "member_epoch": epoch, "rack_id": None,
                                "subscribed_topic_names": list(topics)})


def share_fetch(client, topic_id, epoch=0, acks=(), group="sg"):
    return call(client, 78, 1, {
        "group_id": group, "member_id": MEMBER, "share_session_epoch": epoch, "max_wait": 0, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": list(acks)}]}]})


def share_ack(client, topic_id, epoch, acks, group="sg"):
    return call(client, 79, 1, {"group_id": group, "member_id": MEMBER, "share_session_epoch": epoch, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": list(acks)}]}]})


def parts(answer):
    return [(p.partition_index, p.error_code, getattr(p, "acknowledge_error_code", None))
            for t in answer.responses for p in t.partitions]


def test_share_group_heartbeat_needs_read_on_the_group_then_describe_on_each_topic(broker, client):
    topic(broker, "st")
    assert (heartbeat(client).error_code, heartbeat(client).member_id) == (GROUP_DENIED, None)
    assert heartbeat(client, group="never-created").error_code == GROUP_DENIED
    grant(broker, RT.GROUP, "sg", Op.READ)
    assert heartbeat(client).error_code == TOPIC_DENIED
    assert heartbeat(client, topics=("st", "st-missing")).error_code == TOPIC_DENIED
    grant(broker, RT.TOPIC, "st", Op.READ)  # READ implies DESCRIBE
    answer = heartbeat(client)
    assert (answer.error_code, answer.member_id) == (NONE, MEMBER) and answer.member_epoch > 0
    heartbeat(client, epoch=-1)


def test_share_fetch_checks_the_group_before_the_session_and_the_topic_per_partition(broker, client):
    topic_id = topic(broker, "sf", records=3)
    other_id = topic(broker, "sf-other", records=1)
    # group first: even an epoch that names no session gets GROUP_AUTHORIZATION_FAILED
    refused = share_fetch(client, topic_id, epoch=7)
    assert (refused.error_code, refused.error_message, refused.responses) == (
        GROUP_DENIED, "Group authorization failed.", ())
    assert share_ack(client, topic_id, 7, []).error_code == GROUP_DENIED
    grant(broker, RT.GROUP, "sg", Op.READ)
    assert share_fetch(client, topic_id, epoch=7).error_code == 122  # SHARE_SESSION_NOT_FOUND: session step next
    grant(broker, RT.TOPIC, "sf", Op.READ)
    assert heartbeat(client, topics=("sf",)).error_code == NONE
    answer = share_fetch(client, topic_id)
    assert answer.error_code == NONE and parts(answer) == [(0, NONE, NONE)]
    assert [(a.first_offset, a.last_offset) for a in answer.responses[0].partitions[0].acquired_records] == [(0, 2)]
    # a topic without READ: its partitions answer TOPIC_AUTHORIZATION_FAILED and nothing is acquired
    denied = share_fetch(client, other_id, epoch=1)
    assert parts(denied) == [(0, TOPIC_DENIED, NONE)]
    assert broker.share.manager.share_partition("sg", other_id, 0) is None  # never even loaded
    # a piggy-backed acknowledgement on a refused topic is refused (29 before any existence check)
    ack = {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
    refused = share_fetch(client, other_id, epoch=2, acks=[ack])
    assert parts(refused) == [(0, TOPIC_DENIED, TOPIC_DENIED)]
    # READ taken away mid-session: the session's partitions of that topic are refused, records stay acquired
    broker.call(broker.broker.authorizer.delete_acls([AclBindingFilter(resource_type=RT.TOPIC, name="sf")]))
    acked = share_ack(client, topic_id, 3, [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}])
    assert (acked.error_code, parts(acked)) == (NONE, [(0, TOPIC_DENIED, None)])
    share_part = broker.share.manager.share_partition("sg", topic_id, 0)
    assert share_part.start_offset == 0  # the acknowledgement was not applied
    grant(broker, RT.TOPIC, "sf", Op.READ)
    acked = share_ack(client, topic_id, 4, [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}])
    assert parts(acked) == [(0, NONE, None)] and share_part.start_offset == 3
    heartbeat(client, topics=("sf",), epoch=-1)


def test_share_group_describe(broker, client):
    topic(broker, "sd")
    grant(broker, RT.GROUP, "sd-g", Op.READ)
    grant(broker, RT.TOPIC, "sd", Op.READ)
    assert heartbeat(client, group="sd-g", topics=("sd",)).error_code == NONE
    for _ in range(20):  # the assignment follows on a later heartbeat (bounded)
        answer = heartbeat(client, group="sd-g", topics=("sd",), epoch=1)
        if answer.assignment is not None or answer.member_epoch > 1:
            break

    def describe(*groups):
        answer = call(client, 77, 1, {"group_ids": list(groups), "include_authorized_operations": True})
        return [(g.group_id, g.error_code, g.error_message, len(g.members), g.authorized_operations)
                for g in answer.groups]

    assert describe("sd-g", "sd-missing") == [
        ("sd-g", NONE, None, 1, (1 << Op.READ) | (1 << Op.DESCRIBE)), ("sd-missing", GROUP_DENIED, None, 0, -(2**31))]
    broker.call(broker.broker.authorizer.delete_acls([AclBindingFilter(resource_type=RT.TOPIC)]))
    assert describe("sd-g") == [("sd-g", TOPIC_DENIED,
                                 "The group has described topic(s) that the client is not authorized to describe.",
                                 0, -(2**31))]
    grant(broker, RT.TOPIC, "sd", Op.READ)
    heartbeat(client, group="sd-g", topics=("sd",), epoch=-1)


# -- the share-group admin APIs --------------------------------------------------------------------------


def test_list_groups_filters_and_delete_groups_needs_delete(broker, client):
    topic(broker, "lg")
    grant(broker, RT.GROUP, "lg-", Op.READ, pattern=PT.PREFIXED)
    grant(broker, RT.TOPIC, "lg", Op.READ)
    for group in ("lg-a", "lg-b"):
        assert heartbeat(client, group=group, topics=("lg",)).error_code == NONE
        assert heartbeat(client, group=group, topics=("lg",), epoch=-1).error_code == NONE
    broker.call(broker.broker.authorizer.delete_acls([AclBindingFilter()]))

    def listed():
        return sorted(g.group_id for g in call(client, 16, 5, {"states_filter": [], "types_filter": []}).groups
                      if g.group_id.startswith("lg-"))

    assert listed() == []
    grant(broker, RT.GROUP, "lg-a", Op.DESCRIBE)
    assert listed() == ["lg-a"]
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)
    assert listed() == ["lg-a", "lg-b"]
    deleted = call(client, 42, 2, {"groups_names": ["lg-a", "lg-b", "lg-never"]}).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("lg-a", GROUP_DENIED), ("lg-b", GROUP_DENIED),
                                                             ("lg-never", GROUP_DENIED)]
    grant(broker, RT.GROUP, "lg-a", Op.DELETE)
    deleted = call(client, 42, 2, {"groups_names": ["lg-a", "lg-b"]}).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("lg-a", NONE), ("lg-b", GROUP_DENIED)]


def test_share_group_offsets_admin_apis(broker, client):
    topic(broker, "so", records=2)
    topic(broker, "so-hidden", records=1)
    grant(broker, RT.GROUP, "so-g", Op.READ)
    grant(broker, RT.TOPIC, "so", Op.READ)
    grant(broker, RT.TOPIC, "so-hidden", Op.READ)
    for name in ("so", "so-hidden"):
        assert heartbeat(client, group="so-g", topics=(name,)).error_code == NONE
        assert heartbeat(client, group="so-g", topics=(name,), epoch=-1).error_code == NONE
    broker.call(broker.broker.authorizer.delete_acls([AclBindingFilter()]))

    def describe(topics):
        return call(client, 90, 1, {"groups": [{"group_id": "so-g", "topics": topics}]}).groups[0]

    denied = describe(None)
    assert (denied.error_code, denied.error_message, denied.topics) == (GROUP_DENIED, "Group authorization failed.", ())
    grant(broker, RT.GROUP, "so-g", Op.DESCRIBE)
    grant(broker, RT.TOPIC, "so", Op.DESCRIBE)
    assert [t.topic_name for t in describe(None).topics] == ["so"]  # the undescribable topic is left out
    named = describe([{"topic_name": "so-hidden", "partitions": [0]}, {"topic_name": "so", "partitions": [0]}])
    assert [(t.topic_name, t.topic_id, [(p.error_code, p.start_offset) for p in t.partitions])
            for t in named.topics] == [("so", topic(broker, "so"), [(NONE, -1)]),  # no state held yet: -1
                                       ("so-hidden", None, [(TOPIC_DENIED, -1)])]  # topic id zero

    def alter(name):
        answer = call(client, 91, 0, {"group_id": "so-g", "topics": [
            {"topic_name": name, "partitions": [{"partition_index": 0, "start_offset": 1}]}]})
        return answer.error_code, [(t.topic_name, p.error_code) for t in answer.responses for p in t.partitions]

    assert alter("so") == (GROUP_DENIED, [("so", GROUP_DENIED)])  # READ on the group is needed, DESCRIBE is not enough
    grant(broker, RT.GROUP, "so-g", Op.READ)
    assert alter("so-hidden") == (NONE, [("so-hidden", TOPIC_DENIED)])
    assert alter("so-missing") == (NONE, [("so-missing", TOPIC_DENIED)])
    grant(broker, RT.TOPIC, "so-missing", Op.READ)
    assert alter("so-missing") == (NONE, [("so-missing", UNKNOWN_TOPIC)])

    def delete(*names):
        answer = call(client, 92, 0, {"group_id": "so-g", "topics": [{"topic_name": n} for n in names]})
        return answer.error_code, [(t.topic_name, t.error_code) for t in answer.responses]

    assert delete("so") == (GROUP_DENIED, [])
    grant(broker, RT.GROUP, "so-g", Op.DELETE)
    assert delete("so-hidden") == (NONE, [("so-hidden", TOPIC_DENIED)])
    grant(broker, RT.TOPIC, "so", Op.READ)
    assert delete("so", "so-hidden") == (NONE, [("so", NONE), ("so-hidden", TOPIC_DENIED)])


# -- topic administration and configs -------------------------------------------------------------------


def test_create_topics_needs_create_and_configs_need_describe_configs(broker, client):
    def create(*names, configs=()):
        answer = call(client, 19, 7, {"timeout": 5000, "validate_only": False, "topics": [
            {"name": n, "num_partitions": 1, "replication_factor": -1, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in configs]} for n in names]})
        return [(t.name, t.error_code, t.error_message, t.topic_config_error_code, t.configs) for t in answer.topics]

    assert create("ct-a", "ct-a", "ct-b") == [("ct-a", INVALID_REQUEST, "Duplicate topic name.", 0, ()),
                                              ("ct-b", TOPIC_DENIED, "Authorization failed.", 0, ())]
    grant(broker, RT.TOPIC, "ct-b", Op.CREATE)
    [(name, code, _m, config_code, configs)] = create("ct-b", configs=[("retention.ms", "1000")])
    assert (name, code, config_code, configs) == ("ct-b", NONE, TOPIC_DENIED, ())
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.CREATE)
    grant(broker, RT.TOPIC, "ct-c", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    [(name, code, _m, config_code, configs)] = create("ct-c", configs=[("retention.ms", "1000")])
    assert (code, config_code, [(c.name, c.value) for c in configs if c.config_source == 1]) == (
        NONE, NONE, [("retention.ms", "1000")])


def test_delete_topics_delete_records_and_create_partitions(broker, client):
    existing = topic(broker, "dt", records=2)

    def delete_topics(*refs):
        answer = call(client, 20, 6, {"timeout": 5000, "topics": [
            {"name": None, "topic_id": r} if isinstance(r, uuid.UUID) else {"name": r, "topic_id": ZERO_UUID}
            for r in refs]})
        return [(t.name, t.topic_id, t.error_code) for t in answer.responses]

    def delete_records(name):
        answer = call(client, 21, 2, {"timeout": 5000, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "offset": 1}]}]})
        return answer.topics[0].partitions[0].error_code

    def grow(name):
        answer = call(client, 37, 3, {"timeout": 5000, "validate_only": True,
                                      "topics": [{"name": name, "count": 2, "assignments": None}]})
        return answer.results[0].error_code

    assert delete_topics("dt", "dt-missing", existing, uuid.UUID(int=5)) == [  # (a zero topic id reads as None)
        ("dt", None, TOPIC_DENIED), ("dt-missing", None, TOPIC_DENIED), (None, existing, TOPIC_DENIED),
        (None, uuid.UUID(int=5), UNKNOWN_TOPIC_ID)]
    assert (delete_records("dt"), delete_records("dt-missing"), grow("dt"), grow("dt-missing")) == (TOPIC_DENIED,) * 4
    grant(broker, RT.TOPIC, "dt", Op.DESCRIBE)
    assert delete_topics(existing) == [("dt", existing, TOPIC_DENIED)]  # describable now: named, still no DELETE
    grant(broker, RT.TOPIC, "dt", Op.ALTER)
    assert grow("dt") == NONE
    grant(broker, RT.TOPIC, "dt", Op.DELETE)
    assert delete_records("dt") == NONE
    assert delete_topics("dt") == [("dt", existing, NONE)]


def test_configs_check_each_resource_by_its_type(broker, client):
    topic(broker, "cf")
    resources = [(2, "cf"), (4, "1"), (32, "cf-g")]

    def describe():
        answer = call(client, 32, 4, {"include_synonyms": False, "include_documentation": False, "resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": None} for t, n in resources]})
        return [(r.error_code, r.error_message, len(r.configs)) for r in answer.results]

    def alter():
        answer = call(client, 44, 1, {"validate_only": True, "resources": [
            {"resource_type": 2, "resource_name": "cf", "configs": [{"name": "retention.ms", "config_operation": 0,
                                                                     "value": "1000"}]},
            {"resource_type": 32, "resource_name": "cf-g", "configs": [
                {"name": "share.delivery.count.limit", "config_operation": 0, "value": "4"}]}]})
        return [r.error_code for r in answer.responses]

    assert describe() == [(TOPIC_DENIED, "Topic authorization failed.", 0),
                          (CLUSTER_DENIED, "Cluster authorization failed.", 0),
                          (GROUP_DENIED, "Group authorization failed.", 0)]
    logger = call(client, 32, 4, {"include_synonyms": False, "include_documentation": False, "resources": [
        {"resource_type": 8, "resource_name": "1", "configuration_keys": None}]}).results[0]
    assert logger.error_code == CLUSTER_DENIED  # BROKER_LOGGER is authorized on the cluster before anything else
    assert alter() == [TOPIC_DENIED, GROUP_DENIED]
    grant(broker, RT.TOPIC, "cf", Op.ALTER_CONFIGS)
    grant(broker, RT.GROUP, "cf-g", Op.DESCRIBE_CONFIGS)
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)
    assert [code for code, _m, _n in describe()] == [NONE, NONE, NONE]
    assert alter() == [NONE, GROUP_DENIED]


def test_legacy_alter_configs_needs_alter_configs_as_incremental_does(broker, client):
    topic(broker, "lcf")

    def alter(validate_only=True):
        answer = call(client, 33, 2, {"validate_only": validate_only, "resources": [
            {"resource_type": 2, "resource_name": "lcf", "configs": [{"name": "retention.ms", "value": "1000"}]},
            {"resource_type": 4, "resource_name": "1", "configs": []}]})
        return [(r.error_code, r.error_message) for r in answer.responses]

    assert alter() == [(TOPIC_DENIED, "Topic authorization failed."), (CLUSTER_DENIED, "Cluster authorization failed.")]
    grant(broker, RT.TOPIC, "lcf", Op.ALTER_CONFIGS)
    assert alter(validate_only=False)[0] == (NONE, None)
    assert broker.store.topic_configs("lcf") == {"retention.ms": "1000"}


# -- the ACL APIs themselves -------------------------------------------------------------------------------


def creation(name, pattern=PT.LITERAL, op=Op.READ, perm=Perm.ALLOW, rt=RT.TOPIC, principal="User:alice", host="*"):
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def acl_filter(rt=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None, op=Op.ANY, perm=Perm.ANY):
    return {"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def test_acl_apis_need_alter_or_describe_on_the_cluster(broker, client):
    created = call(client, 30, 3, {"creations": [creation("a")]}).results
    assert [(r.error_code, r.error_message) for r in created] == [(CLUSTER_DENIED, None)]
    described = call(client, 29, 3, acl_filter())
    assert (described.error_code, described.resources) == (CLUSTER_DENIED, ())
    deleted = call(client, 31, 3, {"filters": [acl_filter()]}).filter_results
    assert [r.error_code for r in deleted] == [CLUSTER_DENIED]
    # an ALTER granted only to another host does not count
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER, host="10.0.0.7")
    assert call(client, 30, 3, {"creations": [creation("a")]}).results[0].error_code == CLUSTER_DENIED
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER, host=HOST)
    assert call(client, 30, 3, {"creations": [creation("a")]}).results[0].error_code == NONE
    assert call(client, 29, 3, acl_filter()).error_code == NONE  # ALTER implies DESCRIBE


def test_create_describe_delete_acls_on_the_wire(broker, client):
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)
    created = call(client, 30, 3, {"creations": [
        creation("orders"), creation("ord", PT.PREFIXED, Op.WRITE, Perm.DENY), creation("*", op=Op.DESCRIBE),
        creation("x", PT.MATCH), creation("other", rt=RT.CLUSTER), creation("", principal="User:bob"),
        creation("y", principal="bob"), creation("z", op=Op.ANY), creation("orders")]}).results
    assert [(r.error_code, r.error_message) for r in created] == [
        (NONE, None), (NONE, None), (NONE, None), (INVALID_REQUEST, "Invalid patternType MATCH"),
        (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (INVALID_REQUEST, "Invalid empty resource name"),
        (INVALID_REQUEST, "Could not parse principal from `bob` (no colon is present separating the principal "
                          "type from the principal name)"),
        (INVALID_REQUEST, "Invalid operation ANY"), (NONE, None)]

    def described(**kw):
        answer = call(client, 29, 3, acl_filter(**kw))
        assert answer.error_code == NONE
        return sorted((r.resource_name, r.pattern_type, a.principal, a.operation, a.permission_type)
                      for r in answer.resources for a in r.acls if r.resource_type == RT.TOPIC)

    assert described(rt=RT.TOPIC, name="orders", pattern=PT.MATCH) == [
        ("*", PT.LITERAL, "User:alice", Op.DESCRIBE, Perm.ALLOW), ("ord", PT.PREFIXED, "User:alice", Op.WRITE, Perm.DENY),
        ("orders", PT.LITERAL, "User:alice", Op.READ, Perm.ALLOW)]
    assert described(rt=RT.TOPIC, name="ord", pattern=PT.PREFIXED) == [
        ("ord", PT.PREFIXED, "User:alice", Op.WRITE, Perm.DENY)]
    assert described(perm=Perm.DENY) == [("ord", PT.PREFIXED, "User:alice", Op.WRITE, Perm.DENY)]
    # an id Kafka does not know (not 0) parses as UNKNOWN, which the parser lets through: DescribeAcls
    # (no filter check in Kafka) matches nothing, DeleteAcls refuses that filter
    for unknown in (acl_filter(rt=99), acl_filter(pattern=99), acl_filter(op=99), acl_filter(perm=99)):
        bad = call(client, 29, 3, unknown)
        assert (bad.error_code, bad.error_message, bad.resources) == (NONE, None, ())
    results = call(client, 31, 3, {"filters": [acl_filter(rt=RT.TOPIC, name="orders", pattern=PT.LITERAL),
                                               acl_filter(op=99)]}).filter_results
    assert [(r.error_code, r.error_message, [(m.resource_name, m.operation) for m in r.matching_acls])
            for r in results] == [(NONE, None, [("orders", Op.READ)]), (INVALID_REQUEST, "Unknown entryFilter.", [])]
    assert ("orders", PT.LITERAL, "User:alice", Op.READ, Perm.ALLOW) not in described()


@pytest.mark.parametrize("field", ["resource_type", "resource_pattern_type", "operation", "permission_type"])
def test_create_acls_with_an_unknown_element_fails_request_validation_and_closes(broker, client, field):
    """Kafka's CreateAclsRequest.validate refuses a creation holding an UNKNOWN (0) element while the
    request is parsed: the broker closes the connection without an answer, and nothing is created."""
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)
    before = len(broker.broker.authorizer)
    client.send_raw(client.frame(30, 3, build(request_class(30, 3), {"creations": [
        creation("fine"), {**creation("bad"), field: 0}]})))
    assert client.is_closed_by_peer()
    assert len(broker.broker.authorizer) == before


@pytest.mark.parametrize("field", ["resource_type_filter", "pattern_type_filter", "operation", "permission_type"])
def test_describe_and_delete_acls_with_an_unknown_filter_element_close_the_connection(broker, client, field):
    """Kafka's DescribeAclsRequest / DeleteAclsRequest refuse an UNKNOWN (0) filter element while the
    request is parsed: the connection closes without an answer, and no filter of it runs."""
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)
    before = len(broker.broker.authorizer)
    client.send_raw(client.frame(29, 3, build(request_class(29, 3), {**acl_filter(), field: 0})))
    assert client.is_closed_by_peer()
    other = RawClient(broker.broker.port)
    try:
        other.send_raw(other.frame(31, 3, build(request_class(31, 3), {"filters": [
            acl_filter(), {**acl_filter(), field: 0}]})))
        assert other.is_closed_by_peer()
    finally:
        other.close()
    assert len(broker.broker.authorizer) == before


def test_create_acls_with_an_out_of_range_element_is_an_invalid_creation(broker, client):
    """An id Kafka does not know (not 0) parses as UNKNOWN and is refused for that creation only."""
    grant(broker, RT.CLUSTER, CLUSTER_NAME, Op.ALTER)
    created = call(client, 30, 3, {"creations": [creation("fine"), creation("bad", rt=99)]}).results
    assert [(r.error_code, r.error_message) for r in created] == [
        (NONE, None), (INVALID_REQUEST, "Invalid resourceType UNKNOWN")]


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path):
    plain = BrokerThread(tmp_path)
    client = RawClient(plain.broker.port)
    try:
        created = call(client, 30, 3, {"creations": [creation("a"), creation("b")]}).results
        assert [(r.error_code, r.error_message) for r in created] == [(SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        described = call(client, 29, 2, acl_filter())
        assert (described.error_code, described.error_message) == (SECURITY_DISABLED,
                                                                    "No Authorizer is configured on the broker")
        deleted = call(client, 31, 1, {"filters": [acl_filter()]}).filter_results
        assert [(r.error_code, r.error_message) for r in deleted] == [(SECURITY_DISABLED, "No Authorizer is configured.")]
    finally:
        client.close()
        plain.stop()


# -- other principals and super users (a RequestContext built here) ----------------------------------------


def test_other_principals_and_super_users(broker, client):
    from sharegroup.server.handlers import metadata as metadata_handler

    topic(broker, "pr")
    grant(broker, RT.TOPIC, "pr", Op.DESCRIBE, principal="User:alice")
    grant(broker, RT.TOPIC, "pr", Op.ALL, principal="User:*", perm=Perm.DENY, host="10.0.0.9")
    request = build(request_class(3, 12), {"topics": [{"name": "pr", "topic_id": ZERO_UUID}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})

    async def ask(principal: str, peer: str = "127.0.0.1:50000"):
        ctx = RequestContext(broker.broker, 3, 12, 1, "test", peer, principal=principal)
        return (await metadata_handler.handle(ctx, request)).topics[0].error_code

    assert broker.call(ask("User:alice")) == NONE
    assert broker.call(ask("User:alice", "10.0.0.9:50000")) == TOPIC_DENIED  # the wildcard DENY from that host wins
    assert broker.call(ask("User:bob")) == TOPIC_DENIED
    assert broker.call(ask("User:admin", "10.0.0.9:50000")) == NONE  # super.users beats every DENY
    assert metadata(client, ["pr"]).topics[0].error_code == TOPIC_DENIED  # this connection is User:ANONYMOUS


def test_alter_configs_shape_errors_come_before_authorization(broker, client):
    """Kafka's broker refuses a key given twice or a null value before the request reaches the controller,
    which is where ALTER_CONFIGS is checked: such a resource is INVALID_REQUEST even unauthorized."""
    topic(broker, "cs")
    answer = call(client, 44, 1, {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": "cs", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1"},
            {"name": "retention.ms", "config_operation": 0, "value": "2"}]},
        {"resource_type": 32, "resource_name": "cs-g", "configs": [
            {"name": "share.delivery.count.limit", "config_operation": 0, "value": None}]},
        {"resource_type": 32, "resource_name": "cs-h", "configs": [
            {"name": "share.delivery.count.limit", "config_operation": 2, "value": "3"}]}]})
    assert [(r.error_code, r.error_message) for r in answer.responses] == [
        (INVALID_REQUEST, "Error due to duplicate config keys"),
        (INVALID_REQUEST, "Null value not supported for : share.delivery.count.limit"),
        (GROUP_DENIED, "Group authorization failed.")]  # an APPEND is judged after authorization
