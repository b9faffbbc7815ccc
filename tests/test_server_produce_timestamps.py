"""Produce refuses CreateTime record timestamps too far from the broker's clock, as Kafka's LogValidator does.

Raw kio Produce against an in-process broker whose store reads a `ManualClock` (so "now" is exact), then
one real producer (confluent_kafka) on the system clock. Bounds: the topic's
`message.timestamp.before.max.ms` (default 2^63-1) and `message.timestamp.after.max.ms` (default one hour),
inheriting `log.message.timestamp.before.max.ms` / `.after.max.ms` from the broker.
"""

from __future__ import annotations

import datetime
import gzip
import struct

import pytest

from sharegroup.clock import ManualClock
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.codec import build, request_class
from sharegroup.topics.record_batch import HEADER_BYTES, SimpleRecord, batch_crc, build_record_batch
from tests.server_harness import BrokerThread, RawClient

NOW_MS = 1_790_000_000_000  # the broker's (manual) clock
HOUR_MS = 3_600_000
LONG_MAX = 2**63 - 1
INVALID_TIMESTAMP = 32
REJECTED = "One or more records have been rejected due to invalid timestamp"
CREATE_TOPICS, PRODUCE, DESCRIBE_CONFIGS = 19, 0, 32


def _out_of_range(timestamp: int, offset: int, low: int, high: int) -> str:
    return (f"Timestamp {timestamp} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{low}, {high}]")


def stamped(*timestamps_ms: int, gzipped: bool = False) -> bytes:
    """A batch with one record per timestamp (base timestamp: the first); gzipped compresses its records
    for real and marks codec 1, as a producer does."""
    data = bytearray(build_record_batch([SimpleRecord(b"k", b"v%d" % i, timestamp_ms=ts)
                                         for i, ts in enumerate(timestamps_ms)], base_timestamp_ms=timestamps_ms[0]))
    if gzipped:
        data[HEADER_BYTES:] = gzip.compress(bytes(data[HEADER_BYTES:]))
        struct.pack_into(">i", data, 8, len(data) - 12)
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 1)
    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    return bytes(data)


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, clock=ManualClock(NOW_MS))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


def create(client: RawClient, name: str, partitions: int = 1, **configs: str) -> None:
    body = build(request_class(CREATE_TOPICS, 7), {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
        "timeout": datetime.timedelta(seconds=5), "validate_only": False})
    assert client.request(CREATE_TOPICS, 7, body).topics[0].error_code == 0


def produce(client: RawClient, topic: str, *partitions: tuple[int, bytes], version: int = 12):
    body = build(request_class(PRODUCE, version), {
        "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": topic, "partition_data": [{"index": i, "records": r} for i, r in partitions]}]})
    return client.request(PRODUCE, version, body).responses[0].partition_responses


def refusal(response) -> tuple:
    return (response.error_code, response.base_offset, response.log_start_offset, response.error_message,
            [(e.batch_index, e.batch_index_error_message) for e in response.record_errors])


def log_end(broker: BrokerThread, topic: str, partition: int = 0) -> int:
    return broker.store.log_end_offset(broker.store.topic_by_name(topic).topic_id, partition)


def test_a_record_two_hours_ahead_refuses_the_batch_with_kafkas_answer(broker, client):
    """Kafka 4.x allows a CreateTime timestamp at most one hour ahead by default: the batch is refused with
    INVALID_TIMESTAMP, Kafka's message, one record error naming the record (its index and its offset as
    the producer numbered it, with the allowed range; the default before bound of 2^63-1 shows as Java's
    long arithmetic gives it) and the log start offset; nothing of the batch is appended."""
    create(client, "t")
    assert produce(client, "t", (0, stamped(NOW_MS, NOW_MS)))[0].error_code == 0
    broker.call(broker.store.delete_records(broker.store.topic_by_name("t").topic_id, 0, 1))
    future = NOW_MS + 2 * HOUR_MS
    [answer] = produce(client, "t", (0, stamped(NOW_MS - 5, future, NOW_MS)))
    assert refusal(answer) == (INVALID_TIMESTAMP, -1, 1, REJECTED,
                               [(1, _out_of_range(future, 1, NOW_MS - LONG_MAX, NOW_MS + HOUR_MS))])
    assert log_end(broker, "t") == 2
    for version in (3, 7):  # before v8 the response has no message or record errors: the code alone
        [old] = produce(client, "t", (0, stamped(future)), version=version)
        assert (old.error_code, old.base_offset, hasattr(old, "record_errors")) == (INVALID_TIMESTAMP, -1, False)
    assert log_end(broker, "t") == 2


