"""Helpers for the end-to-end tests with real `confluent_kafka` clients against `sharegroup serve`.

Every wait is bounded (`WAIT_S`), and waiting ends as soon as what is awaited arrived: nothing here
sleeps for a fixed time.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from confluent_kafka import KafkaException, Producer, ShareConsumer

WAIT_S = 20.0

# Short timings for the e2e broker: locks of 2 s, sessions of 5 s with 250 ms heartbeats (a loaded test
# machine must not expire a live member), 3 deliveries, new groups start at the earliest offset (Kafka's
# default is latest).
SERVE_ARGS = (
    "--override", "group.share.min.record.lock.duration.ms=1000",
    "--override", "group.share.min.session.timeout.ms=1000",
    "--override", "group.share.session.timeout.ms=5000",
    "--override", "group.share.min.heartbeat.interval.ms=100",
    "--override", "group.share.heartbeat.interval.ms=250",
    "--group-config", "share.record.lock.duration.ms=2000",
    "--group-config", "share.delivery.count.limit=3",
    "--group-config", "share.auto.offset.reset=earliest",
)
LOCK_DURATION_MS = 2000
DELIVERY_COUNT_LIMIT = 3


def produce(bootstrap: str, topic: str, records: Iterable[tuple[Any, Any, Any]], batch_records: int = 0) -> int:
    """Produce (key, value, headers) records with acks=all; returns how many were delivered. With
    `batch_records`, every that many records are flushed, so they form producer batches of their own."""
    delivered: list[Any] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors if err is not None else delivered).append(err or msg)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i, (key, value, headers) in enumerate(records, 1):
        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
        if batch_records and i % batch_records == 0:
            assert producer.flush(WAIT_S) == 0
    remaining = producer.flush(WAIT_S)
    assert remaining == 0 and not errors, (remaining, errors)
    return len(delivered)


def share_consumer(bootstrap: str, group: str, topic: str, **config: Any) -> ShareConsumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "fetch.wait.max.ms": 200}
    conf.update({key.replace("_", "."): value for key, value in config.items()})
    consumer = ShareConsumer(conf)
    consumer.subscribe([topic])
    return consumer


def consume_or_refusal(config: dict[str, Any], group: str, topic: str, count: int) -> tuple[list[bytes], int | None]:
    """A ShareConsumer with `config` (bootstrap and security settings) reads up to `count` values of
    `topic` in `group` and acknowledges them: (values, None), or (values so far, the error code that
    stopped it) when the broker refuses it (an authorization failure surfaces from `poll`)."""
    consumer = ShareConsumer({**config, "group.id": group, "fetch.wait.max.ms": 200})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            try:
                messages = consumer.poll(0.5)
            except KafkaException as exc:
                return values, exc.args[0].code()
            values += [m.value() for m in messages if m.error() is None]
        if values:
            consumer.commit_sync()  # acknowledge what was delivered (ShareAcknowledge, also authorized)
    finally:
        consumer.close()
    return values, None


def poll_until(consumer: ShareConsumer, done: Callable[[list[Any]], bool],
               on_message: Callable[[Any], None] | None = None, timeout_s: float = WAIT_S) -> list[Any]:
    """Poll until `done(all messages so far)`; each message goes to `on_message` (acknowledge it there
    in explicit mode). Fails after `timeout_s`."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while not done(seen):
        assert time.monotonic() < deadline, f"timed out after {len(seen)} messages"
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append(message)
            if on_message is not None:
                on_message(message)
    return seen


def summary(message: Any) -> tuple[int, bytes | None, bytes | None, list | None, int]:
    return (message.offset(), message.key(), message.value(), message.headers(), message.delivery_count())
