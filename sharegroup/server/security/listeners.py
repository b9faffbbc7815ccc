"""Kafka's listener configs: `listeners`, `listener.security.protocol.map`, `advertised.listeners`.

`listeners` is a comma-separated list of `NAME://HOST:PORT`. The name picks the security protocol
through `listener.security.protocol.map` (`NAME:PROTOCOL,...`; by default every protocol name maps to
itself, so `SASL_SSL://...` needs no entry). An empty host listens on every interface; port 0 binds a
free port. Names and (non-zero) ports must be unique. `advertised.listeners` has the same syntax and
says what Metadata and FindCoordinator answer for a request that came in on that listener; it defaults
to `listeners` (then the bound port and, for an empty host, the address the client connected to).

Per-listener configs: `listener.name.<name lower-cased>.<key>` wins over the plain `<key>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..broker_config import ServeConfig

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})  # security protocols that run over TLS
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})  # security protocols that log in with SASL

__all__ = [
    "PROTOCOLS",
    "ProtocolFlags",
    "SASL_PROTOCOLS",
    "TLS_PROTOCOLS",
    "Listener",
    "listener_value",
    "parse_endpoints",
    "parse_listeners",
    "parse_protocol_map",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
_ENDPOINT = re.compile(r"^([a-zA-Z][a-zA-Z0-9_]*)://(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):(-?[0-9]+)$")


class ProtocolFlags:
    """`uses_tls` / `uses_sasl` of anything that has a security `protocol`: a listener of serve, or the
    connections of an admin tool."""

    __slots__ = ()
    protocol: str

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


@dataclass(frozen=True, slots=True)
class Listener(ProtocolFlags):
    """One listener: its name, security protocol and address (port 0: any free port)."""

    name: str
    protocol: str
    host: str
    port: int


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """`NAME:PROTOCOL,...` as a dict (names upper-cased, as Kafka's ListenerName does)."""
    out: dict[str, str] = {}
    for item in (text if text is not None else DEFAULT_PROTOCOL_MAP).split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise ValueError(f"listener.security.protocol.map: invalid entry {item!r} (expected NAME:PROTOCOL)")
        if protocol not in PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: unknown security protocol {protocol!r} "
                             f"for listener {name.strip()} (expected one of {', '.join(PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


def parse_endpoints(text: str, key: str) -> list[tuple[str, str, int]]:
    """(NAME, host, port) of each `NAME://HOST:PORT`; `ValueError` names `key` and the bad entry."""
    out: list[tuple[str, str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ValueError(f"{key}: unable to parse {item!r} to a broker endpoint (expected NAME://HOST:PORT)")
        name, host, port_text = match.groups()
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError(f"{key}: port of {item!r} must be in [0, 65535]")
        out.append((name.upper(), host.strip("[]"), port))
    if not out:
        raise ValueError(f"{key}: no listener given")
    names = [name for name, _h, _p in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{key}: each listener must have a different name, listeners: {text}")
    ports = [(host, port) for _n, host, port in out if port != 0]
    if len({port for _h, port in ports}) != len(ports):
        raise ValueError(f"{key}: each listener must have a different port, listeners: {text}")
    return out


def parse_listeners(listeners: str | None, protocol_map: str | None, host: str, port: int) -> list[Listener]:
    """The broker's listeners, in the configured order (the first one is named in the readiness line).

    Without `listeners` there is one PLAINTEXT listener on `host:port` (`--host`/`--port`).
    """
    if listeners is None:
        return [Listener("PLAINTEXT", "PLAINTEXT", host, port)]
    protocols = parse_protocol_map(protocol_map)
    out = []
    for name, lhost, lport in parse_endpoints(listeners, "listeners"):
        protocol = protocols.get(name)
        if protocol is None:
            raise ValueError(f"listeners: no security protocol defined for listener {name} "
                             "(add it to listener.security.protocol.map)")
        out.append(Listener(name, protocol, lhost, lport))
    return out


def parse_advertised(text: str | None, listeners: list[Listener]) -> dict[str, tuple[str, int]]:
    """Listener name -> advertised (host, port); missing names advertise the listener itself."""
    if text is None:
        return {}
    known = {listener.name for listener in listeners}
    out: dict[str, tuple[str, int]] = {}
    for name, host, port in parse_endpoints(text, "advertised.listeners"):
        if name not in known:
            raise ValueError(f"advertised.listeners: listener {name} is not in listeners")
        out[name] = (host, port)
    return out


def listener_value(config: ServeConfig, listener: str, key: str, mechanism: str | None = None) -> Any:
    """The value of `key` for `listener`: `listener.name.<l>[.<mechanism>].<key>` (the config's
    `listener_configs`), else the plain key."""
    prefixed = config.listener_configs
    base = f"listener.name.{listener.lower()}."
    if mechanism is not None:
        value = prefixed.get(f"{base}{mechanism.lower()}.{key}")
        if value is not None:
            return value
    value = prefixed.get(base + key)
    if value is not None:
        return value
    return config[key]


def listener_override(config: ServeConfig, listener: str, key: str) -> Any:
    """Only the listener-prefixed value of `key` (None when not set for this listener)."""
    prefixed = config.listener_configs
    return prefixed.get(f"listener.name.{listener.lower()}.{key}")
