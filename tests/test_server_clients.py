"""Real Kafka clients (confluent_kafka / librdkafka) against the broker: AdminClient and Producer.

These run in-process (the broker on a background event loop) over the durable topic store in a
temporary directory, so what the clients were told can be checked against what the store holds.
"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.server_harness import BrokerThread  # noqa: E402

TIMEOUT_S = 15.0


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path)
    try:
        yield b
    finally:
        b.stop()


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10_000})


def test_admin_create_topics_then_list_and_describe(broker):
    admin = _admin(broker)
    futures = admin.create_topics([NewTopic("orders", 3, 1), NewTopic("audit", 1, 1)], request_timeout=TIMEOUT_S)
    assert {name: f.result(TIMEOUT_S) for name, f in futures.items()} == {"orders": None, "audit": None}
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert metadata.controller_id == 1
    assert metadata.cluster_id == broker.broker.cluster_id
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(1, "127.0.0.1", broker.broker.port)]
    assert {name: sorted(t.partitions) for name, t in metadata.topics.items()} == {"orders": [0, 1, 2], "audit": [0]}
    assert all(p.leader == 1 and p.replicas == [1] and p.isrs == [1] for p in metadata.topics["orders"].partitions.values())

    from confluent_kafka import TopicCollection

    described = admin.describe_topics(TopicCollection(["orders"]), request_timeout=TIMEOUT_S)["orders"].result(TIMEOUT_S)
    assert described.name == "orders"
    assert [p.id for p in described.partitions] == [0, 1, 2]
    assert str(described.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"  # a real, non-zero topic id


def test_admin_create_topics_errors_reach_the_client(broker):
    admin = _admin(broker)
    admin.create_topics([NewTopic("dup", 1, 1)])["dup"].result(TIMEOUT_S)
    futures = admin.create_topics([NewTopic("dup", 1, 1), NewTopic("rf", 1, 3), NewTopic("bad name", 1, 1)],
                                  request_timeout=TIMEOUT_S)
    errors = {}
    for name, future in futures.items():
        with pytest.raises(KafkaException) as info:
            future.result(TIMEOUT_S)
        errors[name] = info.value.args[0].code()
    from confluent_kafka import KafkaError

    assert errors == {"dup": KafkaError.TOPIC_ALREADY_EXISTS, "rf": KafkaError.INVALID_REPLICATION_FACTOR,
                      "bad name": KafkaError.TOPIC_EXCEPTION}


def test_admin_validate_only_creates_nothing(broker):
    admin = _admin(broker)
    admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True)["dry"].result(TIMEOUT_S)
    assert "dry" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_idempotent_producer_with_acks_all_gets_exact_offsets(broker):
    admin = _admin(broker)  # kept referenced: a destroyed client fails its pending futures
    admin.create_topics([NewTopic("events", 2, 1)])["events"].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0})
    reports = []

    def delivered(err, msg):
        reports.append((err, msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()))

    for i in range(12):
        producer.produce("events", key=b"key-%d" % i, value=b"value-%d" % i, partition=i % 2,
                         headers=[("trace", b"t%d" % i), ("n", str(i).encode())], on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    assert all(err is None for err, *_ in reports)
    by_partition = {p: [(off, key) for _, part, off, key, *_ in reports if part == p] for p in (0, 1)}
    assert by_partition[0] == [(j, b"key-%d" % (2 * j)) for j in range(6)]
    assert by_partition[1] == [(j, b"key-%d" % (2 * j + 1)) for j in range(6)]
    assert broker.broker.request_counts["InitProducerId"] == 1


def test_producer_auto_creates_its_topic(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    reports = []
    producer.produce("fresh", value=b"x", on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())))
    assert producer.flush(TIMEOUT_S) == 0
    assert reports == [(None, 0, 0)]
    assert broker.store.topic_by_name("fresh") is not None
