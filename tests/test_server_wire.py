"""The wire layer driven by raw kio requests: every served API and version, exact fields and error codes.

The broker runs in-process over a stand-in topic store (the store's own behaviour is tested elsewhere).
"""

from __future__ import annotations

import datetime
import struct
import uuid

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from sharegroup.server.codec import ZERO_UUID
from tests.server_harness import BrokerThread, RawClient, batch_bytes, stored_batches


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path)
    try:
        yield b
    finally:
        b.stop()



def req(api_key: int, version: int, **fields):
    from sharegroup.server.codec import build

    return build(load_request_schema(api_key, version), fields)


def md(version: int, topics, allow_auto: bool = False, ops: bool = False):
    """A Metadata request of any version; topics are names or topic ids (lookup by id)."""
    if topics is not None:
        topics = [{"name": None, "topic_id": t} if isinstance(t, uuid.UUID) else {"name": t, "topic_id": ZERO_UUID}
                  for t in topics]
    return req(3, version, topics=topics, allow_auto_topic_creation=allow_auto,
               include_topic_authorized_operations=ops, include_cluster_authorized_operations=False)


def record_batch(count: int = 1) -> bytes:
    return batch_bytes(count)


# -- ApiVersions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_exactly_the_served_apis(client, version):
    body = (req(18, version, client_software_name="raw-test", client_software_version="1.0")
            if version >= 3 else req(18, version))
    resp = client.request(18, version, body)
    assert resp.error_code == ErrorCode.none
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == {0: (3, 12), 1: (4, 17), 2: (1, 9), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5),
                   14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5),
                   24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (1, 1), 28: (0, 4), 29: (1, 3),
                   30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 36: (0, 2), 37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 50: (0, 0), 51: (0, 0),
                   61: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1), 69: (0, 1), 76: (1, 1), 77: (1, 1), 78: (1, 2),
                   79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}


def test_response_headers_api_versions_v0_even_when_flexible_others_v1(client):
    client.send_raw(client.frame(18, 3, req(18, 3, client_software_name="raw-test", client_software_version="1.0")))
    frame = client.read_frame()
    # correlation id, then the body at once: error code 0, then the compact array of the 48 served APIs (48 + 1)
    assert frame[:4] == client.correlation_id.to_bytes(4, "big")
    assert frame[4:7] == b"\x00\x00\x31"
    client.send_raw(client.frame(3, 13, md(13, [])))
    frame = client.read_frame()
    # correlation id, an empty tag buffer (header v1), then throttle time 0
    assert frame[:9] == client.correlation_id.to_bytes(4, "big") + b"\x00" + b"\x00\x00\x00\x00"


def test_api_versions_of_an_unknown_version_answers_v0_with_unsupported_version(client):
    client.send_raw(client.frame(18, 9, None, header_version=2))
    correlation_id, body = client.read_v0_response(18)
    assert correlation_id == client.correlation_id
    assert body.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    # the connection stays open and usable at a version the client now knows
    assert client.request(18, 0, req(18, 0)).error_code == ErrorCode.none


def test_api_versions_v3_with_an_illegal_software_name_is_invalid_request(client):
    resp = client.request(18, 3, req(18, 3, client_software_name="-bad name-", client_software_version="1"))
    assert resp.error_code == ErrorCode.invalid_request
    assert resp.api_keys == ()


# -- Metadata ---------------------------------------------------------------------------------------


def _create(client, name, partitions=1, version=7, **extra):
    body = req(19, version, topics=[{"name": name, "num_partitions": partitions, "replication_factor": -1,
                                      "assignments": [], "configs": []}], timeout=5000, **extra)
    return client.request(19, version, body).topics[0]


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_of_every_version_names_this_node_broker_and_controller(broker, client, version):
    _create(client, "orders", 2)
    resp = client.request(3, version, md(version, ["orders"]))
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", broker.broker.port)]
    if version >= 1:
        assert resp.controller_id == 1
    if version >= 2:
        assert resp.cluster_id == broker.broker.cluster_id
    [topic] = resp.topics
    assert (topic.error_code, topic.name) == (ErrorCode.none, "orders")
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (0, 1, (1,), (1,)), (1, 1, (1,), (1,))]
    if version >= 10:
        assert topic.topic_id == broker.store.topic_by_name("orders").topic_id


