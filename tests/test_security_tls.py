"""TLS listeners in process: client authentication none/requested/required, the SSL principal with
`ssl.principal.mapping.rules`, and stalled or garbage handshakes that close only their own connection."""

from __future__ import annotations

import socket
import ssl

import pytest

pytest.importorskip("trustme")

from sharegroup.server.authorization import AllowEveryone  # noqa: E402
from tests.security_harness import Certificates, TlsRawClient, metadata, read_until_closed, req  # noqa: E402
from tests.server_harness import IO_TIMEOUT_S, BrokerThread  # noqa: E402


class RecordingAuthorizer(AllowEveryone):
    """Allows everything and remembers who asked (how a test sees a connection's principal)."""

    def __init__(self) -> None:
        self.principals: list[str] = []

    def authorize(self, principal, host, operation, resource_type, name):
        self.principals.append(principal)
        return True


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates.make(tmp_path_factory.mktemp("tls-certs"), client_cn="Writer")


def _broker(tmp_path, certs, **overrides):
    b = BrokerThread(tmp_path, overrides={
        "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_pem),
        **overrides,
    })
    b.broker.authorizer = RecordingAuthorizer()
    return b


def _principal(b, client) -> str:
    b.broker.authorizer.principals.clear()
    resp = client.request(50, 0, req(50, 0, users=None))
    assert resp.error_code == 0
    return b.broker.authorizer.principals[-1]


@pytest.mark.parametrize("rules, principal", [
    ("DEFAULT", "User:CN=Writer,OU=eng,O=acme"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L,DEFAULT", "User:writer@eng"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U", "User:WRITER"),
])
def test_a_client_certificate_gives_the_mapped_subject_as_principal(tmp_path, certs, rules, principal):
    b = _broker(tmp_path, certs, **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": rules})
    try:
        client = TlsRawClient(b.broker.port, certs.client_context(with_certificate=True))
        assert _principal(b, client) == principal
        client.close()
    finally:
        b.stop()


def test_no_matching_rule_refuses_the_connection(tmp_path, certs):
    b = _broker(tmp_path, certs, **{"ssl.client.auth": "required",
                                    "ssl.principal.mapping.rules": "RULE:^CN=nobody$/x/"})
    try:
        client = TlsRawClient(b.broker.port, certs.client_context(with_certificate=True))
        assert client.is_closed_by_peer()
        client.close()
    finally:
        b.stop()


def test_required_client_auth_refuses_a_client_without_certificate(tmp_path, certs):
    b = _broker(tmp_path, certs, **{"ssl.client.auth": "required"})
    try:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            client = TlsRawClient(b.broker.port, certs.client_context(with_certificate=False))
            metadata(client, [])  # TLS 1.3: the refusal arrives with the first read
    finally:
        b.stop()


@pytest.mark.parametrize("mode", ["requested", "none"])
def test_without_a_certificate_the_principal_is_anonymous(tmp_path, certs, mode):
    b = _broker(tmp_path, certs, **{"ssl.client.auth": mode})
    try:
        client = TlsRawClient(b.broker.port, certs.client_context(with_certificate=False))
        assert _principal(b, client) == "User:ANONYMOUS"
        client.close()
    finally:
        b.stop()


def test_a_plaintext_request_on_the_tls_port_gets_no_answer(tmp_path, certs):
    b = _broker(tmp_path, certs, **{"connections.max.idle.ms": "2000"})
    try:
        from tests.server_harness import RawClient

        plain = RawClient(b.broker.port)
        plain.send_raw(plain.frame(18, 0, req(18, 0)))
        assert plain.is_closed_by_peer()  # the TLS layer rejects it; never a Kafka response
        plain.close()
    finally:
        b.stop()


def test_stalled_and_garbage_handshakes_close_only_their_own_connection(tmp_path, certs):
    b = _broker(tmp_path, certs, **{"connections.max.idle.ms": "1000", "ssl.client.auth": "none"})
    try:
        stalled = socket.create_connection(("127.0.0.1", b.broker.port), timeout=IO_TIMEOUT_S)
        garbage = socket.create_connection(("127.0.0.1", b.broker.port), timeout=IO_TIMEOUT_S)
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        # Meanwhile a real TLS client is served: the event loop is not blocked by either.
        good = TlsRawClient(b.broker.port, certs.client_context())
        assert metadata(good, []).controller_id == 1
        assert len(read_until_closed(garbage)) < 64  # at most a TLS alert, then the broker closes it
        # The stalled one is dropped after the handshake bound (connections.max.idle.ms), well within the wait.
        assert read_until_closed(stalled) == b""
        # (the good connection, idle since, may meet the same idle bound now:) a new one is served
        fresh = TlsRawClient(b.broker.port, certs.client_context())
        assert metadata(fresh, []).controller_id == 1
        for s in (stalled, garbage):
            s.close()
        good.close()
        fresh.close()
    finally:
        b.stop()