def test_every_offending_record_is_named_and_the_bounds_themselves_are_allowed(broker, client):
    """A timestamp exactly at either bound is accepted (Kafka refuses only beyond); records without a
    timestamp (-1) are not checked; every record out of range gets its own record error."""
    create(client, "b", message_timestamp_before_max_ms="1000")
    low, high = NOW_MS - 1_000, NOW_MS + HOUR_MS
    [edge] = produce(client, "b", (0, stamped(low, high, -1)))
    assert (edge.error_code, edge.base_offset) == (0, 0)
    [answer] = produce(client, "b", (0, stamped(high, high + 1, low, low - 1)))
    assert refusal(answer) == (INVALID_TIMESTAMP, -1, 0, REJECTED, [
        (1, _out_of_range(high + 1, 1, low, high)), (3, _out_of_range(low - 1, 3, low, high))])
    assert log_end(broker, "b") == 3


def test_the_topics_bounds_decide(broker, client):
    """A topic whose after bound was raised takes a record two hours ahead; one whose before bound was
    lowered refuses a record older than it, which the default (no limit) takes."""
    create(client, "ahead", message_timestamp_after_max_ms=str(3 * HOUR_MS))
    create(client, "recent", message_timestamp_before_max_ms=str(HOUR_MS))
    create(client, "plain")
    assert produce(client, "ahead", (0, stamped(NOW_MS + 2 * HOUR_MS)))[0].error_code == 0
    old = NOW_MS - 2 * HOUR_MS
    [answer] = produce(client, "recent", (0, stamped(old)))
    assert refusal(answer) == (INVALID_TIMESTAMP, -1, 0, REJECTED,
                               [(0, _out_of_range(old, 0, NOW_MS - HOUR_MS, NOW_MS + HOUR_MS))])
    assert produce(client, "plain", (0, stamped(1_000)))[0].error_code == 0
    assert (log_end(broker, "ahead"), log_end(broker, "recent"), log_end(broker, "plain")) == (1, 0, 1)


def test_a_compressed_batch_is_checked_by_its_header(broker, client):
    """The broker never decompresses: a gzip batch is checked by its header's timestamps. A future record
    shows in maxTimestamp (named by the last record), a too old first record in baseTimestamp (record 0);
    an old record in the middle is not seen (Kafka, which decompresses, would refuse that batch too)."""
    create(client, "z", message_timestamp_before_max_ms=str(HOUR_MS))
    low, high = NOW_MS - HOUR_MS, NOW_MS + HOUR_MS
    future = NOW_MS + 2 * HOUR_MS
    [ahead] = produce(client, "z", (0, stamped(NOW_MS, future, NOW_MS, gzipped=True)))
    assert refusal(ahead) == (INVALID_TIMESTAMP, -1, 0, REJECTED, [(2, _out_of_range(future, 2, low, high))])
    [behind] = produce(client, "z", (0, stamped(low - 1, NOW_MS, gzipped=True)))
    assert refusal(behind) == (INVALID_TIMESTAMP, -1, 0, REJECTED, [(0, _out_of_range(low - 1, 0, low, high))])
    [single] = produce(client, "z", (0, stamped(future, gzipped=True)))
    assert refusal(single)[4] == [(0, _out_of_range(future, 0, low, high))]
    assert log_end(broker, "z") == 0
    [fine] = produce(client, "z", (0, stamped(low, NOW_MS, high, gzipped=True)))
    [unseen] = produce(client, "z", (0, stamped(NOW_MS, low - 1, NOW_MS, gzipped=True)))
    assert [(r.error_code, r.base_offset) for r in (fine, unseen)] == [(0, 0), (0, 3)]


