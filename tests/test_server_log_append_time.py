"""`message.timestamp.type=LogAppendTime`: the broker stamps each appended batch with its own clock, as
Kafka's leader does (timestamp-type attribute bit, maxTimestamp = the append time, CRC recomputed; base
timestamp and record deltas untouched). Produce answers that time, ListOffsets finds records by it, Fetch
returns the stamped batches, and the CreateTime bounds do not apply. Raw kio against a broker on a
`ManualClock`, then confluent_kafka's producer and consumer on the system clock."""

from __future__ import annotations

import datetime
import pathlib

import pytest

from sharegroup.clock import ManualClock
from sharegroup.server.codec import build, request_class
from sharegroup.topics.record_batch import TIMESTAMP_TYPE_BIT, batch_crc, parse_header, record_timestamps
from tests.server_harness import BrokerThread, RawClient
from tests.test_server_produce_timestamps import HOUR_MS, NOW_MS, create, produce, stamped

LIST_OFFSETS, INCREMENTAL_ALTER, DESCRIBE_CONFIGS = 2, 44, 32
LAT = {"message_timestamp_type": "LogAppendTime"}


@pytest.fixture
def clock():
    return ManualClock(NOW_MS)


@pytest.fixture
def broker(tmp_path, clock):
    b = BrokerThread(tmp_path, clock=clock)
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def stored_batches(data_dir: pathlib.Path) -> list[bytes]:
    """Every batch of the data directory's segment files, as stored on disk."""
    out = []
    for path in sorted(data_dir.glob("topics/**/*.log")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            size = parse_header(data, pos).size_bytes
            out.append(data[pos:pos + size])
            pos += size
    return out


def list_offsets(client: RawClient, name: str, timestamp: int) -> tuple[int, int]:
    body = build(request_class(LIST_OFFSETS, 7), {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]})
    [p] = client.request(LIST_OFFSETS, 7, body).topics[0].partitions
    return p.timestamp, p.offset


def test_each_batch_is_stamped_with_the_brokers_time(tmp_path, broker, client, clock):
    create(client, "t", **LAT)
    two_hours_ahead = NOW_MS + 2 * HOUR_MS  # refused on a CreateTime topic; no bounds on this one
    [first] = produce(client, "t", (0, stamped(two_hours_ahead, two_hours_ahead + 5)))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert first.log_append_time == datetime.datetime.fromtimestamp(NOW_MS / 1000, tz=datetime.timezone.utc)
    clock.advance(1000)
    [second] = produce(client, "t", (0, stamped(1_000)))
    assert (second.base_offset, second.log_append_time.timestamp() * 1000) == (2, NOW_MS + 1000)
    batches = stored_batches(tmp_path)
    headers = [parse_header(b) for b in batches]
    assert [(h.attributes & TIMESTAMP_TYPE_BIT, h.base_timestamp, h.max_timestamp) for h in headers] == [
        (TIMESTAMP_TYPE_BIT, two_hours_ahead, NOW_MS), (TIMESTAMP_TYPE_BIT, 1_000, NOW_MS + 1000)]
    assert [batch_crc(b, 0, len(b)) for b in batches] == [h.crc for h in headers]
    assert record_timestamps(batches[0]) == [(0, NOW_MS), (1, NOW_MS)]
    # ListOffsets by timestamp goes by the broker's time, not the producer's
    assert list_offsets(client, "t", NOW_MS + 1) == (NOW_MS + 1000, 2)
    assert list_offsets(client, "t", NOW_MS) == (NOW_MS, 0)
    assert list_offsets(client, "t", two_hours_ahead) == (-1, -1)


def test_a_create_time_topic_keeps_the_producers_time_until_altered(tmp_path, broker, client):
    create(client, "t")
    [plain] = produce(client, "t", (0, stamped(NOW_MS - 5)))
    assert plain.log_append_time is None  # -1 on the wire: CreateTime
    body = build(request_class(INCREMENTAL_ALTER, 1), {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "message.timestamp.type", "config_operation": 0, "value": "LogAppendTime"}]}]})
    assert client.request(INCREMENTAL_ALTER, 1, body).responses[0].error_code == 0
    [stamped_now] = produce(client, "t", (0, stamped(NOW_MS - 5)))
    assert stamped_now.log_append_time is not None
    assert [(h.attributes & TIMESTAMP_TYPE_BIT, h.max_timestamp) for h in map(parse_header, stored_batches(tmp_path))] == [
        (0, NOW_MS - 5), (TIMESTAMP_TYPE_BIT, NOW_MS)]


def test_the_timestamp_type_survives_a_restart(tmp_path):
    broker = BrokerThread(tmp_path, clock=ManualClock(NOW_MS))
    broker.call(broker.store.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"}))
    broker.stop()
    broker = BrokerThread(tmp_path, clock=ManualClock(NOW_MS))
    client = RawClient(broker.broker.port)
    try:
        assert broker.store.topic_log_config("t").log_append_time is True
        assert produce(client, "t", (0, stamped(5)))[0].log_append_time is not None
    finally:
        client.close()
        broker.stop()


def test_a_real_producer_and_consumer_see_log_append_time(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    import time

    b = BrokerThread(tmp_path)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("lat", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[
            "lat"].result(15.0)
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        reports = []
        before_ms = int(time.time() * 1000)
        producer.produce("lat", value=b"v", timestamp=1_000, on_delivery=lambda err, msg: reports.append((err, msg)))
        assert producer.flush(15.0) == 0
        after_ms = int(time.time() * 1000)
        [(err, msg)] = reports
        assert err is None
        kind, stamp = msg.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before_ms <= stamp <= after_ms
        consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g",
                                             "auto.offset.reset": "earliest"})
        try:
            consumer.assign([confluent_kafka.TopicPartition("lat", 0, 0)])
            got = None
            deadline = time.monotonic() + 15.0
            while got is None and time.monotonic() < deadline:
                got = consumer.poll(0.5)
            assert got is not None and got.error() is None
            assert (got.value(), got.timestamp()) == (b"v", (confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, stamp))
        finally:
            consumer.close()
        [batch] = stored_batches(tmp_path)
        assert batch_crc(batch, 0, len(batch)) == parse_header(batch).crc
    finally:
        b.stop()
