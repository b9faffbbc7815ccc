"""Everything the broker needs for transport security, built once from the broker config.

`BrokerSecurity.from_config` parses the listeners, builds the TLS context of each SSL / SASL_SSL
listener, the principal mapper, each SASL listener's enabled mechanisms and PLAIN users, and opens the
SCRAM credential store of `DIR/security`. A wrong setting raises `ValueError` naming it, before any
socket is bound (`sharegroup serve` exits 2). Without security settings the result is one PLAINTEXT
listener on `--host`/`--port` and nothing else changes.

Per connection it answers the principal the transport gives (`tls_principal`: a client certificate's
mapped subject, else User:ANONYMOUS) and, on SASL listeners, the mechanisms and settings the
connection's `SaslAuthenticator` is built from (`sasl.authenticator_for`).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Callable

from ..authorization import ANONYMOUS
from .listeners import Listener, listener_value, parse_advertised, parse_listeners
from .sasl_mechanisms import (
    SCRAM_MECHANISMS,
    SUPPORTED_MECHANISMS,
    MechanismServer,
    PlainServer,
    ScramServer,
    parse_jaas_options,
)
from .scram_credentials import ScramCredentialStore
from .ssl_principal import PrincipalMapper, rfc2253_subject
from .tls import server_context

__all__ = ["BrokerSecurity", "SECURITY_DIR"]

SECURITY_DIR = "security"
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0


class BrokerSecurity:
    """Listeners, TLS contexts, SASL settings and SCRAM credentials of one broker."""

    def __init__(self, config: Any, listeners: list[Listener], advertised: dict[str, tuple[str, int]],
                 contexts: dict[str, ssl.SSLContext], mechanisms: dict[str, list[str]],
                 plain_users: dict[str, dict[str, str]], mapper: PrincipalMapper,
                 store: ScramCredentialStore) -> None:
        self.config = config
        self.listeners = listeners
        self.advertised = advertised
        self.contexts = contexts
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.mapper = mapper
        self.store = store
        self._check()

    def _check(self) -> None:
        """Every TLS listener has a context, every SASL listener at least one supported mechanism."""
        assert self.listeners
        for listener in self.listeners:
            assert (listener.name in self.contexts) == listener.uses_tls, listener
            if listener.uses_sasl:
                assert self.mechanisms[listener.name], listener
                assert set(self.mechanisms[listener.name]) <= set(SUPPORTED_MECHANISMS)

    @classmethod
    def from_config(cls, config: Any, data_dir: Path | str | None, host: str = "127.0.0.1",
                    port: int = 9092) -> "BrokerSecurity":
        listeners = parse_listeners(config["listeners"], config["listener.security.protocol.map"], host, port)
        advertised = parse_advertised(config["advertised.listeners"], listeners)
        contexts: dict[str, ssl.SSLContext] = {}
        mechanisms: dict[str, list[str]] = {}
        plain_users: dict[str, dict[str, str]] = {}
        for listener in listeners:
            if listener.uses_tls:
                contexts[listener.name] = server_context(config, listener)
            if listener.uses_sasl:
                text = str(listener_value(config, listener.name, "sasl.enabled.mechanisms"))
                enabled = [m.strip().upper() for m in text.split(",") if m.strip()]
                unsupported = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
                if not enabled or unsupported:
                    raise ValueError(f"sasl.enabled.mechanisms of listener {listener.name}: "
                                     f"{', '.join(unsupported) or 'none given'} not supported by sharegroup serve "
                                     f"(supported: {', '.join(SUPPORTED_MECHANISMS)})")
                mechanisms[listener.name] = enabled
                jaas = listener_value(config, listener.name, "sasl.jaas.config", mechanism="PLAIN")
                plain_users[listener.name] = {k[len("user_"):]: v for k, v in parse_jaas_options(jaas).items()
                                              if k.startswith("user_")}
        idle_ms = config["connections.max.idle.ms"]
        if mechanisms and idle_ms >= 0 and config["connection.failed.authentication.delay.ms"] >= idle_ms:
            raise ValueError("connection.failed.authentication.delay.ms must be less than connections.max.idle.ms")
        mapper = PrincipalMapper(str(config["ssl.principal.mapping.rules"]))
        store = ScramCredentialStore(None if data_dir is None else Path(data_dir) / SECURITY_DIR)
        return cls(config, listeners, advertised, contexts, mechanisms, plain_users, mapper, store)

    @property
    def handshake_timeout_s(self) -> float:
        """A TLS handshake that has not finished by then is dropped: Kafka closes a connection that
        stays idle (no finished request) for `connections.max.idle.ms`, handshake included."""
        idle_ms = self.config["connections.max.idle.ms"]
        return idle_ms / 1000 if idle_ms > 0 else DEFAULT_HANDSHAKE_TIMEOUT_S

    def tls_principal(self, listener: Listener, ssl_object: Any) -> str:
        """The principal of an SSL connection: the mapped client-certificate subject, else ANONYMOUS.

        Raises `NoMatchingRule` when no mapping rule applies (the connection is then refused).
        """
        if listener.protocol != "SSL" or ssl_object is None:
            return ANONYMOUS
        peer = ssl_object.getpeercert()
        if not peer:
            return ANONYMOUS
        return "User:" + self.mapper.name(rfc2253_subject(peer))

    def new_mechanism_server(self, listener: Listener) -> Callable[[str], MechanismServer]:
        users = self.plain_users.get(listener.name, {})

        def new(mechanism: str) -> MechanismServer:
            if mechanism in SCRAM_MECHANISMS:
                return ScramServer(mechanism, self.store.get)
            return PlainServer(users, self.store)

        return new
