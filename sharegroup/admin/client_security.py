"""`--command-config FILE`: how the operator's tools reach a secured broker, from a Kafka client properties file.

The file is what Kafka's own tools take (a Java `.properties` file):

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="admin-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem

Understood keys: `security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); `sasl.mechanism`
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with the user in `sasl.jaas.config` (`username="..."
password="..."`, as PlainLoginModule and ScramLoginModule take them) or in librdkafka's
`sasl.username` / `sasl.password`; the trusted CAs in `ssl.truststore.location` or
`ssl.truststore.certificates` (with `ssl.truststore.type=PEM`) or librdkafka's `ssl.ca.location` /
`ssl.ca.pem` (without any: the system's CAs); a client certificate in `ssl.keystore.location` or
`ssl.keystore.certificate.chain` + `ssl.keystore.key` (`ssl.keystore.type=PEM`, `ssl.key.password`
for an encrypted key) or librdkafka's `ssl.certificate.location` + `ssl.key.location`;
`ssl.endpoint.identification.algorithm` (`https`, the default, checks the broker's host name; empty
turns that off). Other keys are ignored, as Kafka's tools ignore keys they do not use. A wrong or
missing setting is a `ValueError` naming the key; JKS and PKCS12 stores are refused (PEM only).

`login` runs the client side of SASL on a connected socket: SaslHandshake v1, then SaslAuthenticate
with the mechanism's tokens (SCRAM through `scramp`'s client, which also checks the broker's proof).
A refused login raises `LoginFailed` with the broker's message.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..server.broker_config import parse_properties
from ..server.security.listeners import PROTOCOLS, SASL_PROTOCOLS, TLS_PROTOCOLS, ProtocolFlags
from ..server.security.sasl_mechanisms import parse_jaas_options

__all__ = ["ClientSecurity", "LoginFailed", "load_command_config"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33


class LoginFailed(Exception):
    """The broker refused the login (its message), or the broker failed to prove its SCRAM key."""


@dataclass(frozen=True)
class ClientSecurity(ProtocolFlags):
    """The transport and login settings of the tool's connections."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    context: ssl.SSLContext | None = None  # SSL and SASL_SSL

    def _check(self) -> None:
        """TLS protocols carry a context; SASL protocols a mechanism and credentials."""
        assert self.protocol in PROTOCOLS
        assert (self.context is not None) == self.uses_tls
        if self.uses_sasl:
            assert self.mechanism in MECHANISMS and self.username is not None and self.password is not None

    def __post_init__(self) -> None:
        self._check()

    def login(self, exchange: Callable[[int, int, dict[str, Any]], Any]) -> None:
        """Log in over `exchange(api_key, version, fields) -> response` (SaslHandshake v1 + SaslAuthenticate v1)."""
        if not self.uses_sasl:
            return
        assert self.mechanism is not None and self.username is not None and self.password is not None
        shake = exchange(SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if int(shake.error_code) == UNSUPPORTED_SASL_MECHANISM:
            raise LoginFailed(f"org.apache.kafka.common.errors.UnsupportedSaslMechanismException: Client SASL "
                              f"mechanism '{self.mechanism}' not enabled in the server, enabled mechanisms are "
                              f"[{', '.join(shake.mechanisms)}]")
        if int(shake.error_code) != 0:
            raise LoginFailed(f"SaslHandshake failed with error code {int(shake.error_code)}")

        def authenticate(token: bytes) -> bytes:
            response = exchange(SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            if int(response.error_code) != 0:
                raise LoginFailed("org.apache.kafka.common.errors.SaslAuthenticationException: "
                                  + (response.error_message or f"error code {int(response.error_code)}"))
            return bytes(response.auth_bytes)

        if self.mechanism == "PLAIN":
            authenticate(f"\0{self.username}\0{self.password}".encode())
            return
        from scramp import ScramClient, ScramException

        scram = ScramClient([self.mechanism], self.username, self.password)
        server_first = authenticate(scram.get_client_first().encode())
        try:
            scram.set_server_first(server_first.decode())
            server_final = authenticate(scram.get_client_final().encode())
            scram.set_server_final(server_final.decode())
        except ScramException as exc:
            raise LoginFailed(f"the broker's SCRAM answer did not verify: {exc}") from None


def load_command_config(path: str | None) -> ClientSecurity:
    """The settings of a `--command-config` file (None: PLAINTEXT); `ValueError` names a wrong key."""
    if path is None:
        return ClientSecurity()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    return client_security(parse_properties(text))


def client_security(props: dict[str, str]) -> ClientSecurity:
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    mechanism = username = password = None
    if protocol in SASL_PROTOCOLS:
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism: {mechanism} is not supported by this tool "
                             f"(supported: {', '.join(MECHANISMS)})")
        jaas = parse_jaas_options(props.get("sasl.jaas.config"))
        username = jaas.get("username", props.get("sasl.username"))
        password = jaas.get("password", props.get("sasl.password"))
        if username is None or password is None:
            raise ValueError("sasl.jaas.config: needs username=\"...\" and password=\"...\" "
                             "(or sasl.username and sasl.password)")
    context = _ssl_context(props) if protocol in TLS_PROTOCOLS else None
    return ClientSecurity(protocol, mechanism, username, password, context)


def _ssl_context(props: dict[str, str]) -> ssl.SSLContext:
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = props.get(key, "PEM").strip().upper()
        if kind != "PEM":
            raise ValueError(f"{key}={kind}: only PEM stores are supported (convert JKS/PKCS12 with keytool/openssl)")
    ca_file = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
    ca_text = props.get("ssl.truststore.certificates") or props.get("ssl.ca.pem")
    try:
        if ca_file or ca_text:
            context = ssl.create_default_context(cafile=ca_file or None, cadata=ca_text or None)
        else:
            context = ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl.truststore: cannot load the trusted certificates: {exc}") from None
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() == "https"
    _load_client_certificate(context, props)
    return context


def _load_client_certificate(context: ssl.SSLContext, props: dict[str, str]) -> None:
    key_password = props.get("ssl.key.password")
    location = props.get("ssl.keystore.location") or props.get("ssl.certificate.location")
    key_location = props.get("ssl.key.location")  # librdkafka: the key apart from the certificate
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    try:
        if location:
            context.load_cert_chain(location, key_location or None, password=key_password)
        elif chain and key:
            # The ssl module loads certificates from files only: a private temporary file, removed at once.
            fd, name = tempfile.mkstemp(suffix=".pem")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(key.strip() + "\n" + chain.strip() + "\n")
                context.load_cert_chain(name, password=key_password)
            finally:
                os.unlink(name)
        elif chain or key:
            raise ValueError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl.keystore: cannot load the client certificate: {exc}") from None
