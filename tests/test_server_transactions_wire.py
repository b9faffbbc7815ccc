"""The transactional APIs by raw kio requests (what real clients never send on purpose): misuse of the
state machine and Kafka's error codes per version, KIP-890 verification of transactional produce,
AddPartitionsToTxn's batched form, RequireStable, the operators' APIs, and ACLs."""

from __future__ import annotations

import datetime

import pytest

from sharegroup.server.authorization import AclOperation as Op, ResourceType as RT
from sharegroup.server.codec import build, request_class
from sharegroup.server.security.acls import AclBinding, AclBindingFilter, AclPermissionType as Perm, PatternType as PT
from tests.server_harness import BrokerThread, RawClient, batch_bytes

NONE, UNKNOWN_TOPIC, INVALID_REQUEST = 0, 3, 42
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_MAPPING, INVALID_TIMEOUT = 47, 48, 49, 50
CONCURRENT, TXN_DENIED, OPERATION_NOT_ATTEMPTED, UNSTABLE, PRODUCER_FENCED = 51, 53, 55, 88, 90
NOT_FOUND, ABORTABLE, TOPIC_DENIED, GROUP_DENIED = 105, 120, 29, 30
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("txn-wire"), share=True, transactions=True)
    for name in ("a", "b"):
        b.call(b.store.create_topic(name, 2))
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def call(client: RawClient, key: int, version: int, data: dict):
    return client.request(key, version, build(request_class(key, version), data))


_ids = iter(range(1_000_000))


def init(client, tid: str | None = None, version: int = 4, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1):
    tid = tid if tid is not None else f"tx-{next(_ids)}"
    answer = call(client, 22, version, {"transactional_id": tid, "transaction_timeout": timeout_ms,
                                        "producer_id": pid, "producer_epoch": epoch})
    return tid, answer.error_code, answer.producer_id, answer.producer_epoch


def add(client, tid, pid, epoch, partitions, version: int = 3):
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    answer = call(client, 24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                                            {"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.partition_error_code for t in answer.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(client, tid, pid, epoch, commit: bool, version: int = 3) -> int:
    return call(client, 26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                      "committed": commit}).error_code


def txn_batch(pid: int, epoch: int, seq: int) -> bytes:
    """One transactional RecordBatch v2 (attributes bit 4) of one record."""
    import io

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch

    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=0x10,
                                        records=(Record(attributes=0, timestamp=now, offset=0, key=None, value=b"v",
                                                        headers=()),)))
    return buf.getvalue()


def produce(client, topic, partition, tid, pid, epoch, seq=0, version=9) -> int:
    answer = call(client, 0, version, {"transactional_id": tid, "acks": -1, "timeout": datetime.timedelta(seconds=5),
                                       "topic_data": [{"name": topic, "partition_data": [
                                           {"index": partition, "records": txn_batch(pid, epoch, seq)}]}]})
    return answer.responses[0].partition_responses[0].error_code


def test_find_coordinator_answers_transactional_ids_single_and_batched(broker, client):
    single = call(client, 10, 3, {"key": "tx", "key_type": 1})
    assert (single.error_code, single.node_id, single.port) == (NONE, 1, broker.broker.port)
    batched = call(client, 10, 4, {"key_type": 1, "coordinator_keys": ["tx-1", ""]})
    assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [("tx-1", NONE, 1),
                                                                               ("", INVALID_REQUEST, -1)]


def test_init_producer_id_bumps_the_epoch_and_checks_the_timeout(client):
    tid, code, pid, epoch = init(client)
    assert (code, epoch) == (NONE, 0)
    assert init(client, tid)[1:] == (NONE, pid, 1)
    assert init(client, timeout_ms=900_001)[1] == INVALID_TIMEOUT
    # KIP-360 with a stale epoch: PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before
    assert init(client, tid, version=4, pid=pid, epoch=0)[1] == PRODUCER_FENCED
    assert init(client, tid, version=3, pid=pid, epoch=0)[1] == INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_without_a_transaction_is_invalid_txn_state(client, commit):
    tid, _, pid, epoch = init(client)
    assert end(client, tid, pid, epoch, commit) == INVALID_TXN_STATE


