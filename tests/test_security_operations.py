"""What an operator of a secured broker sees: the Prometheus counters of logins, re-authentications and
authorization denials; the warning when `--host`/`--port` meet `listeners`; and the bound on a TLS
handshake that never completes, under the event loop `sharegroup serve` really runs (uvloop when
installed)."""

from __future__ import annotations

import socket

from kio.schema.errors import ErrorCode

from sharegroup.metrics import REGISTRY  # the registry the wire metrics live in
from tests.security_harness import (
    Certificates,
    TlsRawClient,
    handshake,
    metadata,
    plain_login,
    read_until_closed,
    scram_login,
)
from tests.server_harness import IO_TIMEOUT_S, BrokerThread, RawClient, ServeProcess

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_carol="carol-secret";')


def _counters() -> dict[str, float]:
    """The login, re-authentication and denial counters this test moves, by a short name."""
    return {
        "ok_plain": _value("sharegroup_server_successful_authentication_total",
                           listener="SASL_PLAINTEXT", mechanism="PLAIN"),
        "ok_scram": _value("sharegroup_server_successful_authentication_total",
                           listener="INTERNAL", mechanism="SCRAM-SHA-512"),
        "bad_scram": _value("sharegroup_server_failed_authentication_total",
                            listener="INTERNAL", mechanism="SCRAM-SHA-512"),
        "bad_none": _value("sharegroup_server_failed_authentication_total", listener="SASL_PLAINTEXT", mechanism="NONE"),
        "reauth": _value("sharegroup_server_successful_reauthentication_total",
                         listener="SASL_PLAINTEXT", mechanism="PLAIN"),
        "denied": _value("sharegroup_server_authorization_denied_total",
                         listener="SASL_PLAINTEXT", operation="DESCRIBE", resource_type="TOPIC"),
    }


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_logins_re_authentications_and_denials_are_counted_per_listener_mechanism_and_operation(tmp_path):
    from sharegroup.server.security.scram_credentials import credential_from_password

    b = BrokerThread(tmp_path, overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "connections.max.reauth.ms": "60000",
        "authorizer.class.name": STANDARD,
    })
    b.broker.security.store.apply([("bob", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "bob-pw"))], [])
    before = _counters()
    sasl_port, internal_port = b.broker.bound["SASL_PLAINTEXT"][1], b.broker.bound["INTERNAL"][1]
    clients = [RawClient(p) for p in (sasl_port, internal_port, internal_port, sasl_port)]
    try:
        carol, bob, wrong, unknown = clients
        assert plain_login(carol, "carol", "carol-secret").error_code == 0
        assert plain_login(carol, "carol", "carol-secret").error_code == 0  # a re-authentication
        assert scram_login(bob, "SCRAM-SHA-512", "bob", "bob-pw").error_code == 0
        assert scram_login(wrong, "SCRAM-SHA-512", "bob", "nope").error_code == ErrorCode.sasl_authentication_failed
        assert handshake(unknown, "GSSAPI").error_code == ErrorCode.unsupported_sasl_mechanism
        # carol has no ACL: DESCRIBE on the topic is denied (twice: two topics), and counted
        topics = metadata(carol, ["t1", "t2"]).topics
        assert [t.error_code for t in topics] == [ErrorCode.topic_authorization_failed] * 2
        assert wrong.is_closed_by_peer() and unknown.is_closed_by_peer()
    finally:
        for c in clients:
            c.close()
        b.stop()
    after = _counters()
    assert {k: after[k] - before[k] for k in before} == {
        "ok_plain": 1, "ok_scram": 1, "bad_scram": 1, "bad_none": 1, "reauth": 1, "denied": 2}


def test_a_session_that_runs_out_without_re_authentication_is_closed_and_counted(tmp_path):
    b = BrokerThread(tmp_path, overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                          "sasl.enabled.mechanisms": "PLAIN",
                                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                                          "listener.name.sasl_plaintext.connections.max.reauth.ms": "1"})
    before = _value("sharegroup_server_expired_connections_killed_total")
    c = RawClient(b.broker.port)
    try:
        login = plain_login(c, "carol", "carol-secret")
        assert (login.error_code, login.session_lifetime.total_seconds() * 1000) == (0, 1)
        served = 0
        while served < 10_000:  # a 1 ms session: within a few requests it has run out and the broker closes
            try:
                metadata(c, [])
            except ConnectionError:  # the broker closed it (EOF or reset)
                break
            served += 1
        assert served < 10_000
    finally:
        c.close()
        b.stop()
    assert _value("sharegroup_server_expired_connections_killed_total") - before == 1


def test_host_and_port_with_listeners_print_a_warning_and_are_ignored(tmp_path):
    server = ServeProcess(tmp_path, "--host", "127.0.0.2", "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    try:
        assert server.host == "127.0.0.1"  # the listener's address, not --host
        client = RawClient(server.port)
        assert metadata(client, []).controller_id == 1
        client.close()
    finally:
        _code, _out, err = server.terminate()
    assert ("sharegroup serve: WARNING --host and --port ignored: the listeners config "
            "(PLAINTEXT://127.0.0.1:0) sets every listener") in err


def test_a_stalled_tls_handshake_is_dropped_after_connections_max_idle_ms_under_serves_event_loop(tmp_path):
    """The TLS handshake is bounded by `connections.max.idle.ms` (Kafka's idle expiry covers a connection
    still in its handshake); meanwhile other clients log in and are served. Runs the real CLI, so the bound
    is checked on the event loop serve uses."""
    certs = Certificates.make(tmp_path / "certs")
    server = ServeProcess(
        tmp_path / "data",
        "--override", "listeners=SASL_SSL://127.0.0.1:0",
        "--override", "ssl.keystore.type=PEM", "--override", f"ssl.keystore.location={certs.server_pem}",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "--override", "connections.max.idle.ms=1000",
    )
    try:
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT_S)
        half = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT_S)
        half.sendall(b"\x16\x03\x01\x02\x00\x01")  # the first bytes of a ClientHello, then nothing
        good = TlsRawClient(server.port, certs.client_context())
        assert plain_login(good, "carol", "carol-secret").error_code == 0
        assert metadata(good, []).controller_id == 1
        assert read_until_closed(stalled) == b""  # dropped by the bound, well within the I/O timeout
        assert read_until_closed(half) == b""
        fresh = TlsRawClient(server.port, certs.client_context())
        assert plain_login(fresh, "carol", "carol-secret").error_code == 0
        for s in (stalled, half):
            s.close()
        good.close()
        fresh.close()
    finally:
        server.terminate()