def test_metadata_all_topics_none_and_brokers_only(client):
    _create(client, "a")
    _create(client, "b", 3)
    assert [t.name for t in client.request(3, 13, md(13, None)).topics] == ["a", "b"]
    assert client.request(3, 13, md(13, [])).topics == ()
    assert [t.name for t in client.request(3, 0, md(0, [])).topics] == ["a", "b"]


def test_metadata_by_topic_id_and_unknown_id(broker, client):
    _create(client, "by-id", 2)
    topic_id = broker.store.topic_by_name("by-id").topic_id
    missing = uuid.uuid4()
    resp = client.request(3, 12, md(12, [topic_id, missing]))
    found, unknown = resp.topics
    assert (found.error_code, found.name, found.topic_id, len(found.partitions)) == (ErrorCode.none, "by-id", topic_id, 2)
    assert (unknown.error_code, unknown.name, unknown.topic_id, unknown.partitions) == (
        ErrorCode.unknown_topic_id, None, missing, ())


def test_metadata_v12_with_any_topic_id_looks_up_by_id_only(broker, client):
    """Kafka: once a v12+ request carries a non-zero topic id, it is answered by ids alone; names (also
    one beside an id) are not looked at."""
    _create(client, "a")
    _create(client, "b")
    b_id = broker.store.topic_by_name("b").topic_id
    body = req(3, 12, topics=[{"name": "a", "topic_id": b_id}, {"name": "c", "topic_id": ZERO_UUID}],
               allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    assert [(t.error_code, t.name, t.topic_id) for t in client.request(3, 12, body).topics] == [
        (ErrorCode.none, "b", b_id)]
    assert broker.store.topic_by_name("c") is None


def test_metadata_null_name_below_v12_is_invalid_request(client):
    resp = client.request(3, 11, md(11, [uuid.uuid4()]))
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_request]


def test_metadata_topic_id_with_a_name_below_v12_is_invalid_request(broker, client):
    """Versions 10 and 11 carry a topic id field, but Kafka refuses a non-zero one there."""
    _create(client, "named")
    topic_id = broker.store.topic_by_name("named").topic_id
    body = req(3, 10, topics=[{"name": "named", "topic_id": topic_id}], allow_auto_topic_creation=False,
               include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    assert [(t.error_code, t.name) for t in client.request(3, 10, body).topics] == [
        (ErrorCode.invalid_request, "named")]


def test_metadata_illegal_name_is_invalid_topic_even_without_auto_create(tmp_path, broker, client):
    """Kafka validates the name of a topic it will not create too: INVALID_TOPIC_EXCEPTION, not unknown."""
    resp = client.request(3, 13, md(13, ["bad/name", "fine"], allow_auto=False))
    assert [(t.error_code, t.name) for t in resp.topics] == [
        (ErrorCode.invalid_topic_exception, "bad/name"), (ErrorCode.unknown_topic_or_partition, "fine")]
    off = BrokerThread(tmp_path / "off", overrides={"auto.create.topics.enable": "false"})
    try:
        c = RawClient(off.broker.port)
        resp = c.request(3, 13, md(13, ["bad/name"], allow_auto=True))
        assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_topic_exception]
        c.close()
    finally:
        off.stop()


def test_metadata_fills_authorized_operations_of_a_topic_it_does_not_have(client):
    """Kafka reports the asked operations for every topic it looked up by name, found or not (an unknown
    or illegal name too); only refused and unknown-id entries keep the schema's default."""
    every = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    resp = client.request(3, 13, md(13, ["absent", "bad/name"], ops=True))
    assert [(t.error_code, t.topic_authorized_operations) for t in resp.topics] == [
        (ErrorCode.unknown_topic_or_partition, every), (ErrorCode.invalid_topic_exception, every)]
    (by_id,) = client.request(3, 13, md(13, [uuid.uuid4()], ops=True)).topics
    assert (by_id.error_code, by_id.topic_authorized_operations) == (ErrorCode.unknown_topic_id, -(2**31))


def test_metadata_auto_creates_when_allowed_and_enabled(broker, client):
    resp = client.request(3, 13, md(13, ["auto"], allow_auto=True, ops=True))
    [topic] = resp.topics
    assert topic.error_code == ErrorCode.none and len(topic.partitions) == 1
    assert topic.topic_id == broker.store.topic_by_name("auto").topic_id
    assert topic.topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    resp = client.request(3, 13, md(13, ["not-auto"]))
    assert [(t.error_code, t.name) for t in resp.topics] == [(ErrorCode.unknown_topic_or_partition, "not-auto")]
    assert broker.store.topic_by_name("not-auto") is None
    resp = client.request(3, 13, md(13, ["bad/name"], allow_auto=True))
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_topic_exception]


