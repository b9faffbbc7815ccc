"""Transactions across a SIGKILL of `sharegroup serve`: the state under DIR/transactions is recovered, an
open transaction is still open (and aborted when its producer comes back), a committed one stays
committed, and a transaction caught between PrepareCommit and its markers is completed at start."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from sharegroup.coordinator.records import Record  # noqa: E402
from sharegroup.coordinator.transactions import TransactionLogKey, TxnState  # noqa: E402
from sharegroup.server.group_records import FileRecordSink  # noqa: E402
from sharegroup.server.codec import build, request_class  # noqa: E402
from tests.server_harness import RawClient, ServeProcess  # noqa: E402
from tests.share_clients import WAIT_S  # noqa: E402
from tests.test_server_transactions_clients import (  # noqa: E402
    TXN_ARGS,
    describe_transaction,
    read_values,
    topics,
    txn_producer,
)


def restarted(data_dir, before: ServeProcess) -> ServeProcess:
    before.kill()  # SIGKILL: nothing is flushed or closed
    return ServeProcess(data_dir, *TXN_ARGS)


def test_sigkill_between_produce_and_commit_leaves_the_transaction_open_until_its_producer_returns(tmp_path):
    serve = ServeProcess(tmp_path, *TXN_ARGS)
    try:
        topics(serve.bootstrap, "t")
        producer = txn_producer(serve.bootstrap, "tx-open")
        producer.begin_transaction()
        producer.produce("t", b"open")
        assert producer.flush(WAIT_S) == 0
        serve = restarted(tmp_path, serve)
        state = describe_transaction(serve.port, "tx-open")
        assert (state.transaction_state, [(t.topic, list(t.partitions)) for t in state.topics]) == (
            "Ongoing", [("t", [0])])
        successor = txn_producer(serve.bootstrap, "tx-open")  # fences the lost producer: its transaction aborts
        successor.begin_transaction()
        successor.produce("t", b"after")
        successor.commit_transaction(WAIT_S)
        assert read_values(serve.bootstrap, "t", "read_committed", b"after") == [b"after"]
        assert read_values(serve.bootstrap, "t", "read_uncommitted", b"after") == [b"open", b"after"]
    finally:
        serve.kill()


def test_sigkill_after_commit_keeps_the_transaction_committed(tmp_path):
    serve = ServeProcess(tmp_path, *TXN_ARGS)
    try:
        topics(serve.bootstrap, "t")
        producer = txn_producer(serve.bootstrap, "tx-done")
        producer.begin_transaction()
        producer.produce("t", b"committed")
        producer.commit_transaction(WAIT_S)
        serve = restarted(tmp_path, serve)
        assert describe_transaction(serve.port, "tx-done").transaction_state == "CompleteCommit"
        assert read_values(serve.bootstrap, "t", "read_committed", b"committed") == [b"committed"]
        again = txn_producer(serve.bootstrap, "tx-done")  # the id lives on: its epoch is bumped, not reset
        again.begin_transaction()
        again.produce("t", b"second")
        again.commit_transaction(WAIT_S)
        assert read_values(serve.bootstrap, "t", "read_committed", b"second") == [b"committed", b"second"]
        state = describe_transaction(serve.port, "tx-done")
        assert (state.transaction_state, state.producer_epoch) == ("CompleteCommit", 1)
        client = RawClient(serve.port)
        try:
            (topic,) = client.request(61, 0, build(request_class(61, 0), {"topics": [
                {"name": "t", "partition_indexes": [0]}]})).topics
        finally:
            client.close()
        (producer_state,) = topic.partitions[0].active_producers
        assert (producer_state.producer_id, producer_state.producer_epoch, producer_state.current_txn_start_offset) == (
            state.producer_id, 1, -1)
    finally:
        serve.kill()


def test_a_transaction_caught_between_prepare_commit_and_its_markers_is_completed_at_start(tmp_path):
    serve = ServeProcess(tmp_path, *TXN_ARGS)
    try:
        topics(serve.bootstrap, "in", "out")
        producer = txn_producer(serve.bootstrap, "tx-prepared")
        group = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": "eos"})
        producer.begin_transaction()
        producer.produce("out", b"result")
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 7)], group.consumer_group_metadata(), WAIT_S)
        assert producer.flush(WAIT_S) == 0
        group.close()
        serve.kill()
        # The crash came right after PrepareCommit was durable: write that record as the coordinator does.
        sink = FileRecordSink.open(tmp_path / "transactions")
        try:
            (record,) = [r for r in sink.read_all() if r.key == TransactionLogKey("tx-prepared")]
            assert record.value.state == TxnState.ONGOING and record.value.pending_offsets
            import asyncio

            asyncio.run(sink.append([Record(record.key, record.value._replace(state=int(TxnState.PREPARE_COMMIT)))]))
        finally:
            sink.close()
        serve = ServeProcess(tmp_path, *TXN_ARGS)
        assert describe_transaction(serve.port, "tx-prepared").transaction_state == "CompleteCommit"
        assert read_values(serve.bootstrap, "out", "read_committed", b"result") == [b"result"]
        reader = Consumer({"bootstrap.servers": serve.bootstrap, "group.id": "eos"})
        try:
            (committed,) = reader.committed([TopicPartition("in", 0)], WAIT_S)
        finally:
            reader.close()
        assert committed.offset == 7
    finally:
        serve.kill()


def test_read_committed_share_group_across_a_sigkill_gets_every_committed_record_and_no_aborted_one(tmp_path):
    from tests.share_clients import poll_until, share_consumer
    from tests.test_server_transactions_clients import _set_isolation

    serve = ServeProcess(tmp_path, *TXN_ARGS)
    try:
        topics(serve.bootstrap, "st")
        _set_isolation(serve.bootstrap, "rc-group", "read_committed")
        producer = txn_producer(serve.bootstrap, "tx-share")
        producer.begin_transaction()
        producer.produce("st", b"c0")
        producer.commit_transaction(WAIT_S)
        producer.begin_transaction()
        producer.produce("st", b"x0")
        assert producer.flush(WAIT_S) == 0
        producer.abort_transaction(WAIT_S)
        producer.begin_transaction()
        producer.produce("st", b"open")  # still open when the broker dies
        assert producer.flush(WAIT_S) == 0
        serve = restarted(tmp_path, serve)
        successor = txn_producer(serve.bootstrap, "tx-share")  # aborts the transaction the crash left open
        successor.begin_transaction()
        successor.produce("st", b"c1")
        successor.commit_transaction(WAIT_S)
        consumer = share_consumer(serve.bootstrap, "rc-group", "st")
        try:
            got = poll_until(consumer, lambda seen: b"c1" in [m.value() for m in seen])
        finally:
            consumer.close()
        assert sorted(m.value() for m in got) == [b"c0", b"c1"]
    finally:
        serve.kill()


def test_consume_transform_produce_across_a_sigkill_gives_each_input_exactly_once(tmp_path):
    """Exactly once: a pipeline killed with the broker mid-transaction resumes from the offsets of its last
    committed transaction, and read_committed readers of its output see every input once."""
    from tests.share_clients import produce as plain_produce

    serve = ServeProcess(tmp_path, *TXN_ARGS)
    try:
        topics(serve.bootstrap, "src", "dst")
        plain_produce(serve.bootstrap, "src", [(None, b"%d" % i, None) for i in range(6)])

        def step(bootstrap: str, producer, count: int, commit: bool = True) -> None:
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pipeline", "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
            try:
                (start,) = consumer.committed([TopicPartition("src", 0)], WAIT_S)
                consumer.assign([TopicPartition("src", 0, max(start.offset, 0))])
                producer.begin_transaction()
                taken = 0
                deadline = time.monotonic() + WAIT_S
                while taken < count:
                    assert time.monotonic() < deadline, f"{taken} of {count} inputs from offset {start.offset}"
                    message = consumer.poll(0.2)
                    if message is not None and message.error() is None:
                        producer.produce("dst", message.value() + b"!")
                        taken += 1
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), WAIT_S)
                if commit:
                    producer.commit_transaction(WAIT_S)
                else:
                    assert producer.flush(WAIT_S) == 0
            finally:
                consumer.close()

        step(serve.bootstrap, txn_producer(serve.bootstrap, "pipeline-1"), 2)
        step(serve.bootstrap, txn_producer(serve.bootstrap, "pipeline-1"), 2, commit=False)  # the crash comes here
        serve = restarted(tmp_path, serve)
        producer = txn_producer(serve.bootstrap, "pipeline-1")  # aborts the interrupted transaction
        step(serve.bootstrap, producer, 4)
        assert read_values(serve.bootstrap, "dst", "read_committed", b"5!") == [b"%d!" % i for i in range(6)]
    finally:
        serve.kill()