def test_wrong_epoch_and_unknown_ids_per_version(client):
    tid, _, pid, epoch = init(client)
    assert end(client, tid, pid, epoch + 1, True, version=2) == PRODUCER_FENCED
    assert end(client, tid, pid, epoch + 1, True, version=1) == INVALID_PRODUCER_EPOCH
    assert end(client, tid, pid + 1, epoch, True) == INVALID_MAPPING
    assert end(client, "never-initialized", pid, epoch, True) == INVALID_MAPPING


def test_add_partitions_after_fencing_is_producer_fenced(client):
    tid, _, pid, epoch = init(client)
    assert add(client, tid, pid, epoch, [("a", 0)]) == {("a", 0): NONE}
    init(client, tid)  # a new instance: the open transaction is aborted, the zombie fenced
    assert add(client, tid, pid, epoch, [("a", 1)]) == {("a", 1): PRODUCER_FENCED}
    assert add(client, tid, pid, epoch, [("a", 1)], version=1) == {("a", 1): INVALID_PRODUCER_EPOCH}
    assert end(client, tid, pid, epoch, True) == PRODUCER_FENCED


def test_add_partitions_with_an_unknown_partition_adds_nothing(broker, client):
    tid, _, pid, epoch = init(client)
    assert add(client, tid, pid, epoch, [("a", 0), ("a", 7), ("nope", 0)]) == {
        ("a", 0): OPERATION_NOT_ATTEMPTED, ("a", 7): UNKNOWN_TOPIC, ("nope", 0): UNKNOWN_TOPIC}
    assert broker.transactions.coordinator.get(tid).partitions == frozenset()


def test_batched_add_partitions_v4_adds_and_verifies(broker, client):
    tid, _, pid, epoch = init(client)

    def batch(verify_only: bool, partition: int):
        answer = call(client, 24, 5, {"transactions": [{"transactional_id": tid, "producer_id": pid,
                                                        "producer_epoch": epoch, "verify_only": verify_only,
                                                        "topics": [{"name": "b", "partitions": [partition]}]}]})
        assert answer.error_code == NONE
        (txn,) = answer.results_by_transaction
        return txn.topic_results[0].results_by_partition[0].partition_error_code

    assert batch(True, 0) == ABORTABLE  # not in the transaction
    assert batch(False, 0) == NONE
    assert batch(True, 0) == NONE
    assert batch(True, 1) == ABORTABLE
    assert broker.transactions.coordinator.get(tid).partitions == {("b", 0)}


def test_transactional_produce_must_go_to_a_partition_of_the_ongoing_transaction(broker, client):
    tid, _, pid, epoch = init(client)
    assert produce(client, "a", 1, tid, pid, epoch) == INVALID_TXN_STATE
    assert produce(client, "a", 1, tid, pid, epoch, version=11) == ABORTABLE
    assert add(client, tid, pid, epoch, [("a", 1)]) == {("a", 1): NONE}
    assert produce(client, "a", 1, tid, pid, epoch) == NONE
    assert produce(client, "a", 1, "other-id", pid, epoch, seq=1) == INVALID_MAPPING
    assert end(client, tid, pid, epoch, False) == NONE
    init(client, tid)
    assert produce(client, "a", 1, tid, pid, epoch, seq=1) == INVALID_PRODUCER_EPOCH  # the fenced zombie


