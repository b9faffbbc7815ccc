"""Classic reads on `sharegroup serve`: raw kio Fetch (4-17) and ListOffsets (1-9), then the real
`confluent_kafka.Consumer` (manual assign, no group) and `AdminClient.list_offsets`."""

from __future__ import annotations

import datetime
import functools
import time

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient, batch_bytes, stored_batches

FETCH, LIST_OFFSETS = 1, 2
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION, UNKNOWN_TOPIC_ID = 0, 1, 3, 35, 100
INVALID_REQUEST = 42
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 6, 74, 75
TIMEOUT_S = 15.0


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path)
    yield b
    b.stop()



def fetch(client: RawClient, version: int, topic, partitions, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20, isolation: int = 0, session_id: int = 0, session_epoch: int = -1):
    key = "topic_id" if version >= 13 else "topic"
    body = build(request_class(FETCH, version), {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{key: topic, "partitions": [{"partition": p, "fetch_offset": o, "partition_max_bytes": m,
                                                  "log_start_offset": -1} for p, o, m in partitions]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return client.request(FETCH, version, body)


def list_offsets(client: RawClient, version: int, name: str, partitions, isolation: int = 0):
    body = build(request_class(LIST_OFFSETS, version), {
        "replica_id": -1, "isolation_level": isolation,
        "topics": [{"name": name, "partitions": [{"partition_index": p, "timestamp": ts, "max_num_offsets": 1}
                                                 for p, ts in partitions]}]})
    return [(p.partition_index, p.error_code, p.timestamp, p.offset)
            for p in client.request(LIST_OFFSETS, version, body).topics[0].partitions]


def topic_with_batches(broker: BrokerThread, name: str = "t", batches=(2, 3)):
    info = broker.call(broker.store.create_topic(name, 2))
    for i, count in enumerate(batches):
        broker.call(broker.store.append(info.topic_id, 0, batch_bytes(count, value=b"v%d" % i), acks=-1))
    return info


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
def test_fetch_serves_the_stored_bytes_with_the_log_offsets(broker, client, version):
    info = topic_with_batches(broker)
    topic = info.topic_id if version >= 13 else "t"
    response = fetch(client, version, topic, [(0, 0, 1 << 20), (1, 0, 1 << 20), (5, 0, 100)])
    assert (getattr(response, "error_code", NONE), getattr(response, "session_id", 0)) == (NONE, 0)
    (answer,) = response.responses
    parts = {p.partition_index: p for p in answer.partitions}
    assert bytes(parts[0].records) == b"".join(stored_batches(broker.store, info.topic_id, 0))
    assert (parts[0].error_code, parts[0].high_watermark, parts[0].last_stable_offset) == (NONE, 5, 5)
    assert (parts[1].error_code, parts[1].high_watermark, bytes(parts[1].records or b"")) == (NONE, 0, b"")
    assert parts[5].error_code == UNKNOWN_TOPIC_OR_PARTITION
    if version >= 5:
        assert parts[0].log_start_offset == 0


def test_fetch_from_the_middle_limits_and_out_of_range(broker, client):
    info = topic_with_batches(broker)
    second = stored_batches(broker.store, info.topic_id, 0)[1]
    from_three = fetch(client, 12, "t", [(0, 3, 1 << 20)]).responses[0].partitions[0]
    assert bytes(from_three.records) == second  # the batch holding offset 3 (2..4), whole
    one_byte = fetch(client, 12, "t", [(0, 0, 1)]).responses[0].partitions[0]
    assert bytes(one_byte.records) == stored_batches(broker.store, info.topic_id, 0)[0]  # at least one batch
    beyond = fetch(client, 12, "t", [(0, 6, 1 << 20)]).responses[0].partitions[0]
    assert (beyond.error_code, beyond.high_watermark, beyond.log_start_offset) == (OFFSET_OUT_OF_RANGE, -1, -1)
    broker.call(broker.store.delete_records(info.topic_id, 0, 2))
    below = fetch(client, 12, "t", [(0, 0, 1 << 20)]).responses[0].partitions[0]
    assert below.error_code == OFFSET_OUT_OF_RANGE
    at_end = fetch(client, 12, "t", [(0, 5, 1 << 20)]).responses[0].partitions[0]
    assert (at_end.error_code, at_end.log_start_offset, bytes(at_end.records or b"")) == (NONE, 2, b"")


def test_fetch_never_passes_partition_max_bytes_or_max_bytes_after_the_first_batch(broker, client):
    """Kafka's limits: a partition's records stay within `partition_max_bytes` and the response within
    `max_bytes`; only the first batch of the response may be larger (KIP-74). Whole batches here."""
    info = topic_with_batches(broker, batches=(2, 3, 4))
    first, second, third = stored_batches(broker.store, info.topic_id, 0)
    one_and_a_bit = fetch(client, 12, "t", [(0, 0, len(first) + 1)]).responses[0].partitions[0]
    assert bytes(one_and_a_bit.records) == first
    two = fetch(client, 12, "t", [(0, 0, len(first) + len(second))]).responses[0].partitions[0]
    assert bytes(two.records) == first + second
    response = fetch(client, 12, "t", [(0, 0, 1 << 20)], max_bytes=len(first) + len(second) + 1)
    assert bytes(response.responses[0].partitions[0].records) == first + second


def test_fetch_by_unknown_topic_id_and_sessions(broker, client):
    import uuid

    topic_with_batches(broker)
    unknown = fetch(client, 13, uuid.uuid4(), [(0, 0, 100)]).responses[0].partitions[0]
    assert unknown.error_code == UNKNOWN_TOPIC_ID
    # Kafka (KIP-227): epoch 0 or -1 is a full request, whatever the session id (a named session is
    # closed); only an incremental epoch names a session, and none exists here: FETCH_SESSION_ID_NOT_FOUND,
    # with no partitions (the broker does not know which ones the session held).
    for session_id, epoch in [(42, -1), (42, 0)]:
        full = fetch(client, 7, "t", [(0, 0, 100)], session_id=session_id, session_epoch=epoch)
        assert (full.error_code, full.session_id, full.responses[0].partitions[0].error_code) == (NONE, 0, NONE)
    for session_id, epoch in [(42, 3), (0, 1)]:
        refused = fetch(client, 7, "t", [(0, 0, 100)], session_id=session_id, session_epoch=epoch)
        assert (refused.error_code, refused.session_id, refused.responses) == (70, 0, ())


def _fetch_as(client, version: int, replica_id: int, leader_epoch: int, partition: int = 0, topic_id=None):
    ref = {"topic_id": topic_id} if version >= 13 else {"topic": "t"}
    replica = ({"replica_state": {"replica_id": replica_id, "replica_epoch": -1}} if version >= 15
               else {"replica_id": replica_id})
    body = build(request_class(FETCH, version), {
        **replica, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{**ref, "partitions": [{"partition": partition, "current_leader_epoch": leader_epoch,
                                                  "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                  "log_start_offset": -1}]}]})
    (p,) = client.request(FETCH, version, body).responses[0].partitions
    return p.error_code, p.high_watermark, bytes(p.records or b"")


@pytest.mark.parametrize("version", [12, 17])
def test_fetch_checks_the_leader_epoch_and_has_no_followers(broker, client, version):
    """Kafka checks `current_leader_epoch` (the leader's is 0 here: above it UNKNOWN_LEADER_EPOCH) and
    serves followers only of the partition's replicas: this node has none, so a follower's fetch is
    refused per partition (UNKNOWN_LEADER_EPOCH with an epoch, else NOT_LEADER_OR_FOLLOWER)."""
    topic_id = topic_with_batches(broker).topic_id
    fetch_as = functools.partial(_fetch_as, client, version, topic_id=topic_id)
    assert fetch_as(-1, 0)[:2] == (NONE, 5)
    assert fetch_as(-1, -1)[:2] == (NONE, 5)
    assert fetch_as(-1, 3) == (UNKNOWN_LEADER_EPOCH, -1, b"")
    assert fetch_as(2, -1) == (NOT_LEADER_OR_FOLLOWER, -1, b"")
    assert fetch_as(2, 0) == (UNKNOWN_LEADER_EPOCH, -1, b"")
    assert fetch_as(2, 0, partition=9)[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_long_poll_returns_when_records_arrive(broker, client):
    info = topic_with_batches(broker, batches=())

    def produce_later():
        time.sleep(0.2)
        broker.call(broker.store.append(info.topic_id, 0, batch_bytes(1), acks=-1))

    import threading

    threading.Thread(target=produce_later, daemon=True).start()
    waited = fetch(client, 12, "t", [(0, 0, 1 << 20)], max_wait_ms=10_000).responses[0].partitions[0]
    assert (waited.error_code, waited.high_watermark) == (NONE, 1)
    assert bytes(waited.records) == b"".join(stored_batches(broker.store, info.topic_id, 0))
    empty = fetch(client, 12, "t", [(0, 1, 1 << 20)], max_wait_ms=50).responses[0].partitions[0]
    assert (empty.error_code, bytes(empty.records or b"")) == (NONE, b"")
    from sharegroup.server.handlers.fetch import _signal

    assert _signal(broker.store).waiting() == 0  # an answered idle fetch leaves no waiter behind


def test_list_offsets_special_timestamps_and_by_time(broker, client):
    info = topic_with_batches(broker)
    broker.call(broker.store.delete_records(info.topic_id, 0, 1))
    asks = [(0, -2), (0, -1), (0, -4), (0, -5), (1, -1), (7, -1)]  # one request each: no partition twice
    assert [answer for ask in asks for answer in list_offsets(client, 9, "t", [ask])] == [
        (0, NONE, -1, 1), (0, NONE, -1, 5), (0, NONE, -1, 1), (0, NONE, -1, -1), (1, NONE, -1, 0),
        (7, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert list_offsets(client, 6, "t", [(0, -3)]) == [(0, UNSUPPORTED_VERSION, -1, -1)]
    (max_ts,) = list_offsets(client, 7, "t", [(0, -3)])
    stamp = int(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)  # batch_bytes'
    assert max_ts == (0, NONE, stamp, 1)  # ties: the earliest batch, never below the log start
    assert list_offsets(client, 1, "t", [(0, 0)]) == [(0, NONE, stamp, 1)]
    assert list_offsets(client, 2, "t", [(0, stamp + 1)]) == [(0, NONE, -1, -1)]
    assert list_offsets(client, 4, "t", [(0, 2**62)]) == [(0, NONE, -1, -1)]


def stamped(*timestamps_ms: int, attributes: int = 0) -> bytes:
    """An uncompressed batch with one record per timestamp (base timestamp: the first), attribute bits
    added (CRC made right); codec bits 1 (gzip) really compress the records, as a producer does."""
    import gzip
    import struct

    from sharegroup.topics.record_batch import HEADER_BYTES, SimpleRecord, batch_crc, build_record_batch

    data = bytearray(build_record_batch([SimpleRecord(b"k", b"v%d" % i, timestamp_ms=ts)
                                         for i, ts in enumerate(timestamps_ms)], base_timestamp_ms=timestamps_ms[0]))
    if attributes & 0x07:
        data[HEADER_BYTES:] = gzip.compress(bytes(data[HEADER_BYTES:]))
        struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | attributes)
    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    return bytes(data)


def topic_of(broker: BrokerThread, name: str, *batches: bytes):
    info = broker.call(broker.store.create_topic(name, 1))
    for data in batches:
        broker.call(broker.store.append(info.topic_id, 0, data, acks=-1))
    return info


def test_list_offsets_by_time_answers_the_record_inside_an_uncompressed_batch(broker, client):
    """Kafka answers the first record whose own timestamp is at or after the target, with that timestamp,
    walking the records of the first batch whose max timestamp reaches it. A compressed batch answers
    as a whole (its base offset and max timestamp): the broker never decompresses."""
    topic_of(broker, "ts", stamped(1_000, 2_000, 3_000), stamped(4_000, 3_500, 6_000),
             stamped(7_000, 8_000, attributes=1))
    asks = [0, 1_000, 1_500, 3_000, 3_200, 4_500, 6_000, 6_500, 7_500, 8_001]
    assert [list_offsets(client, 5, "ts", [(0, ts)])[0][2:] for ts in asks] == [
        (1_000, 0), (1_000, 0), (2_000, 1), (3_000, 2), (4_000, 3), (6_000, 5), (6_000, 5),
        (8_000, 6), (8_000, 6), (-1, -1)]
    assert list_offsets(client, 1, "ts", [(0, 1_500)]) == [(0, NONE, 2_000, 1)]  # v1 as well


def test_list_offsets_by_time_with_log_append_time_and_a_log_start_inside_a_batch(broker, client):
    """Log append time: every record of the batch carries its max timestamp, so the first record answers.
    From the log start on only: records below it are skipped, and when no record of the first batch
    reaching the target is left, the next batch that reaches it answers (as Kafka reads on)."""
    info = topic_of(broker, "la", stamped(5_000, 1_000, 1_000, 2_000), stamped(1_000, 3_000, 9_000, attributes=0x08),
                    stamped(6_000, 7_000))
    broker.call(broker.store.delete_records(info.topic_id, 0, 1))
    asks = [0, 1_500, 4_000, 8_000]
    assert [list_offsets(client, 9, "la", [(0, ts)])[0][2:] for ts in asks] == [
        (1_000, 1), (2_000, 3), (9_000, 4), (9_000, 4)]
    broker.call(broker.store.delete_records(info.topic_id, 0, 5))  # inside the log-append-time batch
    assert [list_offsets(client, 9, "la", [(0, ts)])[0][2:] for ts in (0, 6_500, 9_500)] == [
        (9_000, 5), (9_000, 5), (-1, -1)]


def test_list_offsets_max_timestamp_answers_the_first_record_carrying_it(broker, client):
    """Kafka: the first batch with the largest max timestamp, and in it the first record carrying that
    timestamp; a compressed batch answers its base offset."""
    topic_of(broker, "mx", stamped(1_000, 9_000, 2_000, 9_000), stamped(3_000, 9_000))
    assert list_offsets(client, 7, "mx", [(0, -3)]) == [(0, NONE, 9_000, 1)]
    topic_of(broker, "mz", stamped(1_000, 2_000), stamped(3_000, 9_000, 4_000, attributes=1))
    assert list_offsets(client, 7, "mz", [(0, -3)]) == [(0, NONE, 9_000, 2)]


def test_list_offsets_of_a_batch_whose_records_do_not_parse_answers_the_batch(broker, client):
    """The store keeps a batch whose header and CRC are right whatever its records hold; a look-up landing
    on it answers the batch (base offset, max timestamp) instead of failing."""
    import struct

    from sharegroup.topics.record_batch import HEADER_BYTES, batch_crc

    data = bytearray(stamped(1_000, 2_000, 3_000))
    data[HEADER_BYTES] = 0x7E  # the first record's length: 63, past the batch's end
    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    topic_of(broker, "bad", stamped(500), bytes(data))
    assert [list_offsets(client, 7, "bad", [(0, ts)])[0] for ts in (1_500, -3)] == [
        (0, NONE, 3_000, 1), (0, NONE, 3_000, 1)]


def test_list_offsets_leader_epoch_is_minus_one_without_an_offset_and_duplicates_are_invalid(broker, client):
    """Kafka answers -1 for the leader epoch when it finds no offset (LATEST_TIERED -5 without tiered
    storage, a timestamp newer than every record, MAX_TIMESTAMP of an empty log), and INVALID_REQUEST
    for every copy of a partition the request names twice."""
    topic_with_batches(broker)
    body = build(request_class(LIST_OFFSETS, 9), {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": p, "timestamp": ts, "current_leader_epoch": -1}
                                                for p, ts in [(0, -5), (0, 2**62), (1, -3), (1, -1)]]}]})
    got = [(p.partition_index, p.error_code, p.offset, p.leader_epoch)
           for p in client.request(LIST_OFFSETS, 9, body).topics[0].partitions]
    assert got == [(0, INVALID_REQUEST, -1, -1), (0, INVALID_REQUEST, -1, -1),
                   (1, INVALID_REQUEST, -1, -1), (1, INVALID_REQUEST, -1, -1)]
    answers = []
    for partition, timestamp in [(0, -5), (0, 2**62), (1, -3), (0, -1), (0, 0)]:
        body = build(request_class(LIST_OFFSETS, 9), {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "t", "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                                     "current_leader_epoch": -1}]}]})
        (p,) = client.request(LIST_OFFSETS, 9, body).topics[0].partitions
        answers.append((p.error_code, p.offset, p.leader_epoch))
    assert answers == [(NONE, -1, -1), (NONE, -1, -1), (NONE, -1, -1), (NONE, 5, 0), (NONE, 0, 0)]


def test_list_offsets_checks_the_current_leader_epoch(broker, client):
    """As Fetch: the leader's epoch is 0; a request naming a higher one is UNKNOWN_LEADER_EPOCH, a lower
    one (other than -1, "unknown") FENCED_LEADER_EPOCH."""
    topic_with_batches(broker)
    answers = []
    for epoch in (-1, 0, 4, -2):
        body = build(request_class(LIST_OFFSETS, 9), {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": epoch}]}]})
        (p,) = client.request(LIST_OFFSETS, 9, body).topics[0].partitions
        answers.append((p.error_code, p.offset, p.leader_epoch))
    assert answers == [(NONE, 5, 0), (NONE, 5, 0), (UNKNOWN_LEADER_EPOCH, -1, -1), (FENCED_LEADER_EPOCH, -1, -1)]


def test_list_offsets_read_committed_finds_nothing_at_or_past_the_lso(broker, client):
    """Kafka's timestamp and MAX_TIMESTAMP look-ups for read_committed answer only offsets below the last
    stable offset (-1/-1 otherwise), as read_uncommitted ones stop at the high watermark."""
    from tests.server_batches import produce_batch

    info = broker.call(broker.store.create_topic("txl", 1))
    append = lambda data: broker.call(broker.store.append(info.topic_id, 0, data, acks=-1))  # noqa: E731
    append(produce_batch(2, timestamp_ms=1_000))
    append(produce_batch(3, timestamp_ms=2_000, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    append(produce_batch(1, timestamp_ms=3_000))
    asks = [(0, 500), (0, 1_500), (0, -3)]
    assert [a for ask in asks for a in list_offsets(client, 7, "txl", [ask], isolation=1)] == [
        (0, NONE, 1_000, 0), (0, NONE, -1, -1), (0, NONE, -1, -1)]
    assert [a for ask in asks for a in list_offsets(client, 7, "txl", [ask], isolation=0)] == [
        (0, NONE, 1_000, 0), (0, NONE, 2_000, 2), (0, NONE, 3_000, 5)]


# -- real clients ---------------------------------------------------------------------------------------


def test_confluent_consumer_reads_every_record_with_manual_assign(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    info = topic_with_batches(broker, batches=(2, 3))
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "socket.timeout.ms": 10_000})
    try:
        consumer.assign([confluent_kafka.TopicPartition("t", 0, 1)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
        assert got == [(1, b"v01"), (2, b"v10"), (3, b"v11"), (4, b"v12")]
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("t", 0), timeout=TIMEOUT_S)
        assert (low, high) == (0, 5)
    finally:
        consumer.close()
    assert info.num_partitions == 2


def test_confluent_offsets_for_times_lands_on_the_record_inside_a_batch(broker):
    """A producer lingering puts five records with their own timestamps into one uncompressed batch;
    `offsets_for_times` finds the exact record, so a consumer seeking by time starts there."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    info = broker.call(broker.store.create_topic("times", 1))
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200,
                                         "compression.type": "none"})
    base = 1_700_000_000_000
    for i in range(5):
        producer.produce("times", value=b"r%d" % i, partition=0, timestamp=base + 1_000 * i)
    assert producer.flush(TIMEOUT_S) == 0
    assert len(stored_batches(broker.store, info.topic_id, 0)) == 1  # the premise: one batch of five
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "socket.timeout.ms": 10_000})
    try:
        found = []
        for ts in (base - 1, base + 2_500, base + 4_000, base + 4_001):  # one look-up each: no partition twice
            (tp,) = consumer.offsets_for_times([confluent_kafka.TopicPartition("times", 0, ts)], timeout=TIMEOUT_S)
            assert tp.error is None, tp.error
            found.append(tp.offset)
        assert found == [0, 3, 4, -1]
        consumer.assign([confluent_kafka.TopicPartition("times", 0, found[1])])
        message, deadline = None, time.monotonic() + TIMEOUT_S
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value(), message.timestamp()) == (
            3, b"r3", (confluent_kafka.TIMESTAMP_CREATE_TIME, base + 3_000))
    finally:
        consumer.close()


def test_admin_list_offsets(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic_with_batches(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10_000})
    tp = confluent_kafka.TopicPartition("t", 0)
    got = {}
    for label, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):
        futures = admin.list_offsets({tp: spec}, request_timeout=TIMEOUT_S)
        got[label] = futures[tp].result(TIMEOUT_S).offset
    assert got == {"earliest": 0, "latest": 5}


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(broker, client):
    from tests.server_batches import produce_batch

    info = broker.call(broker.store.create_topic("tx", 1))
    append = lambda data: broker.call(broker.store.append(info.topic_id, 0, data, acks=-1))  # noqa: E731
    append(produce_batch(2))
    append(produce_batch(3, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    append(produce_batch(1))
    open_txn = fetch(client, 12, "tx", [(0, 0, 1 << 20)], isolation=1).responses[0].partitions[0]
    assert (open_txn.high_watermark, open_txn.last_stable_offset) == (6, 2)
    assert bytes(open_txn.records) == stored_batches(broker.store, info.topic_id, 0)[0]  # up to the LSO only
    uncommitted = fetch(client, 12, "tx", [(0, 0, 1 << 20)], isolation=0).responses[0].partitions[0]
    assert (bytes(uncommitted.records), uncommitted.aborted_transactions) == (
        b"".join(stored_batches(broker.store, info.topic_id, 0)), None)
    assert list_offsets(client, 5, "tx", [(0, -1)], isolation=1) == [(0, NONE, -1, 2)]
    assert list_offsets(client, 5, "tx", [(0, -1)], isolation=0) == [(0, NONE, -1, 6)]
    broker.call(broker.store.write_transaction_marker(info.topic_id, 0, 9, 0, commit=False))
    aborted = fetch(client, 12, "tx", [(0, 0, 1 << 20)], isolation=1).responses[0].partitions[0]
    assert (aborted.high_watermark, aborted.last_stable_offset) == (7, 7)
    assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(9, 2)]