def test_only_the_partition_with_the_bad_timestamp_is_refused(broker, client):
    """Each partition of a Produce is validated alone: the others of the same request are appended."""
    create(client, "m", 3)
    future = NOW_MS + 2 * HOUR_MS
    answers = produce(client, "m", (0, stamped(NOW_MS)), (1, stamped(NOW_MS, future)), (2, stamped(NOW_MS, NOW_MS)))
    assert [(r.index, r.error_code, r.base_offset) for r in answers] == [
        (0, 0, 0), (1, INVALID_TIMESTAMP, -1), (2, 0, 0)]
    assert [log_end(broker, "m", p) for p in range(3)] == [1, 0, 2]


def _describe_topic(client: RawClient, name: str, key: str):
    body = build(request_class(DESCRIBE_CONFIGS, 4), {"resources": [{
        "resource_type": 2, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": True, "include_documentation": False})
    [entry] = client.request(DESCRIBE_CONFIGS, 4, body).results[0].configs
    return entry.value, entry.config_source, [(s.name, s.value) for s in entry.synonyms]


def test_the_broker_keys_set_the_topics_defaults(tmp_path):
    """`log.message.timestamp.after.max.ms` / `.before.max.ms` from server.properties or --override are
    the defaults of every topic (DescribeConfigs shows them as the static broker config); a topic's own
    key still wins. Kafka's bounds: a long, at least 0."""
    b = BrokerThread(tmp_path, clock=ManualClock(NOW_MS), overrides={
        "log.message.timestamp.after.max.ms": str(3 * HOUR_MS), "log.message.timestamp.before.max.ms": "60000"})
    try:
        c = RawClient(b.broker.port)
        create(c, "wide")
        create(c, "narrow", message_timestamp_after_max_ms="0")
        assert produce(c, "wide", (0, stamped(NOW_MS + 3 * HOUR_MS)))[0].error_code == 0
        assert produce(c, "wide", (0, stamped(NOW_MS - 60_001)))[0].error_code == INVALID_TIMESTAMP
        assert produce(c, "narrow", (0, stamped(NOW_MS + 1)))[0].error_code == INVALID_TIMESTAMP
        assert produce(c, "narrow", (0, stamped(NOW_MS)))[0].error_code == 0
        assert _describe_topic(c, "wide", "message.timestamp.after.max.ms") == (
            str(3 * HOUR_MS), 4, [("log.message.timestamp.after.max.ms", str(3 * HOUR_MS)),
                                  ("log.message.timestamp.after.max.ms", str(HOUR_MS))])
        c.close()
    finally:
        b.stop()
    for key in ("log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms"):
        assert ServeConfig.build({key: "0"}).warnings == ()
        with pytest.raises(ValueError, match=key):
            ServeConfig.build({key: "-1"})


def test_a_real_producer_gets_invalid_timestamp_for_a_record_two_hours_ahead(tmp_path):
    """librdkafka reports Kafka's error to the delivery callback (a permanent error: not retried, so
    flush returns at once); the record is not stored."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import time

    b = BrokerThread(tmp_path)
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        reports = []
        ahead = int(time.time() * 1000) + 2 * HOUR_MS
        producer.produce("ts", value=b"late", timestamp=ahead, on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(15.0) == 0  # its own batch: the next record is not refused with it
        producer.produce("ts", value=b"now", on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(15.0) == 0
        assert [None if e is None else e.code() for e in reports] == [confluent_kafka.KafkaError.INVALID_TIMESTAMP, None]
        assert log_end(b, "ts") == 1
    finally:
        b.stop()
