"""Transactions end to end with real clients against `sharegroup serve`: confluent_kafka's transactional
producer (commit, abort, fencing, send_offsets_to_transaction, a coordinator timeout), read_committed
and read_uncommitted consumers, share groups in both isolation levels, and aiokafka's transactional
producer. Every wait is bounded and ends as soon as what it waits for arrived."""

from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from sharegroup.server.codec import build, request_class  # noqa: E402
from tests.server_harness import RawClient, ServeProcess  # noqa: E402
from tests.share_clients import SERVE_ARGS, WAIT_S, poll_until, produce, share_consumer  # noqa: E402

# Timed-out transactions are looked for every 100 ms (Kafka's default is 10 s).
TXN_ARGS = (*SERVE_ARGS, "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=100")


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("txn-e2e"), *TXN_ARGS)
    yield server
    code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions) for n in names]).values():
        future.result(WAIT_S)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    conf.update(config)
    producer = Producer(conf)
    producer.init_transactions(WAIT_S)
    return producer


def read_values(bootstrap: str, topic: str, isolation: str, until: bytes, partition: int = 0) -> list[bytes]:
    """Every value of a partition from the start up to and including `until`, read with `isolation`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "isolation.level": isolation,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while until not in values:
            assert time.monotonic() < deadline, f"{until!r} not read ({isolation}): {values}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def describe_transaction(port: int, transactional_id: str):
    client = RawClient(port)
    try:
        (state,) = client.request(65, 0, build(request_class(65, 0), {"transactional_ids": [transactional_id]})
                                  ).transaction_states
        return state
    finally:
        client.close()


def wait_for_state(port: int, transactional_id: str, state: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while describe_transaction(port, transactional_id).transaction_state != state:
        assert time.monotonic() < deadline, describe_transaction(port, transactional_id)
        time.sleep(0.05)


def test_commit_and_abort_across_two_topics_read_committed_and_uncommitted(serve):
    a, b = unique("txa"), unique("txb")
    topics(serve.bootstrap, a, b)
    producer = txn_producer(serve.bootstrap, unique("tx"))
    producer.begin_transaction()
    for i in range(3):
        producer.produce(a, b"c%d" % i)
        producer.produce(b, b"c%d" % i)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(a, b"x%d" % i)
        producer.produce(b, b"x%d" % i)
    assert producer.flush(WAIT_S) == 0  # written to the partitions, then aborted
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    producer.produce(a, b"last")
    producer.produce(b, b"last")
    producer.commit_transaction(WAIT_S)
    for topic in (a, b):
        assert read_values(serve.bootstrap, topic, "read_committed", b"last") == [b"c0", b"c1", b"c2", b"last"]
        assert read_values(serve.bootstrap, topic, "read_uncommitted", b"last") == [
            b"c0", b"c1", b"c2", b"x0", b"x1", b"last"]


def test_an_open_transaction_holds_read_committed_readers_at_its_first_offset(serve):
    topic = unique("lso")
    topics(serve.bootstrap, topic)
    producer = txn_producer(serve.bootstrap, unique("tx"))
    producer.begin_transaction()
    producer.produce(topic, b"open")
    assert producer.flush(WAIT_S) == 0
    produce(serve.bootstrap, topic, [(None, b"plain", None)])  # after the open transaction's first offset
    consumer = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": unique("g"),
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), WAIT_S)
        assert (low, high) == (0, 0)  # LATEST under read_committed is the last stable offset
    finally:
        consumer.close()
    producer.commit_transaction(WAIT_S)
    assert read_values(serve.bootstrap, topic, "read_committed", b"plain") == [b"open", b"plain"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_zombie(serve):
    topic, transactional_id = unique("zombie"), unique("tx")
    topics(serve.bootstrap, topic)
    zombie = txn_producer(serve.bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    assert zombie.flush(WAIT_S) == 0
    successor = txn_producer(serve.bootstrap, transactional_id)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(WAIT_S)
    assert fenced.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(WAIT_S)
    assert read_values(serve.bootstrap, topic, "read_committed", b"successor") == [b"successor"]
    assert describe_transaction(serve.port, transactional_id).producer_epoch == 2


def test_consume_transform_produce_moves_offsets_only_on_commit(serve):
    source, sink, group = unique("in"), unique("out"), unique("ctp")
    topics(serve.bootstrap, source, sink)
    produce(serve.bootstrap, source, [(None, b"%d" % i, None) for i in range(6)])
    consumer = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = txn_producer(serve.bootstrap, unique("tx"))

    def transform(count: int, commit: bool) -> None:
        producer.begin_transaction()
        taken = 0
        deadline = time.monotonic() + WAIT_S
        while taken < count:
            assert time.monotonic() < deadline
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            producer.produce(sink, message.value() + b"!")
            taken += 1
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), WAIT_S)
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            assert producer.flush(WAIT_S) == 0
            producer.abort_transaction(WAIT_S)

    def committed() -> int:
        (tp,) = consumer.committed([TopicPartition(source, 0)], WAIT_S)
        return tp.offset

    try:
        transform(3, commit=False)
        assert committed() < 0  # an aborted transaction's offsets never become committed
        consumer.seek(TopicPartition(source, 0, 0))
        transform(3, commit=True)
        assert committed() == 3
        transform(3, commit=True)
        assert committed() == 6
    finally:
        consumer.close()
    assert read_values(serve.bootstrap, sink, "read_committed", b"5!") == [b"%d!" % i for i in range(6)]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(serve):
    topic, transactional_id = unique("timeout"), unique("tx")
    topics(serve.bootstrap, topic)
    producer = txn_producer(serve.bootstrap, transactional_id, **{"transaction.timeout.ms": 1000,
                                                                   "socket.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, b"late")
    assert producer.flush(WAIT_S) == 0
    wait_for_state(serve.port, transactional_id, "CompleteAbort")
    with pytest.raises(KafkaException):
        producer.commit_transaction(WAIT_S)
    produce(serve.bootstrap, topic, [(None, b"after", None)])
    assert read_values(serve.bootstrap, topic, "read_committed", b"after") == [b"after"]


def _set_isolation(bootstrap: str, group: str, level: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    change = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)])
    assert list(admin.incremental_alter_configs([change], request_timeout=WAIT_S).values())[0].result() is None


def test_share_groups_read_committed_never_get_aborted_records_read_uncommitted_get_both(serve):
    topic = unique("share-txn")
    topics(serve.bootstrap, topic)
    committed_group, uncommitted_group = unique("rc"), unique("ru")
    _set_isolation(serve.bootstrap, committed_group, "read_committed")
    producer = txn_producer(serve.bootstrap, unique("tx"))
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"c%d" % i)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"x%d" % i)
    assert producer.flush(WAIT_S) == 0
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, b"last")
    producer.commit_transaction(WAIT_S)

    def consume(group: str, done) -> list[bytes]:
        consumer = share_consumer(serve.bootstrap, group, topic)
        try:
            return sorted(m.value() for m in poll_until(consumer, lambda got: done([m.value() for m in got])))
        finally:
            consumer.close()

    assert consume(committed_group, lambda values: b"last" in values) == [b"c0", b"c1", b"c2", b"last"]
    assert consume(uncommitted_group, lambda values: len(values) >= 6) == [b"c0", b"c1", b"c2", b"last", b"x0", b"x1"]


def test_aiokafka_transactional_producer_commits_and_aborts(serve):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    topic = unique("aio")
    topics(serve.bootstrap, topic)

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=serve.bootstrap, transactional_id=unique("aio-tx"))
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept")
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"end")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=serve.bootstrap, isolation_level="read_committed",
                                             auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + WAIT_S
            while b"end" not in values:
                assert time.monotonic() < deadline, values
                batches = await consumer.getmany(timeout_ms=200)
                values += [m.value for messages in batches.values() for m in messages]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"kept", b"end"]


def test_send_offsets_of_a_subscribed_group_member_is_checked_and_committed(serve):
    """KIP-447: the offsets carry the member's generation and member id, which the coordinator checks."""
    source, sink, group = unique("in"), unique("out"), unique("member")
    topics(serve.bootstrap, source, sink)
    produce(serve.bootstrap, source, [(None, b"%d" % i, None) for i in range(3)])
    consumer = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = txn_producer(serve.bootstrap, unique("tx"))
    try:
        got = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 3:
            assert time.monotonic() < deadline, got
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
        metadata = consumer.consumer_group_metadata()
        producer.begin_transaction()
        for value in got:
            producer.produce(sink, value + b"!")
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), metadata, WAIT_S)
        producer.commit_transaction(WAIT_S)
        (committed,) = consumer.committed([TopicPartition(source, 0)], WAIT_S)
        assert committed.offset == 3
    finally:
        consumer.close()


def test_kafka_python_transactional_producer_with_offsets(serve):
    """kafka-python's own transaction manager (InitProducerId v3+, AddPartitionsToTxn, AddOffsetsToTxn,
    TxnOffsetCommit, EndTxn up to v3): an aborted transaction, then a committed one with offsets."""
    kafka = pytest.importorskip("kafka")
    topic, source, group = unique("kp"), unique("kp-in"), unique("kp-group")
    topics(serve.bootstrap, topic, source)
    producer = kafka.KafkaProducer(bootstrap_servers=serve.bootstrap, transactional_id=unique("kp-tx"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"dropped").get(WAIT_S)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kept").get(WAIT_S)
        producer.send_offsets_to_transaction({kafka.TopicPartition(source, 0): kafka.OffsetAndMetadata(4, "", -1)},
                                             group)
        producer.commit_transaction()
    finally:
        producer.close(timeout=WAIT_S)
    assert read_values(serve.bootstrap, topic, "read_committed", b"kept") == [b"kept"]
    consumer = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": group})
    try:
        (committed,) = consumer.committed([TopicPartition(source, 0)], WAIT_S)
    finally:
        consumer.close()
    assert committed.offset == 4
