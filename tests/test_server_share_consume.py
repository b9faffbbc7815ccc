"""Real `confluent_kafka` ShareConsumers and Producer against `sharegroup serve` (one broker per module).

Each test uses its own topic and group. "Never delivered again" is checked exactly, without waiting an
arbitrary time: a sentinel record produced after the acknowledgements is consumed, and it must be the
only record that arrives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import AcknowledgeType  # noqa: E402

from sharegroup.server.codec import build, request_class  # noqa: E402
from tests.server_harness import ROOT, RawClient, ServeProcess  # noqa: E402
from tests.share_clients import (  # noqa: E402
    DELIVERY_COUNT_LIMIT,
    SERVE_ARGS,
    WAIT_S,
    poll_until,
    produce,
    share_consumer,
    summary,
)

SENTINEL = b"sentinel"


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("share-e2e"), *SERVE_ARGS, "--metrics-port", "0")
    server.metrics_url = _readline(server.proc, stream="stderr").split(" metrics on ", 1)[1].strip()
    yield server
    code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def records(n: int, prefix: bytes = b"") -> list[tuple[bytes, bytes, list]]:
    return [(prefix + b"k%d" % i, prefix + b"v%d" % i, [("h", b"%d" % i)]) for i in range(n)]


def only_sentinel_arrives(serve, consumer, topic: str) -> None:
    """Produce a sentinel and consume until it arrives: nothing else may come first."""
    produce(serve.bootstrap, topic, [(SENTINEL, SENTINEL, None)])
    seen = poll_until(consumer, lambda got: any(m.value() == SENTINEL for m in got),
                      on_message=_accept_if_explicit(consumer))
    assert [m.value() for m in seen] == [SENTINEL]


def wait_for_members(serve, group: str, count: int) -> None:
    """Until the broker describes `group` with `count` members that all hold an assignment (bounded)."""
    client = RawClient(serve.port)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            body = build(request_class(77, 1), {"group_ids": [group], "include_authorized_operations": False})
            (described,) = client.request(77, 1, body).groups
            members = [m for m in described.members if m.assignment.topic_partitions]
            if len(members) >= count:
                return
            assert time.monotonic() < deadline, f"{len(members)} of {count} members assigned"
            time.sleep(0.05)
    finally:
        client.close()


def _accept_if_explicit(consumer):
    def accept(message):
        try:
            consumer.acknowledge(message)
        except Exception:  # implicit mode: poll acknowledges
            pass
    return accept


def test_explicit_acknowledgement_delivers_keys_values_headers_byte_exact(serve):
    topic, group = "explicit-bytes", "g-explicit"
    sent = [
        (b"\x00\xffkey", b"\x00binary\xff" * 3, [("h1", b"\x00\x01"), ("h2", None), ("h1", b"again")]),
        (None, b"no key", []),
        (b"empty value", b"", [("\u00e9t\u00e9", b"utf8 key")]),
        (b"big", bytes(range(256)) * 40, None),
    ]
    assert produce(serve.bootstrap, topic, sent) == 4
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        got = poll_until(consumer, lambda seen: len(seen) >= 4, on_message=consumer.acknowledge)
        assert [(m.key(), m.value(), m.headers() or []) for m in got] == [(k, v, h or []) for k, v, h in sent]
        assert [(m.topic(), m.partition(), m.offset(), m.delivery_count()) for m in got] == [
            (topic, 0, i, 1) for i in range(4)]
        result = consumer.commit_sync(WAIT_S)
        assert {(tp.topic, tp.partition): err for tp, err in result.items()} == {(topic, 0): None}
        only_sentinel_arrives(serve, consumer, topic)
    finally:
        consumer.close()


def test_implicit_acknowledgement_accepts_what_was_polled(serve):
    topic, group = "implicit", "g-implicit"
    produce(serve.bootstrap, topic, records(30))
    consumer = share_consumer(serve.bootstrap, group, topic, max_poll_records=10)
    try:
        got = poll_until(consumer, lambda seen: len(seen) >= 30)
        assert sorted(m.offset() for m in got) == list(range(30))
        assert {m.delivery_count() for m in got} == {1}
        result = consumer.commit_sync(WAIT_S)
        assert all(err is None for err in result.values())
        only_sentinel_arrives(serve, consumer, topic)
    finally:
        consumer.close()


def test_release_redelivers_with_delivery_count_2_and_reject_never_again(serve):
    topic, group = "release-reject", "g-release"
    produce(serve.bootstrap, topic, records(10))
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        def first_round(message):  # release 0-4, reject 5-6, accept 7-9
            offset = message.offset()
            kind = (AcknowledgeType.RELEASE if offset < 5 else AcknowledgeType.REJECT if offset < 7
                    else AcknowledgeType.ACCEPT)
            consumer.acknowledge(message, kind)

        first = poll_until(consumer, lambda seen: len(seen) >= 10, on_message=first_round)
        assert [summary(m)[0::4] for m in first] == [(i, 1) for i in range(10)]
        assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
        again = poll_until(consumer, lambda seen: len(seen) >= 5, on_message=consumer.acknowledge)
        assert [(m.offset(), m.key(), m.delivery_count()) for m in again] == [(i, b"k%d" % i, 2) for i in range(5)]
        assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
        only_sentinel_arrives(serve, consumer, topic)
    finally:
        consumer.close()


def test_delivery_count_limit_archives_a_record_released_every_time(serve):
    topic, group = "poison", "g-poison"
    produce(serve.bootstrap, topic, [(b"poison", b"p", None)])
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        counts = []
        for _ in range(DELIVERY_COUNT_LIMIT):
            (message,) = poll_until(consumer, lambda seen: len(seen) >= 1,
                                    on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.RELEASE))
            counts.append((message.offset(), message.delivery_count()))
            assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
        assert counts == [(0, 1), (0, 2), (0, 3)]
        only_sentinel_arrives(serve, consumer, topic)  # offset 0 was archived at the limit
    finally:
        consumer.close()


def test_two_consumers_share_one_partition_without_double_delivery(serve):
    """Both members are assigned the one partition; batches produced while both poll are split between
    them, each record exactly once."""
    topic, group, batches = "shared", "g-shared", 20
    n = 10 * batches
    produce(serve.bootstrap, topic, [(b"first", b"first", None)])  # creates the topic
    consumers = [share_consumer(serve.bootstrap, group, topic, max_poll_records=7) for _ in range(2)]
    got: list[list[int]] = [[], []]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            poll_until(consumers[i], lambda _seen: len(got[0]) + len(got[1]) >= n + 1,
                       on_message=lambda m: got[i].append(m.offset()))
            consumers[i].commit_sync(WAIT_S)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        wait_for_members(serve, group, 2)
        produce(serve.bootstrap, topic, records(n), batch_records=10)  # a fetch acquires whole batches
        for t in threads:
            t.join(WAIT_S + 10)
        assert not errors, errors
        assert not set(got[0]) & set(got[1])
        assert sorted(got[0] + got[1]) == list(range(n + 1))
        assert got[0] and got[1]  # both consumed
    finally:
        for c in consumers:
            c.close()


CHILD = r"""
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200})
c.subscribe([sys.argv[3]])
got = []
while len(got) < int(sys.argv[4]):
    got += [m.offset() for m in c.poll(0.5) if m.error() is None]