def test_metadata_does_not_auto_create_when_the_broker_disables_it(tmp_path):
    b = BrokerThread(tmp_path, overrides={"auto.create.topics.enable": "false", "num.partitions": "4"})
    try:
        c = RawClient(b.broker.port)
        resp = c.request(3, 13, md(13, ["nope"], allow_auto=True))
        assert [t.error_code for t in resp.topics] == [ErrorCode.unknown_topic_or_partition]
        assert b.store.topics() == []
        c.close()
    finally:
        b.stop()


def test_auto_created_topics_get_num_partitions(tmp_path):
    b = BrokerThread(tmp_path, overrides={"num.partitions": "4"})
    try:
        c = RawClient(b.broker.port)
        resp = c.request(3, 13, md(13, ["four"], allow_auto=True))
        assert [p.partition_index for p in resp.topics[0].partitions] == [0, 1, 2, 3]
        c.close()
    finally:
        b.stop()


# -- FindCoordinator ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key_versions(broker, client, version):
    fields = {"key": "g1"} if version == 0 else {"key": "g1", "key_type": 0}
    resp = client.request(10, version, req(10, version, **fields))
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (ErrorCode.none, 1, "127.0.0.1", broker.broker.port)


def test_find_coordinator_batched_group_and_share_keys(broker, client):
    import base64

    topic_text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    resp = client.request(10, 6, req(10, 6, key_type=2, coordinator_keys=[f"g1:{topic_text}:0", "g1:nope:0", "bad"]))
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [
        (f"g1:{topic_text}:0", ErrorCode.none, 1),
        ("g1:nope:0", ErrorCode.invalid_request, -1),
        ("bad", ErrorCode.invalid_request, -1),
    ]
    resp = client.request(10, 4, req(10, 4, key_type=0, coordinator_keys=["g1", "g2", ""]))
    assert [(c.key, c.error_code, c.port) for c in resp.coordinators] == [
        ("g1", ErrorCode.none, broker.broker.port), ("g2", ErrorCode.none, broker.broker.port), ("", ErrorCode.invalid_request, -1)]


def test_find_coordinator_refuses_transactions_and_unknown_key_types(client):
    assert client.request(10, 3, req(10, 3, key="tx", key_type=1)).error_code == ErrorCode.coordinator_not_available
    assert client.request(10, 3, req(10, 3, key="g", key_type=7)).error_code == ErrorCode.invalid_request
    # Kafka's getCoordinator: a SHARE key below v6 is INVALID_REQUEST, whatever the key.
    assert client.request(10, 5, req(10, 5, key_type=2, coordinator_keys=["g:x:0"])).coordinators[0].error_code == (
        ErrorCode.invalid_request)
    assert client.request(10, 3, req(10, 3, key="g:x:0", key_type=2)).error_code == ErrorCode.invalid_request


# -- CreateTopics -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_create_topics_every_version(broker, client, version):
    result = _create(client, f"t{version}", 3, version=version)
    assert (result.name, result.error_code) == (f"t{version}", ErrorCode.none)
    assert broker.store.topic_by_name(f"t{version}").num_partitions == 3
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
    if version >= 7:
        assert result.topic_id == broker.store.topic_by_name(f"t{version}").topic_id


def test_create_topics_errors_per_topic(broker, client):
    _create(client, "exists")
    topics = [
        {"name": "exists", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "ok", "num_partitions": -1, "replication_factor": -1, "assignments": [],
         "configs": [{"name": "retention.ms", "value": "1000"}]},
        {"name": "zero", "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "rf3", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []},
        {"name": "bad config", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "cfg", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "retention.msec", "value": "1"}]},
        {"name": "dup", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "dup", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "x" * 250, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
    ]
    resp = client.request(19, 7, req(19, 7, topics=topics, timeout=5000, validate_only=False))
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {
        "exists": ErrorCode.topic_already_exists,
        "ok": ErrorCode.none,
        "zero": ErrorCode.invalid_partitions,
        "rf3": ErrorCode.invalid_replication_factor,
        "bad config": ErrorCode.invalid_topic_exception,
        "cfg": ErrorCode.invalid_config,
        "dup": ErrorCode.invalid_request,
        "x" * 250: ErrorCode.invalid_topic_exception,
    }
    ok = next(t for t in resp.topics if t.name == "ok")
    assert [(c.name, c.value) for c in ok.configs if c.config_source == 1] == [("retention.ms", "1000")]
    assert sorted(t.name for t in broker.store.topics()) == ["exists", "ok"]


