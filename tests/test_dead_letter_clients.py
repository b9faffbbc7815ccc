"""Dead-letter queues for share groups (KIP-1191) with real clients against `sharegroup serve`: confluent_kafka
ShareConsumers reject records or exhaust their deliveries, a plain Consumer reads the DLQ topic, and the
group's DLQ is set with `sharegroup configs`. Each test uses its own topics and group; every wait is bounded.
"""

from __future__ import annotations

import signal
import time
import urllib.request

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import AcknowledgeType, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.server_harness import ServeProcess  # noqa: E402
from tests.share_clients import SERVE_ARGS, WAIT_S, poll_until, produce, share_consumer  # noqa: E402
from tests.test_admin_cli import cli  # noqa: E402
from tests.test_server_share_consume import SENTINEL, _readline  # noqa: E402

OPT_IN = {"errors.deadletterqueue.group.enable": "true"}
REJECTED, EXCEEDED = b"Offset rejected by client.", b"Offset delivery count exceeded the threshold."


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("dlq-e2e"), *SERVE_ARGS, "--metrics-port", "0")
    server.metrics_url = _readline(server.proc, stream="stderr").split(" metrics on ", 1)[1].strip()
    yield server
    code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(name, partitions, config=config or {})],
                                    operation_timeout=WAIT_S).values()
    future.result(WAIT_S)


def set_group(bootstrap: str, group: str, *assignments: str) -> None:
    code, out, err = cli("configs", "--bootstrap-server", bootstrap, "--entity-type", "groups", "--entity-name",
                         group, "--alter", "--add-config", ",".join(assignments))
    assert code == 0, (out, err)


def produce_to(bootstrap: str, topic: str, partition: int, records) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers, partition=partition)
    assert producer.flush(WAIT_S) == 0


def read_dlq(bootstrap: str, topic: str, partition: int, count: int) -> list:
    """The first `count` records of one DLQ partition (bounded wait), as a plain consumer reads them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count} DLQ records in {topic}-{partition}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    return got


def dlq_headers(topic: str, partition: int, offset: int, group: str, count: int, message: bytes) -> list:
    return [("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", b"%d" % partition),
            ("__dlq.errors.offset", b"%d" % offset), ("__dlq.errors.group", group.encode()),
            ("__dlq.errors.delivery.count", b"%d" % count), ("__dlq.errors.message", message)]


def metric(serve, name: str, group: str, reason: str | None = None) -> float:
    labels = f'group="{group}"' + (f',reason="{reason}"' if reason else "")
    prefix = f"{name}{{{labels}}} "
    for line in urllib.request.urlopen(serve.metrics_url, timeout=WAIT_S).read().decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


def wait_metric(serve, name: str, group: str, value: float, reason: str | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while metric(serve, name, group, reason) < value:
        assert time.monotonic() < deadline, f"{name} of {group} never reached {value}"
        time.sleep(0.05)


def reject(consumer, offsets_to_reject) -> list:
    """Poll the partition's first records, reject those in `offsets_to_reject`, accept the rest; commit."""
    def ack(message):
        kind = AcknowledgeType.REJECT if message.offset() in offsets_to_reject else AcknowledgeType.ACCEPT
        consumer.acknowledge(message, kind)

    got = poll_until(consumer, lambda seen: {m.offset() for m in seen} >= set(offsets_to_reject), on_message=ack)
    assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
    return got


def only_sentinel_arrives(bootstrap: str, consumer, topic: str, partition: int = 0) -> None:
    produce_to(bootstrap, topic, partition, [(SENTINEL, SENTINEL, None)])
    seen = poll_until(consumer, lambda got: any(m.value() == SENTINEL for m in got), on_message=consumer.acknowledge)
    assert [m.value() for m in seen] == [SENTINEL]


