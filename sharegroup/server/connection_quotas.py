"""Kafka's connection quotas: `max.connections` (broker-wide and per listener) and `max.connections.per.ip`.

As Kafka's ConnectionQuotas does it:
- each listener's acceptor, having accepted a socket, first waits for a *slot*: while the listener holds
  `listener.name.<l>.max.connections` connections, or the broker holds `max.connections`, it accepts
  nothing more (new clients wait in the listen backlog, `socket.listen.backlog.size`) until a connection
  closes. Kafka exempts its inter-broker listener from the broker-wide limit (closing the least recently
  used connection of another listener instead); a one-node broker has no inter-broker listener, so every
  listener waits;
- then the connection is counted, and when its IP address already had `max.connections.per.ip`
  connections (or the limit of `max.connections.per.ip.overrides` for it) it is closed at once.
The per-IP counts cover every listener. Override hosts are resolved once at start (every address of a
host name; a name that does not resolve is refused, as Kafka's start fails on it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import Counter
from typing import Iterable

from .broker_config import ServeConfig, parse_connection_overrides
from .security.listeners import listener_override

__all__ = ["ConnectionQuotas", "normalize_ip"]


def normalize_ip(address: str) -> str:
    """One spelling per IP address (no IPv6 scope, IPv4-mapped IPv6 as IPv4), so counts and overrides match."""
    text = address.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _resolve(host: str) -> list[str]:
    """Every address of `host` (an IP literal is itself); `ValueError` naming the key when it does not resolve."""
    try:
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {exc}") from None
    return sorted({normalize_ip(str(info[4][0])) for info in infos})


class ConnectionQuotas:
    """Counts of open connections per IP address, per listener and in all; the acceptors' slot waits."""

    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int] | None = None,
                 per_listener: dict[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})  # normalized IP address -> limit
        self.per_listener = dict(per_listener or {})  # listener name -> limit
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self.listener_counts: Counter[str] = Counter()
        self.blocked: set[str] = set()  # listeners whose acceptor waits for a slot now
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def from_config(cls, config: ServeConfig, listeners: Iterable[str] = ()) -> "ConnectionQuotas":
        """The quotas of `config` for these listener names (override hosts resolved now; `ValueError`)."""
        overrides: dict[str, int] = {}
        for host, count in parse_connection_overrides(config["max.connections.per.ip.overrides"]).items():
            for address in _resolve(host):
                overrides[address] = count
        per_listener = {}
        for name in listeners:
            value = listener_override(config, name, "max.connections")
            if value is not None:
                per_listener[name] = value
        return cls(config["max.connections"], config["max.connections.per.ip"], overrides, per_listener)

    def limit_for(self, ip: str) -> int:
        """The per-IP limit of address `ip`."""
        return self.per_ip_overrides.get(normalize_ip(ip), self.max_per_ip)

    def slot_available(self, listener: str) -> bool:
        if self.listener_counts[listener] >= self.per_listener.get(listener, self.max_connections):
            return False
        return self.total < self.max_connections

    async def wait_for_slot(self, listener: str) -> float:
        """Return when `listener` may take one more connection; the seconds it waited (Kafka's acceptor
        blocked time)."""
        if self.slot_available(listener):
            return 0.0
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.blocked.add(listener)
        try:
            while not self.slot_available(listener):
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
        finally:
            self.blocked.discard(listener)
        return loop.time() - started

    def add(self, listener: str, ip: str) -> int | None:
        """Count a new connection of `ip` on `listener`; its per-IP limit when that is exceeded (the caller
        closes it and calls `remove`), else None."""
        ip = normalize_ip(ip)
        count = self.per_ip[ip]
        self.per_ip[ip] = count + 1
        self.listener_counts[listener] += 1
        self.total += 1
        limit = self.limit_for(ip)
        return limit if count >= limit else None

    def remove(self, listener: str, ip: str) -> None:
        """Uncount a closed connection and wake the acceptors waiting for a slot."""
        ip = normalize_ip(ip)
        assert self.per_ip[ip] > 0 and self.listener_counts[listener] > 0 and self.total > 0, (ip, listener)
        self.per_ip[ip] -= 1
        if not self.per_ip[ip]:
            del self.per_ip[ip]
        self.listener_counts[listener] -= 1
        self.total -= 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _check(self) -> None:
        """The counts agree: the total is the sum per IP and the sum per listener; none is negative."""
        assert self.total == sum(self.per_ip.values()) == sum(self.listener_counts.values()), self.total
        assert all(v > 0 for v in self.per_ip.values())