def test_create_topics_validate_only_creates_nothing(broker, client):
    result = _create(client, "dry", 2, validate_only=True)
    assert (result.error_code, result.num_partitions) == (ErrorCode.none, 2)
    assert broker.store.topic_by_name("dry") is None


# -- Produce ------------------------------------------------------------------------------------------


def _produce(client, version, topic, partition, records, acks=-1):
    body = req(0, version, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5),
               topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}])
    if acks == 0:
        client.send_raw(client.frame(0, version, body))
        return None
    return client.request(0, version, body).responses[0].partition_responses[0]


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_every_version_assigns_offsets(broker, client, version):
    _create(client, "p", 1)
    first = _produce(client, version, "p", 0, record_batch(3))
    second = _produce(client, version, "p", 0, record_batch(2))
    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (
        ErrorCode.none, 0, ErrorCode.none, 3)
    if version >= 5:
        assert second.log_start_offset == 0
    topic_id = broker.store.topic_by_name("p").topic_id
    stored = stored_batches(broker.store, topic_id, 0)
    assert [struct.unpack(">q", b[:8])[0] for b in stored] == [0, 3]
    assert stored[1][8:] == record_batch(2)[8:]  # the producer's bytes, only the base offset rewritten


def test_produce_errors_per_partition(broker, client):
    _create(client, "p", 1)
    assert _produce(client, 9, "p", 5, record_batch()).error_code == ErrorCode.unknown_topic_or_partition
    assert _produce(client, 9, "p", 0, record_batch(), acks=2).error_code == ErrorCode.invalid_required_acks
    assert _produce(client, 9, "p", 0, b"garbage").error_code == ErrorCode.corrupt_message
    assert _produce(client, 9, "p", 0, None).error_code == ErrorCode.invalid_record
    assert _produce(client, 9, "bad/name", 0, record_batch()).error_code == ErrorCode.unknown_topic_or_partition
    assert broker.store.log_end_offset(broker.store.topic_by_name("p").topic_id, 0) == 0


def test_produce_to_an_unknown_topic_or_partition_with_bad_acks_answers_unknown_first(broker, client):
    """Kafka checks a partition's existence before the acks (INVALID_REQUIRED_ACKS only reaches
    partitions that exist), and creates nothing for such a request."""
    _create(client, "p", 1)
    assert _produce(client, 9, "p", 5, record_batch(), acks=2).error_code == ErrorCode.unknown_topic_or_partition
    assert _produce(client, 9, "nope", 0, record_batch(), acks=2).error_code == ErrorCode.unknown_topic_or_partition
    assert broker.store.topic_by_name("nope") is None
    assert _produce(client, 9, "p", 0, record_batch(), acks=2).error_code == ErrorCode.invalid_required_acks


def test_produce_acks_0_with_an_error_closes_the_connection(broker, client):
    """With acks=0 the producer reads no answer, so Kafka closes the connection when a partition fails
    (the client sees the close and refreshes its metadata); nothing is appended."""
    _create(client, "p", 1)
    assert _produce(client, 9, "p", 5, record_batch(), acks=0) is None
    with pytest.raises(ConnectionError):
        client.read_frame()
    assert broker.store.log_end_offset(broker.store.topic_by_name("p").topic_id, 0) == 0


def _zstd_marked(batch: bytes) -> bytes:
    """`batch` with its attributes saying ZSTD (codec 4) and the CRC-32C made right again."""
    from sharegroup.topics.record_batch import batch_crc

    data = bytearray(batch)
    data[22] = (data[22] & ~0x07) | 4
    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    return bytes(data)


def test_produce_below_v7_refuses_zstd_before_the_acks(broker, client):
    """ZSTD came with Produce v7 (KIP-110): Kafka answers UNSUPPORTED_COMPRESSION_TYPE to older versions,
    a check of the request's records made before the acks are looked at; nothing is appended."""
    _create(client, "z", 1)
    zstd = _zstd_marked(record_batch(2))
    assert _produce(client, 6, "z", 0, zstd).error_code == ErrorCode.unsupported_compression_type
    assert _produce(client, 3, "z", 0, zstd, acks=2).error_code == ErrorCode.unsupported_compression_type
    assert broker.store.log_end_offset(broker.store.topic_by_name("z").topic_id, 0) == 0
    assert _produce(client, 6, "z", 0, record_batch(2)).error_code == ErrorCode.none