def test_a_producer_with_an_open_transaction_cannot_write_outside_it(client):
    tid, _, pid, epoch = init(client)
    assert add(client, tid, pid, epoch, [("b", 0)]) == {("b", 0): NONE}
    assert produce(client, "b", 0, tid, pid, epoch) == NONE
    plain = call(client, 0, 9, {"transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
                                "topic_data": [{"name": "b", "partition_data": [{"index": 0, "records": batch_bytes(
                                    1, producer_id=pid, producer_epoch=epoch, base_sequence=1)}]}]})
    assert plain.responses[0].partition_responses[0].error_code == INVALID_TXN_STATE
    described = call(client, 61, 0, {"topics": [{"name": "b", "partition_indexes": [0]}, {"name": "nope",
                                                                                        "partition_indexes": [0]}]})
    (ours,) = [p for p in described.topics[0].partitions[0].active_producers if p.producer_id == pid]
    assert ours.producer_epoch == epoch and ours.current_txn_start_offset >= 0 and ours.last_sequence == 0
    assert described.topics[1].partitions[0].error_code == UNKNOWN_TOPIC
    assert end(client, tid, pid, epoch, True) == NONE
    described = call(client, 61, 0, {"topics": [{"name": "b", "partition_indexes": [0]}]})
    (ours,) = [p for p in described.topics[0].partitions[0].active_producers if p.producer_id == pid]
    assert ours.current_txn_start_offset == -1  # the COMMIT marker closed it


def test_txn_offset_commit_needs_add_offsets_and_is_unstable_until_committed(client):
    tid, _, pid, epoch = init(client)
    assert add(client, tid, pid, epoch, [("a", 0)]) == {("a", 0): NONE}

    def commit_offsets(version: int = 3) -> int:
        answer = call(client, 28, version, {"transactional_id": tid, "group_id": "g-txn", "producer_id": pid,
                                            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                            "group_instance_id": None, "topics": [{"name": "a", "partitions": [
                                                {"partition_index": 0, "committed_offset": 5,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        return answer.topics[0].partitions[0].error_code

    def fetch(require_stable: bool):
        answer = call(client, 9, 7, {"group_id": "g-txn", "topics": [{"name": "a", "partition_indexes": [0]}],
                                     "require_stable": require_stable})
        part = answer.topics[0].partitions[0]
        return part.error_code, part.committed_offset

    assert commit_offsets() == INVALID_TXN_STATE
    assert commit_offsets(version=4) == ABORTABLE
    assert call(client, 25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                "group_id": "g-txn"}).error_code == NONE
    assert commit_offsets() == NONE
    assert fetch(require_stable=True) == (UNSTABLE, -1)
    assert fetch(require_stable=False) == (NONE, -1)
    assert end(client, tid, pid, epoch, True) == NONE
    assert fetch(require_stable=True) == (NONE, 5)


def test_describe_and_list_transactions(broker, client):
    tid, _, pid, epoch = init(client, "listed-tx")
    assert add(client, tid, pid, epoch, [("b", 1)]) == {("b", 1): NONE}
    described = call(client, 65, 0, {"transactional_ids": [tid, "no-such-id"]}).transaction_states
    assert [(d.transactional_id, d.error_code, d.transaction_state) for d in described] == [
        (tid, NONE, "Ongoing"), ("no-such-id", NOT_FOUND, "")]
    assert ([(t.topic, t.partitions) for t in described[0].topics], described[0].producer_id,
            described[0].transaction_timeout) == ([("b", (1,))], pid, datetime.timedelta(seconds=60))
    listed = call(client, 66, 2, {"state_filters": ["Ongoing", "Nonsense"], "producer_id_filters": [pid],
                                  "duration_filter": -1, "transactional_id_pattern": "listed-.*"})
    assert (listed.error_code, list(listed.unknown_state_filters)) == (NONE, ["Nonsense"])
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
        (tid, pid, "Ongoing")]
    assert call(client, 66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                "transactional_id_pattern": "("}).error_code == 128
    assert end(client, tid, pid, epoch, False) == NONE


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("txn-acl"), share=True, transactions=True,
                     overrides={"authorizer.class.name": STANDARD, "super.users": "User:admin"})
    b.call(b.store.create_topic("s", 1))
    yield b
    b.stop()


def grant(broker, rt: RT, name: str, *ops: Op) -> None:
    bindings = [AclBinding(rt, name, PT.LITERAL, "User:ANONYMOUS", "*", op, Perm.ALLOW) for op in ops]
    assert broker.call(broker.broker.authorizer.create_acls(bindings)) == [None] * len(ops)


def test_transactional_apis_under_acls(secured):
    secured.call(secured.broker.authorizer.delete_acls([AclBindingFilter()]))
    client = RawClient(secured.broker.port)
    try:
        assert call(client, 10, 3, {"key": "acl-tx", "key_type": 1}).error_code == TXN_DENIED
        assert init(client, "acl-tx")[1] == TXN_DENIED
        grant(secured, RT.TRANSACTIONAL_ID, "acl-tx", Op.WRITE)  # WRITE implies DESCRIBE
        assert call(client, 10, 3, {"key": "acl-tx", "key_type": 1}).error_code == NONE
        tid, code, pid, epoch = init(client, "acl-tx")
        assert code == NONE
        assert add(client, tid, pid, epoch, [("s", 0)]) == {("s", 0): TOPIC_DENIED}
        grant(secured, RT.TOPIC, "s", Op.WRITE)
        assert add(client, tid, pid, epoch, [("s", 0)]) == {("s", 0): NONE}
        assert call(client, 25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                    "group_id": "acl-g"}).error_code == GROUP_DENIED
        batched = call(client, 24, 4, {"transactions": [{"transactional_id": tid, "producer_id": pid,
                                                         "producer_epoch": epoch, "verify_only": True,
                                                         "topics": [{"name": "s", "partitions": [0]}]}]})
        assert batched.error_code == 31  # brokers only: CLUSTER_ACTION
        assert call(client, 65, 0, {"transactional_ids": ["other-tx"]}).transaction_states[0].error_code == TXN_DENIED
        assert end(client, tid, pid, epoch, True) == NONE
    finally:
        client.close()


def markers(client, pid, epoch, commit, partitions, coordinator_epoch=-1):
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    answer = call(client, 27, 1, {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                                               "coordinator_epoch": coordinator_epoch,
                                               "topics": [{"name": t, "partition_indexes": ps}
                                                          for t, ps in topics.items()]}]})
    [marker] = answer.markers
    assert marker.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions}