print(" ".join(map(str, sorted(got))), flush=True)
sys.stdin.read()  # hold the records, never acknowledge, until killed
"""


def test_killed_consumer_records_are_redelivered_to_another_consumer(serve):
    topic, group = "killed", "g-killed"
    produce(serve.bootstrap, topic, records(5))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, serve.bootstrap, group, topic, "5"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = _readline(child)
        assert line.split() == ["0", "1", "2", "3", "4"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=WAIT_S)
    consumer = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        got = poll_until(consumer, lambda seen: len(seen) >= 5, on_message=consumer.acknowledge)
        assert [(m.offset(), m.delivery_count()) for m in got] == [(i, 2) for i in range(5)]
        assert all(err is None for err in consumer.commit_sync(WAIT_S).values())
    finally:
        consumer.close()


def _readline(proc: subprocess.Popen, stream: str = "stdout") -> str:
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(getattr(proc, stream).readline()), daemon=True)
    reader.start()
    reader.join(WAIT_S)
    assert out and out[0], f"the process printed nothing on {stream}"
    return out[0]


def wait_for_lock_timeouts(serve, group: str, records: int) -> None:
    """Until the broker's metrics count `records` expired acquisition locks in `group` (bounded)."""
    line = f'sharegroup_acquisition_lock_timeout_total{{group="{group}"}} {float(records)}'
    deadline = time.monotonic() + WAIT_S
    while line not in urllib.request.urlopen(serve.metrics_url, timeout=WAIT_S).read().decode():
        assert time.monotonic() < deadline, f"{records} lock timeouts in {group} never counted"
        time.sleep(0.05)


