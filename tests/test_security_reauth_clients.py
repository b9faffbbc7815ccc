"""Re-authentication (KIP-368) with a real client: `connections.max.reauth.ms=2000` on the broker, a
`confluent_kafka` ShareConsumer logged in with SCRAM-SHA-512 over SASL_SSL keeps consuming across its
re-authentications (librdkafka re-authenticates before the session lifetime ends), and the broker never
has to close one of its connections for an expired session.

The broker's own counters show that re-authentications happened and that nothing failed or was closed;
every wait is bounded and ends as soon as what it waits for has happened.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

from confluent_kafka import Producer, ShareConsumer  # noqa: E402

from tests.security_harness import PASSWORDS, Certificates, client_config, secured_serve_args  # noqa: E402
from tests.server_harness import ServeProcess  # noqa: E402
from tests.share_clients import WAIT_S, poll_until  # noqa: E402

LIFETIME_MS = 2000


def _scrape(url: str, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" ([0-9.e+]+)"
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


def test_a_share_consumer_keeps_consuming_across_re_authentications(tmp_path):
    certs = Certificates.make(tmp_path / "certs")
    server = ServeProcess(tmp_path / "data", *secured_serve_args(
        certs, "--group-config", "share.auto.offset.reset=earliest",
        "--override", f"connections.max.reauth.ms={LIFETIME_MS}", "--metrics-port", "0"))
    consumer = None
    try:
        url = None
        for _ in range(20):  # warnings may come first on stderr; the metrics line is printed before readiness
            line = server.proc.stderr.readline()
            if " metrics on " in line:
                url = line.split(" metrics on ", 1)[1].strip()
                break
        assert url is not None
        sasl_port = next(int(line.rsplit(":", 1)[1]) for line in server.listener_lines if "(SASL_SSL)" in line)
        config = client_config(certs, f"127.0.0.1:{sasl_port}", "SCRAM-SHA-512", "bob", PASSWORDS["bob"])

        def produce(values: list[bytes]) -> None:
            errors: list = []
            producer = Producer({**config, "linger.ms": 5})
            for value in values:
                producer.produce("reauth", value=value, on_delivery=lambda err, _m: err and errors.append(err))
            assert producer.flush(WAIT_S) == 0 and not errors, errors

        def reauthentications() -> float:
            return _scrape(url, "sharegroup_server_successful_reauthentication_total",
                           listener="SASL_SSL", mechanism="SCRAM-SHA-512")

        produce([b"before-%d" % i for i in range(5)])
        consumer = ShareConsumer({**config, "group.id": "reauth-group", "fetch.wait.max.ms": 200})
        consumer.subscribe(["reauth"])
        first = poll_until(consumer, lambda got: len(got) >= 5)
        assert sorted(m.value() for m in first) == [b"before-%d" % i for i in range(5)]
        consumer.commit_sync()

        # Keep the consumer busy polling until the broker has seen at least two re-authentications of
        # its connections (librdkafka starts them before the 2 s lifetime runs out).
        deadline = time.monotonic() + WAIT_S
        while reauthentications() < 2:
            assert time.monotonic() < deadline, "no re-authentication within the wait"
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()

        produce([b"after-%d" % i for i in range(5)])
        second = poll_until(consumer, lambda got: len(got) >= 5)
        assert sorted(m.value() for m in second) == [b"after-%d" % i for i in range(5)]
        consumer.commit_sync()

        assert reauthentications() >= 2
        assert _scrape(url, "sharegroup_server_failed_reauthentication_total",
                       listener="SASL_SSL", mechanism="SCRAM-SHA-512") == 0
        # No connection was closed by the broker: no expired session, no failed login, no bad frame.
        assert _scrape(url, "sharegroup_server_closed_connections_total") == 0
        assert _scrape(url, "sharegroup_server_expired_connections_killed_total") == 0
    finally:
        if consumer is not None:
            consumer.close()
        server.terminate()