def test_write_txn_markers_aborts_a_hanging_transaction_in_its_partition(broker, client):
    tid, _, pid, epoch = init(client)
    assert add(client, tid, pid, epoch, [("a", 1)]) == {("a", 1): NONE}
    assert produce(client, "a", 1, tid, pid, epoch) == NONE
    topic_id = broker.store.topic_by_name("a").topic_id
    end_offset = broker.store.log_end_offset(topic_id, 1)
    assert broker.store.last_stable_offset(topic_id, 1) < end_offset  # the transaction holds the LSO
    answers = markers(client, pid, epoch, False, [("a", 1), ("a", 9), ("nope", 0)])
    assert answers == {("a", 1): NONE, ("a", 9): UNKNOWN_TOPIC, ("nope", 0): UNKNOWN_TOPIC}
    assert broker.store.last_stable_offset(topic_id, 1) == broker.store.log_end_offset(topic_id, 1) == end_offset + 1
    assert markers(client, pid, epoch - 1, False, [("a", 1)]) == {("a", 1): INVALID_PRODUCER_EPOCH}
    assert markers(client, pid, epoch, False, [("a", 1)]) == {("a", 1): NONE}  # again: harmless
    assert end(client, tid, pid, epoch, False) == NONE


def test_write_txn_markers_needs_alter_or_cluster_action_on_the_cluster(secured):
    secured.call(secured.broker.authorizer.delete_acls([AclBindingFilter()]))
    client = RawClient(secured.broker.port)
    try:
        assert markers(client, 7, 0, False, [("s", 0), ("s", 5)]) == {("s", 0): 31, ("s", 5): 31}
        grant(secured, RT.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
        assert markers(client, 7, 0, False, [("s", 0)]) == {("s", 0): NONE}
    finally:
        secured.call(secured.broker.authorizer.delete_acls([AclBindingFilter()]))
        client.close()