def test_commit_sync_reports_a_late_acknowledgement_of_a_record_available_again(serve):
    """Acknowledging a record whose lock expired, while it waits AVAILABLE for the next fetch, fails
    with INVALID_RECORD_STATE for that partition and changes nothing: the record is delivered again."""
    topic, group = "late-ack-available", "g-late-available"
    produce(serve.bootstrap, topic, records(1))
    slow = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    other = None
    try:
        (held,) = poll_until(slow, lambda seen: len(seen) >= 1)
        wait_for_lock_timeouts(serve, group, 1)  # the lock (2 s) expired: the record is AVAILABLE again
        slow.acknowledge(held)
        result = slow.commit_sync(WAIT_S)
        assert [(tp.topic, tp.partition) for tp in result] == [(topic, 0)]
        (error,) = result.values()
        assert error is not None and error.args[0].code() == 121  # INVALID_RECORD_STATE
        other = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
        (again,) = poll_until(other, lambda seen: len(seen) >= 1, on_message=other.acknowledge)
        assert (again.offset(), again.delivery_count()) == (0, 2)
        assert all(err is None for err in other.commit_sync(WAIT_S).values())
    finally:
        slow.close()
        if other is not None:
            other.close()


def test_commit_sync_reports_a_stale_acknowledgement_per_partition(serve):
    """Acknowledging a record whose lock expired and which another member acquired meanwhile fails
    with INVALID_RECORD_STATE, reported by commit_sync for that partition."""
    topic, group = "stale-ack", "g-stale"
    produce(serve.bootstrap, topic, records(1))
    slow = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    fast = share_consumer(serve.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    try:
        (held,) = poll_until(slow, lambda seen: len(seen) >= 1)
        # the lock (2 s) expires; the other member acquires the record (delivery 2) and keeps it
        (taken,) = poll_until(fast, lambda seen: len(seen) >= 1)
        assert (taken.offset(), taken.delivery_count()) == (0, 2)
        slow.acknowledge(held)
        result = slow.commit_sync(WAIT_S)
        assert [(tp.topic, tp.partition) for tp in result] == [(topic, 0)]
        (error,) = result.values()
        assert error is not None and error.args[0].code() == 121  # INVALID_RECORD_STATE
        fast.acknowledge(taken)
        assert all(err is None for err in fast.commit_sync(WAIT_S).values())
    finally:
        slow.close()
        fast.close()




def test_a_topic_created_after_subscribing_is_assigned_and_consumed(serve):
    topic, group = "created-later", "g-later"
    consumer = share_consumer(serve.bootstrap, group, topic)
    try:
        assert list(consumer.poll(0.5)) == []  # joined with a subscription to a topic that does not exist
        produce(serve.bootstrap, topic, records(3))  # auto-created: the next heartbeat assigns it
        got = poll_until(consumer, lambda seen: len(seen) >= 3)
        assert [(m.topic(), m.offset(), m.key()) for m in got] == [(topic, i, b"k%d" % i) for i in range(3)]
    finally:
        consumer.close()
