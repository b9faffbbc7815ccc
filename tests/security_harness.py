"""Helpers for the security tests: certificates made at test time (trustme), TLS raw kio clients, SASL
client steps (scramp for SCRAM), and the serve arguments of a secured broker."""

from __future__ import annotations

import pathlib
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema

from sharegroup.server.codec import build
from tests.server_harness import IO_TIMEOUT_S, RawClient

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}


@dataclass
class Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in `directory`."""

    directory: pathlib.Path
    ca: Any
    server_pem: pathlib.Path  # private key + chain (ssl.keystore.location)
    ca_pem: pathlib.Path
    client_key_pem: pathlib.Path
    client_cert_pem: pathlib.Path

    @classmethod
    def make(cls, directory: pathlib.Path, client_cn: str = "writer") -> "Certificates":
        import trustme

        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert(f"{client_cn}@example.com", common_name=client_cn,
                               organization_name="acme", organization_unit_name="eng")
        paths = {name: directory / f"{name}.pem" for name in ("server", "ca", "client-key", "client-cert")}
        paths["server"].write_bytes(server.private_key_and_cert_chain_pem.bytes())
        paths["ca"].write_bytes(ca.cert_pem.bytes())
        paths["client-key"].write_bytes(client.private_key_pem.bytes())
        paths["client-cert"].write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
        return cls(directory, ca, paths["server"], paths["ca"], paths["client-key"], paths["client-cert"])

    def client_context(self, with_certificate: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_pem))
        if with_certificate:
            context.load_cert_chain(str(self.client_cert_pem), str(self.client_key_pem))
        return context


class TlsRawClient(RawClient):
    """`RawClient` over TLS (the handshake completes in the constructor, bounded by the I/O timeout)."""

    def __init__(self, port: int, context: ssl.SSLContext, host: str = "127.0.0.1") -> None:
        raw = socket.create_connection((host, port), timeout=IO_TIMEOUT_S)
        self.sock = context.wrap_socket(raw, server_hostname=host)
        self.correlation_id = 0


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the broker sends before it closes `sock` (a timeout fails the test)."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
        assert len(received) < 65536
    return received


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(load_request_schema(api_key, version), fields)


def handshake(client: RawClient, mechanism: str, version: int = 1) -> Any:
    return client.request(17, version, req(17, version, mechanism=mechanism))


def authenticate(client: RawClient, token: bytes, version: int = 2) -> Any:
    return client.request(36, version, req(36, version, auth_bytes=token))


def plain_login(client: RawClient, user: str, password: str, version: int = 2) -> Any:
    assert handshake(client, "PLAIN").error_code == 0
    return authenticate(client, f"\0{user}\0{password}".encode(), version)


def scram_login(client: RawClient, mechanism: str, user: str, password: str, version: int = 2) -> Any:
    """The SCRAM exchange through SaslAuthenticate; the last response (or the first failure)."""
    from scramp import ScramClient

    assert handshake(client, mechanism).error_code == 0
    scram = ScramClient([mechanism], user, password)
    first = authenticate(client, scram.get_client_first().encode(), version)
    if first.error_code != 0:
        return first
    scram.set_server_first(first.auth_bytes.decode())
    final = authenticate(client, scram.get_client_final().encode(), version)
    if final.error_code == 0:
        scram.set_server_final(final.auth_bytes.decode())  # the server proved it knows the server key
    return final


def metadata(client: RawClient, topics: list[str] | None = None, version: int = 12) -> Any:
    return client.request(3, version, req(3, version, topics=None if topics is None else [
        {"name": t, "topic_id": None} for t in topics], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))


def secured_serve_args(certs: Certificates, *extra: str) -> tuple[str, ...]:
    """A SASL_SSL listener first (all three mechanisms), a PLAINTEXT listener second, an SSL listener that
    requires a client certificate third; a JAAS PLAIN user and two SCRAM users."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";')
    return (
        "--override", "listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--override", "ssl.keystore.type=PEM",
        "--override", f"ssl.keystore.location={certs.server_pem}",
        "--override", "ssl.truststore.type=PEM",
        "--override", f"ssl.truststore.location={certs.ca_pem}",
        "--override", "listener.name.ssl.ssl.client.auth=required",
        "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}",
        "--override", "connection.failed.authentication.delay.ms=0",
        "--add-scram", f"SCRAM-SHA-256=[name=alice,password={PASSWORDS['alice']}]",
        "--add-scram", f"SCRAM-SHA-512=[name=bob,iterations=8192,password={PASSWORDS['bob']}]",
        *extra,
    )


def client_config(certs: Certificates, bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """The confluent_kafka settings of a SASL_SSL client (what docs/security.md shows)."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(certs.ca_pem)}
