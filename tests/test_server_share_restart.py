"""A real ShareConsumer keeps consuming across a SIGKILL and restart of `sharegroup serve` on the same
data directory and port: nothing produced with acks=all is lost, and no record whose acknowledgement
the consumer saw succeed is delivered again."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import AcknowledgeType  # noqa: E402

from tests.server_harness import ServeProcess  # noqa: E402
from tests.share_clients import SERVE_ARGS, WAIT_S, poll_until, produce, share_consumer  # noqa: E402


def test_broker_sigkill_and_restart_mid_consumption(tmp_path):
    topic, group, n = "restart", "g-restart", 40
    server = ServeProcess(tmp_path, *SERVE_ARGS)
    consumer = None
    try:
        produce(server.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, [("i", b"%d" % i)]) for i in range(n)],
                batch_records=10)  # four producer batches: a fetch acquires whole batches
        consumer = share_consumer(server.bootstrap, group, topic, share_acknowledgement_mode="explicit",
                                  max_poll_records=5, reconnect_backoff_max_ms=200)
        acked = [m.offset() for m in poll_until(consumer, lambda seen: len(seen) >= 1, on_message=consumer.acknowledge)]
        result = consumer.commit_sync(WAIT_S)
        assert list(result.values()) == [None]
        in_flight = [m for m in poll_until(consumer, lambda seen: len(seen) >= 1)]  # held, not acknowledged
        assert acked == list(range(10)) and [m.offset() for m in in_flight] == list(range(10, 20))

        server.kill()  # SIGKILL
        server = ServeProcess(tmp_path, *SERVE_ARGS, "--port", str(server.port))

        for message in in_flight:  # their locks died with the broker: these acknowledgements cannot count
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
        after = poll_until(consumer, lambda seen: set(acked) | {m.offset() for m in seen} >= set(range(n)),
                           on_message=consumer.acknowledge)
        assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
        after_offsets = [m.offset() for m in after]
        assert not set(after_offsets) & set(acked)  # acknowledged before the crash: never again
        assert sorted(set(acked) | set(after_offsets)) == list(range(n))  # nothing lost
        assert {(m.key(), m.value()) for m in after} == {(b"k%d" % i, b"v%d" % i) for i in after_offsets}
    finally:
        if consumer is not None:
            consumer.close()
        code, _out, err = server.terminate()
    assert code == 0, err[-2000:]
