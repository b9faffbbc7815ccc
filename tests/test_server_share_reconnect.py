"""A real `confluent_kafka` ShareConsumer that loses its connection and reconnects at once.

The consumer talks to an in-process broker through `tests.tcp_proxy.TcpProxy` (the broker advertises the
proxy), so the test decides the order the broker sees things in: the consumer's connection is cut on the
client's side only, librdkafka reconnects and re-opens its share session (epoch 0) on the new connection,
that first fetch long-polls, and only then does the broker see the old connection close. The session
belongs to the new connection, so it survives: the consumer keeps consuming on it, nothing is
redelivered, and the broker never answers SHARE_SESSION_NOT_FOUND.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import ShareConsumer  # noqa: E402

from tests.server_harness import BrokerThread  # noqa: E402
from tests.share_clients import WAIT_S, poll_until, produce  # noqa: E402
from tests.tcp_proxy import TcpProxy  # noqa: E402

TIMINGS = {"group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 5000,
           "group.share.min.heartbeat.interval.ms": 100, "group.share.heartbeat.interval.ms": 250}


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_share_session_survives_its_member_reconnecting_quickly(tmp_path):
    """Rule: closing a connection removes only the share sessions that connection owns."""
    proxy = TcpProxy()
    broker = BrokerThread(tmp_path, share=True,
                          overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}", **TIMINGS},
                          group_configs={"share.auto.offset.reset": "earliest"})
    proxy.upstream_port = broker.broker.port
    bootstrap = f"127.0.0.1:{proxy.port}"
    consumer = None
    try:
        produce(bootstrap, "reconnect", [(None, b"before-%d" % i, None) for i in range(3)])
        # A long MaxWaitMs: the first fetch on the new connection is still waiting when the old one closes.
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "reconnect-app",
                                  "fetch.wait.max.ms": 5000})
        consumer.subscribe(["reconnect"])
        first = poll_until(consumer, lambda got: len(got) >= 3)
        assert sorted((m.value(), m.delivery_count()) for m in first) == [(b"before-%d" % i, 1) for i in range(3)]

        manager = broker.share.manager
        (member,) = manager.sessions.members_of("reconnect-app")
        old_session = manager.sessions.get("reconnect-app", member)
        old_links = proxy.open_links()  # the consumer's connections (and any a producer left open)
        old_ids = [broker.connection_id_of(link.upstream_port) for link in old_links]
        for link in old_links:
            proxy.cut_client_side(link)  # the broker still sees these connections open

        def reopened() -> bool:
            consumer.poll(0.05)  # librdkafka reconnects and sends ShareFetch at epoch 0
            session = manager.sessions.get("reconnect-app", member)
            return session is not None and session is not old_session and manager.waiting_fetch_count == 1

        _wait(reopened, "the share session to be re-opened on a new connection and its fetch to wait")
        new_session = manager.sessions.get("reconnect-app", member)

        for link, connection_id in zip(old_links, old_ids):
            proxy.close_upstream(link)  # now the broker sees the old connections close
            broker.wait_until_closed(connection_id)
        assert manager.sessions.get("reconnect-app", member) is new_session
        assert manager.waiting_fetch_count == 1  # the re-opening fetch was still waiting meanwhile

        produce(bootstrap, "reconnect", [(None, b"after-%d" % i, None) for i in range(3)])
        second = poll_until(consumer, lambda got: len(got) >= 3)
        assert sorted((m.value(), m.delivery_count()) for m in second) == [(b"after-%d" % i, 1) for i in range(3)]
        assert manager.sessions.get("reconnect-app", member) is new_session  # never lost, never re-opened
    finally:
        if consumer is not None:
            consumer.close()
        broker.stop()
        proxy.close()