def test_produce_sequence_and_epoch_faults_carry_the_log_start_offset(broker, client):
    """Kafka answers a refused idempotent batch (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH)
    with the partition's log start offset (v5+), which producers use to tell a lost state from a gap."""
    _create(client, "seq", 1)
    pid = client.request(22, 4, req(22, 4, transactional_id=None, transaction_timeout=datetime.timedelta(0),
                                    producer_id=-1, producer_epoch=-1)).producer_id
    assert _produce(client, 9, "seq", 0, batch_bytes(2, producer_id=pid, producer_epoch=1, base_sequence=0)).error_code == 0
    assert _produce(client, 9, "seq", 0, batch_bytes(2, producer_id=pid, producer_epoch=1, base_sequence=2)).error_code == 0
    topic_id = broker.store.topic_by_name("seq").topic_id
    broker.call(broker.store.delete_records(topic_id, 0, 1))
    gap = _produce(client, 9, "seq", 0, batch_bytes(1, producer_id=pid, producer_epoch=1, base_sequence=9))
    assert (gap.error_code, gap.base_offset, gap.log_start_offset) == (ErrorCode.out_of_order_sequence_number, -1, 1)
    old = _produce(client, 9, "seq", 0, batch_bytes(1, producer_id=pid, producer_epoch=0, base_sequence=4))
    assert (old.error_code, old.base_offset, old.log_start_offset) == (ErrorCode.invalid_producer_epoch, -1, 1)
    assert broker.store.log_end_offset(topic_id, 0) == 4


def test_produce_larger_than_message_max_bytes_is_message_too_large(tmp_path):
    b = BrokerThread(tmp_path, overrides={"message.max.bytes": "100"})
    try:
        c = RawClient(b.broker.port)
        _create(c, "big", 1)
        result = _produce(c, 9, "big", 0, record_batch(10))
        assert result.error_code == ErrorCode.message_too_large
        assert b.store.log_end_offset(b.store.topic_by_name("big").topic_id, 0) == 0
        c.close()
    finally:
        b.stop()


def test_produce_never_auto_creates_a_topic(broker, client):
    """Kafka creates topics only through Metadata (AllowAutoTopicCreation with `auto.create.topics.enable`,
    on here): a Produce to a topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION, an illegal name
    too, and creates nothing. A real producer asks Metadata first, which creates the topic."""
    for version in (3, 9, 12):
        fresh = _produce(client, version, "fresh", 0, record_batch())
        assert (fresh.error_code, fresh.base_offset) == (ErrorCode.unknown_topic_or_partition, -1)
    assert _produce(client, 9, "bad/name", 0, record_batch()).error_code == ErrorCode.unknown_topic_or_partition
    assert broker.store.topic_by_name("fresh") is None
    assert client.request(3, 12, md(12, ["fresh"], allow_auto=True)).topics[0].error_code == ErrorCode.none
    assert _produce(client, 9, "fresh", 0, record_batch()).base_offset == 0


def test_produce_acks_0_to_an_unknown_topic_closes_the_connection(broker, client):
    """The unknown topic is a failed partition like any other: with acks=0 the connection closes."""
    assert _produce(client, 9, "fresh", 0, record_batch(), acks=0) is None
    with pytest.raises(ConnectionError):
        client.read_frame()
    assert broker.store.topic_by_name("fresh") is None


def test_produce_acks_0_sends_no_response_and_later_responses_stay_in_order(broker, client):
    _create(client, "p", 1)
    assert _produce(client, 9, "p", 0, record_batch(), acks=0) is None
    # pipelined: three requests written before any response is read; answers come back in order
    frames = [client.frame(0, 9, req(0, 9, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
                                     topic_data=[{"name": "p", "partition_data": [{"index": 0, "records": record_batch(2)}]}]))
              for _ in range(3)]
    first_cid = client.correlation_id - 2
    client.send_raw(b"".join(frames))
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    offsets = []
    for expected_cid in (first_cid, first_cid + 1, first_cid + 2):
        frame = client.read_frame()
        cls = load_response_schema(0, 9)
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        assert header.correlation_id == expected_cid
        offsets.append(entity_reader(cls)(frame, offset)[0].responses[0].partition_responses[0].base_offset)
    assert offsets == [1, 3, 5]