def test_reject_writes_kafkas_dlq_record_to_source_partition_mod_dlq_partitions(serve):
    topic, dlq, group = "dlq-src-a", "dlq.a", "g-dlq-a"
    create_topic(serve.bootstrap, topic, 3)
    create_topic(serve.bootstrap, dlq, 2, OPT_IN)
    set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}")
    produce_to(serve.bootstrap, topic, 2, [(b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(3)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        before_ms = int(time.time() * 1000)
        reject(consumer, {0, 2})
        got = read_dlq(serve.bootstrap, dlq, 2 % 2, 2)
        after_ms = int(time.time() * 1000)
        assert [(m.key(), m.value(), m.headers()) for m in got] == [
            (None, None, dlq_headers(topic, 2, 0, group, 1, REJECTED)),
            (None, None, dlq_headers(topic, 2, 2, group, 1, REJECTED))]
        assert all(before_ms - 1000 <= m.timestamp()[1] <= after_ms for m in got)  # the write time
        only_sentinel_arrives(serve.bootstrap, consumer, topic, 2)  # archived: never delivered again
        assert metric(serve, "sharegroup_dead_letter_queue_records_total", group) == 2
    finally:
        consumer.close()


def test_copy_record_carries_key_value_and_original_headers_first(serve):
    topic, dlq, group = "dlq-src-b", "dlq.b", "g-dlq-b"
    create_topic(serve.bootstrap, topic)
    create_topic(serve.bootstrap, dlq, 1, OPT_IN)
    set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}",
              "errors.deadletterqueue.copy.record.enable=true")
    produce(serve.bootstrap, topic, [(b"key", b"value", [("orig", b"1"), ("__dlq.errors.group", b"fake")])])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        reject(consumer, {0})
        (record,) = read_dlq(serve.bootstrap, dlq, 0, 1)
        assert (record.key(), record.value()) == (b"key", b"value")
        assert record.headers() == [("orig", b"1"), ("__dlq.errors.group", b"fake"),
                                    *dlq_headers(topic, 0, 0, group, 1, REJECTED)]
    finally:
        consumer.close()


def test_delivery_limit_reached_by_release_is_dead_lettered(serve):
    topic, dlq, group = "dlq-src-c", "dlq.c", "g-dlq-c"
    create_topic(serve.bootstrap, topic)
    create_topic(serve.bootstrap, dlq, 1, OPT_IN)
    set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}", "share.delivery.count.limit=2")
    produce(serve.bootstrap, topic, [(b"poison", b"p", None)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        for _ in range(2):
            poll_until(consumer, lambda seen: len(seen) >= 1,
                       on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.RELEASE))
            assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
        (record,) = read_dlq(serve.bootstrap, dlq, 0, 1)
        assert record.headers() == dlq_headers(topic, 0, 0, group, 2, EXCEEDED)
        only_sentinel_arrives(serve.bootstrap, consumer, topic)
    finally:
        consumer.close()


def test_delivery_limit_reached_by_lock_expiry_is_dead_lettered(serve):
    """Two consumers each take the record and never acknowledge it: the second lock expiry is the limit."""
    topic, dlq, group = "dlq-src-d", "dlq.d", "g-dlq-d"
    create_topic(serve.bootstrap, topic)
    create_topic(serve.bootstrap, dlq, 1, OPT_IN)
    set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}", "share.delivery.count.limit=2",
              "share.record.lock.duration.ms=1000")
    produce(serve.bootstrap, topic, [(b"slow", b"s", None)])
    holders = []
    try:
        for delivery in (1, 2):
            holder = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
            holders.append(holder)
            (message,) = poll_until(holder, lambda seen: len(seen) >= 1)  # held, never acknowledged
            assert message.delivery_count() == delivery
        (record,) = read_dlq(serve.bootstrap, dlq, 0, 1)  # after the second lock expired
        assert record.headers() == dlq_headers(topic, 0, 0, group, 2, EXCEEDED)
    finally:
        for holder in holders:
            holder.close()


