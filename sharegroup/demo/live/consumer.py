"""One consumer of the live demo: a real `confluent_kafka.ShareConsumer` in a child process.

It joins the share group, polls, acknowledges every record explicitly (`live.workload.ack_for`),
commits the acknowledgements with `commit_sync` after each batch, and reports each batch to the parent
over its pipe: per delivery (partition, offset, delivery count, acknowledgement, whether the broker
took the acknowledgement, digest of key/value/headers). A `Connection.send` is a complete write to the
pipe, so what was sent before a SIGKILL is still read by the parent.

The victim (`kill_at_batch` > 0) acknowledges the first half of that batch, commits it, reports the
other half as held and waits; the parent then kills it with SIGKILL, mid-batch.

Messages to the parent (tuples): ("joined", index), ("batch", index, deliveries), ("holding", index,
deliveries), ("done", index, polls), ("error", index, text).
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from .workload import ack_for, record_digest

__all__ = ["ConsumerSpec", "consume"]

POLL_TIMEOUT_S = 0.2
COMMIT_TIMEOUT_S = 15.0
HOLD_LIMIT_S = 60.0  # the victim waits at most this long for its SIGKILL


class ConsumerSpec:
    """What one child needs (picklable: the children are spawned, not forked)."""

    def __init__(self, index: int, bootstrap: str, group_id: str, topic: str, kill_at_batch: int = 0,
                 client_config: dict[str, Any] | None = None) -> None:
        self.index = index
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.topic = topic
        self.kill_at_batch = kill_at_batch
        self.client_config = dict(client_config or {})


def consume(spec: ConsumerSpec, conn: Any, stop: Any) -> None:
    """The child's main: poll, acknowledge, commit, report, until `stop` is set (or killed)."""
    try:
        _consume(spec, conn, stop)
    except BaseException:  # reported, so the parent can say why a consumer ended
        conn.send(("error", spec.index, traceback.format_exc(limit=5)))
    finally:
        conn.close()


def _consume(spec: ConsumerSpec, conn: Any, stop: Any) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    ack_types = {int(t): t for t in AcknowledgeType}
    config = {"bootstrap.servers": spec.bootstrap, "group.id": spec.group_id,
              "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200,
              "client.id": f"demo-consumer-{spec.index}", "log_level": 3}
    config.update(spec.client_config)
    consumer = ShareConsumer(config)
    consumer.subscribe([spec.topic])
    conn.send(("joined", spec.index))
    polls = batches = 0
    try:
        while not stop.is_set():
            messages = consumer.poll(POLL_TIMEOUT_S)
            polls += 1
            messages = [m for m in messages if m.error() is None]
            if not messages:
                continue
            batches += 1
            victim = spec.kill_at_batch > 0 and batches >= spec.kill_at_batch and len(messages) >= 2
            handled = messages[: len(messages) // 2] if victim else messages
            deliveries = []
            for message in handled:
                ack = ack_for(message.value(), message.delivery_count())
                consumer.acknowledge(message, ack_types[int(ack)])
                deliveries.append([message.partition(), message.offset(), message.delivery_count(), int(ack), True,
                                   record_digest(message.key(), message.value(), message.headers())])
            failed = {tp.partition for tp, error in consumer.commit_sync(COMMIT_TIMEOUT_S).items() if error is not None}
            for delivery in deliveries:
                delivery[4] = delivery[0] not in failed
            conn.send(("batch", spec.index, [tuple(d) for d in deliveries]))
            if victim:
                held = [(m.partition(), m.offset(), m.delivery_count(), 0, False,
                         record_digest(m.key(), m.value(), m.headers())) for m in messages[len(handled):]]
                conn.send(("holding", spec.index, held))
                deadline = time.monotonic() + HOLD_LIMIT_S
                while time.monotonic() < deadline:  # the parent's SIGKILL ends this process here
                    time.sleep(0.05)
                raise RuntimeError("the victim was never killed")
    finally:
        consumer.close()  # leaves the group; what it still holds is released
    conn.send(("done", spec.index, polls))