# -- InitProducerId and Fetch ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_every_version_hands_out_fresh_ids(client, version):
    body = req(22, version, transactional_id=None, transaction_timeout=datetime.timedelta(0))
    first, second = client.request(22, version, body), client.request(22, version, body)
    assert (first.error_code, first.producer_epoch, second.error_code, second.producer_epoch) == (
        ErrorCode.none, 0, ErrorCode.none, 0)
    assert first.producer_id >= 0 and second.producer_id == first.producer_id + 1


def test_init_producer_id_with_a_transactional_id_is_refused(client):
    ok_timeout = datetime.timedelta(seconds=60)
    assert client.request(22, 4, req(22, 4, transactional_id="tx", transaction_timeout=ok_timeout)).error_code == (
        ErrorCode.coordinator_not_available)
    too_long = datetime.timedelta(hours=1)
    assert client.request(22, 4, req(22, 4, transactional_id="tx", transaction_timeout=too_long)).error_code == (
        ErrorCode.invalid_transaction_timeout)


def test_init_producer_id_half_an_id_or_an_empty_transactional_id_is_invalid_request(client):
    """v3+ (KIP-360): a producer id without an epoch, or an epoch without an id, is INVALID_REQUEST and
    hands out no id; an empty transactional id is INVALID_REQUEST before the timeout is looked at."""
    def init(transactional_id=None, producer_id=-1, producer_epoch=-1, timeout_s=0):
        return client.request(22, 4, req(22, 4, transactional_id=transactional_id,
                                         transaction_timeout=datetime.timedelta(seconds=timeout_s),
                                         producer_id=producer_id, producer_epoch=producer_epoch))

    first = init()
    for pid, epoch in [(-1, 0), (first.producer_id, -1)]:
        refused = init(producer_id=pid, producer_epoch=epoch)
        assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (ErrorCode.invalid_request, -1, -1)
    assert init(producer_id=first.producer_id, producer_epoch=0).error_code == ErrorCode.none
    assert init().producer_id == first.producer_id + 2  # the refused ones took no id
    assert init("", timeout_s=3600).error_code == ErrorCode.invalid_request
    assert init("tx", producer_id=-1, producer_epoch=3, timeout_s=60).error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("version", [4, 12, 13, 17])