def test_without_a_dlq_topic_a_reject_is_archived_as_before(serve):
    topic, group = "dlq-src-e", "g-dlq-e"
    create_topic(serve.bootstrap, topic)
    produce(serve.bootstrap, topic, [(b"k", b"v", None)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        reject(consumer, {0})
        only_sentinel_arrives(serve.bootstrap, consumer, topic)
        assert metric(serve, "sharegroup_dead_letter_queue_produce_requests_total", group) == 0
        assert not [t for t in AdminClient({"bootstrap.servers": serve.bootstrap}).list_topics(
            timeout=WAIT_S).topics if t.startswith("dlq.e")]
    finally:
        consumer.close()


@pytest.mark.parametrize("case, reason", [
    ("missing", "topic_missing"), ("not-opted-in", "not_enabled"), ("no-prefix", "prefix")])
def test_a_write_that_cannot_be_made_is_counted_and_the_record_archived(serve, case, reason):
    topic, group = f"dlq-src-f-{case}", f"g-dlq-f-{case}"
    dlq = {"missing": "dlq.f-missing", "not-opted-in": "dlq.f-plain", "no-prefix": "f-dead-letters"}[case]
    create_topic(serve.bootstrap, topic)
    if case == "not-opted-in":
        create_topic(serve.bootstrap, dlq)
    elif case == "no-prefix":
        create_topic(serve.bootstrap, dlq, 1, OPT_IN)
    set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}")
    produce(serve.bootstrap, topic, [(b"k", b"v", None)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        reject(consumer, {0})
        wait_metric(serve, "sharegroup_dead_letter_queue_write_failures_total", group, 1, reason)
        only_sentinel_arrives(serve.bootstrap, consumer, topic)  # archived anyway
        assert metric(serve, "sharegroup_dead_letter_queue_records_total", group) == 0
    finally:
        consumer.close()


def test_the_dlq_set_while_a_consumer_runs_applies_to_the_next_reject(serve):
    topic, dlq, group = "dlq-src-g", "dlq.g", "g-dlq-g"
    create_topic(serve.bootstrap, topic)
    create_topic(serve.bootstrap, dlq, 1, OPT_IN)
    produce(serve.bootstrap, topic, [(b"k0", b"v0", None)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        reject(consumer, {0})  # no DLQ yet
        set_group(serve.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}")
        produce(serve.bootstrap, topic, [(b"k1", b"v1", None)])
        reject(consumer, {1})
        (record,) = read_dlq(serve.bootstrap, dlq, 0, 1)
        assert record.headers() == dlq_headers(topic, 0, 1, group, 1, REJECTED)
        code, out, _ = cli("share-groups", "--bootstrap-server", serve.bootstrap, "--describe", "--group", group)
        assert code == 0 and f"Share group '{group}' dead-letter queue topic: {dlq}" in out
    finally:
        consumer.close()


def test_sigkill_after_confirmed_rejects_loses_no_dlq_record_and_auto_creates_with_the_prefix(tmp_path):
    """Every reject the broker confirmed is in the DLQ at least once after a SIGKILL and restart, and none is
    delivered again; the DLQ topic is auto-created (prefix, opt-in) because the broker allows it."""
    args = (*SERVE_ARGS, "--override", "errors.deadletterqueue.auto.create.topics.enable=true")
    topic, dlq, group, n = "dlq-src-k", "dlq.k-auto", "g-dlq-k", 20
    server = ServeProcess(tmp_path, *args)
    try:
        create_topic(server.bootstrap, topic)
        set_group(server.bootstrap, group, f"errors.deadletterqueue.topic.name={dlq}")
        produce(server.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, None) for i in range(n)])
        consumer = share_consumer(server.bootstrap, group, topic, share_acknowledgement_mode="explicit")
        rejected = set(range(0, n, 2))
        try:
            reject(consumer, rejected)  # confirmed by commit_sync
        finally:
            server.terminate(signal.SIGKILL)
            consumer.close()
        server = ServeProcess(tmp_path, *args)
        consumer = share_consumer(server.bootstrap, group, topic, share_acknowledgement_mode="explicit")
        try:
            only_sentinel_arrives(server.bootstrap, consumer, topic)  # loads the share-partition: replays
            got = read_dlq(server.bootstrap, dlq, 0, len(rejected))
            offsets = [int(dict(m.headers())["__dlq.errors.offset"]) for m in got]
            assert set(offsets) == rejected  # at least once each (duplicates allowed)
        finally:
            consumer.close()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        from confluent_kafka.admin import ConfigResource

        (future,) = admin.describe_configs([ConfigResource("topic", dlq)], request_timeout=WAIT_S).values()
        assert future.result(WAIT_S)["errors.deadletterqueue.group.enable"].value == "true"
    finally:
        server.terminate()