def test_fetch_of_an_empty_partition_answers_its_offsets(broker, client, version):
    _create(client, "f", 1)
    topic_id = broker.store.topic_by_name("f").topic_id
    topic = {"topic": "f", "topic_id": topic_id, "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}
    resp = client.request(1, version, req(1, version, max_wait=datetime.timedelta(0), min_bytes=1, topics=[topic],
                                          forgotten_topics_data=[]))
    [part] = resp.responses[0].partitions
    assert (part.error_code, part.high_watermark, part.last_stable_offset) == (ErrorCode.none, 0, 0)
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (ErrorCode.none, 0)


def test_retention_is_enforced_every_check_interval(tmp_path):
    """Old segments go once `log.retention.ms` has passed, without any request: the broker's own timer."""
    import time

    b = BrokerThread(tmp_path, overrides={"log.retention.check.interval.ms": "50", "log.retention.ms": "3600000",
                                          "log.segment.bytes": str(1 << 20)})
    try:
        if not hasattr(b.store, "enforce_retention"):
            pytest.skip("the stand-in store keeps everything")
        c = RawClient(b.broker.port)
        _create(c, "old", 1)
        big = batch_bytes(1, value=b"x" * 700_000)  # timestamps of 2026-01-01: long past an hour's retention
        for _ in range(3):  # 2.1 MB in 1 MiB segments: the first segments are complete and deletable
            assert _produce(c, 9, "old", 0, big).error_code == ErrorCode.none
        topic_id = b.store.topic_by_name("old").topic_id
        deadline = time.monotonic() + 10
        while b.store.log_start_offset(topic_id, 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert b.store.log_start_offset(topic_id, 0) >= 1
        assert b.store.log_end_offset(topic_id, 0) == 3
        c.close()
    finally:
        b.stop()


def test_listening_on_every_interface_advertises_the_address_the_client_used(tmp_path):
    b = BrokerThread(tmp_path, host="0.0.0.0")
    try:
        c = RawClient(b.broker.port, host="127.0.0.1")
        resp = c.request(3, 13, md(13, []))
        assert [(x.host, x.port) for x in resp.brokers] == [("127.0.0.1", b.broker.port)]
        coordinator = c.request(10, 3, req(10, 3, key="g", key_type=0))
        assert (coordinator.host, coordinator.port) == ("127.0.0.1", b.broker.port)
        c.close()
    finally:
        b.stop()


def _topic(name, partitions=1, rf=1, configs=(), assignments=()):
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [{"partition_index": p, "broker_ids": [1]} for p in assignments],
            "configs": [{"name": k, "value": v} for k, v in configs]}


def test_create_topics_checks_in_kafkas_order(broker, client):
    """Kafka's controller checks a new topic's name, then whether it exists, then its configs, then its
    replica assignment / replication factor / partition count: the first failing check decides the code."""
    _create(client, "exists")
    topics = [
        _topic("exists", 1, 3),  # exists, and an unreachable replication factor
        _topic("exists2", 0, 1),
        _topic("bad name", 1, 3),
        _topic("cfg_rf", 1, 3, [("retention.msec", "1")]),  # bad config before the replication factor
        _topic("cfg_parts", 0, 1, [("segment.bytes", "1")]),
        _topic("null_cfg", -1, 0, [("retention.ms", None)]),
        _topic("rf0_parts0", 0, 0),  # replication factor before partitions
        _topic("parts0_rf3", 0, 3),  # partitions before the placement of 3 replicas
        _topic("assigned", 1, -1, assignments=[0]),
    ]
    _create(client, "exists2")
    resp = client.request(19, 7, req(19, 7, topics=topics, timeout=5000, validate_only=False))
    assert {t.name: t.error_code for t in resp.topics} == {
        "exists": ErrorCode.topic_already_exists,
        "exists2": ErrorCode.topic_already_exists,
        "bad name": ErrorCode.invalid_topic_exception,
        "cfg_rf": ErrorCode.invalid_config,
        "cfg_parts": ErrorCode.invalid_config,
        "null_cfg": ErrorCode.invalid_config,
        "rf0_parts0": ErrorCode.invalid_replication_factor,
        "parts0_rf3": ErrorCode.invalid_partitions,
        "assigned": ErrorCode.invalid_request,
    }
    assert sorted(t.name for t in broker.store.topics()) == ["exists", "exists2"]


def test_create_topics_returns_the_effective_configs_as_describe_configs_does(broker, client):
    """Kafka's CreateTopics v5+ result lists the topic's effective configs (defaults included, each with
    its source), the same entries DescribeConfigs shows, also for validate_only."""
    for name, validate_only in (("made", False), ("checked", True)):
        body = req(19, 7, topics=[_topic(name, 2, -1, [("retention.ms", "1000"), ("cleanup.policy", "delete")])],
                   timeout=5000, validate_only=validate_only)
        result = client.request(19, 7, body).topics[0]
        assert result.error_code == ErrorCode.none
        created = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in result.configs}
        assert len(created) == 34, name  # every topic config of Kafka 4.x (4.4: errors.deadletterqueue.group.enable)
        assert [created[k] for k in ("cleanup.policy", "max.message.bytes", "retention.ms", "segment.bytes",
                                     "compression.type", "min.insync.replicas")] == [
            ("delete", 1, False, False), ("1048588", 5, False, False), ("1000", 1, False, False),
            (str(1 << 30), 5, False, False), ("producer", 5, False, False), ("1", 5, False, False)], name
    described = client.request(32, 4, req(32, 4, resources=[
        {"resource_type": 2, "resource_name": "made", "configuration_keys": None}],
        include_synonyms=False, include_documentation=False)).results[0]
    assert {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in described.configs} == created


def test_create_topics_refuses_duplicates_and_the_metadata_topic_with_kafkas_messages(broker, client):
    topics = [_topic("dup"), _topic("dup", 2), _topic("__cluster_metadata")]
    resp = client.request(19, 7, req(19, 7, topics=topics, timeout=5000, validate_only=False))
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        ("dup", ErrorCode.invalid_request, "Duplicate topic name."),
        ("__cluster_metadata", ErrorCode.invalid_request, "Creation of internal topic __cluster_metadata is prohibited.")]
    assert broker.store.topics() == []
