"""One listener's server sockets and accept loops, with Kafka's connection quotas and socket buffers.

Per accepted socket, as Kafka's acceptor does: wait for a connection slot (`max.connections`, broker-wide
and per listener: nothing more is accepted meanwhile), count it, close it at once when its IP address is
over `max.connections.per.ip` (or its override), set `socket.send.buffer.bytes` as its SO_SNDBUF, then
serve it in a task of its own (the TLS handshake, on SSL listeners, happens there, so a slow handshake
never holds up accepting). `socket.receive.buffer.bytes` is set on the server socket before it listens
(accepted sockets inherit it), and `socket.listen.backlog.size` is its listen backlog. The kernel
buffers of a connection are what a client that never reads its responses can make the broker fill,
so Kafka's 100 KiB defaults also bound the work such a client gets done (see `connection.py`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Awaitable, Callable

from .connection_quotas import ConnectionQuotas, normalize_ip
from .security.listeners import Listener
from .wire_metrics import WireMetrics

__all__ = ["Acceptor", "ACCEPT_RETRY_DELAY_S", "STREAM_LIMIT_BYTES"]

log = logging.getLogger("sharegroup.server")

ACCEPT_RETRY_DELAY_S = 1.0  # after accept() fails (out of file descriptors), as asyncio's own servers wait
STREAM_LIMIT_BYTES = 64 * 1024  # the StreamReader's buffer bound: reading pauses at twice this, unconsumed

ServeConnection = Callable[[Listener, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def open_server_sockets(host: str, port: int, backlog: int, receive_buffer_bytes: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for `host:port` (an empty host: every interface, IPv4 and
    IPv6 each with a socket of its own, as asyncio's servers do); `OSError` naming the address."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if receive_buffer_bytes != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {address!r}: "
                                         f"{(exc.strerror or str(exc)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    """Accepts one listener's connections within the quotas and serves each with `serve_connection`."""

    def __init__(self, listener: Listener, quotas: ConnectionQuotas, metrics: WireMetrics,
                 serve_connection: ServeConnection, *, tls: ssl.SSLContext | None = None,
                 handshake_timeout_s: float | None = None, send_buffer_bytes: int = -1,
                 receive_buffer_bytes: int = -1, backlog: int = 50) -> None:
        self.listener = listener
        self.quotas = quotas
        self.metrics = metrics
        self._serve_connection = serve_connection
        self._tls = tls
        self._handshake_timeout_s = handshake_timeout_s
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._backlog = backlog
        self.sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self.connections: set[asyncio.Task[None]] = set()  # one task per counted connection

    async def start(self) -> tuple[str, int]:
        """Bind and start accepting; the first socket's bound (host, port)."""
        self.sockets = await open_server_sockets(self.listener.host, self.listener.port, self._backlog,
                                                 self._receive_buffer_bytes)
        self._accepting = [asyncio.create_task(self._accept_loop(sock), name=f"accept {self.listener.name}")
                           for sock in self.sockets]
        return self.listener.host, self.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop accepting, end every connection of this listener (each task cancelled and awaited)."""
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        for sock in self.sockets:
            sock.close()
        for task in list(self.connections):
            task.cancel()
        if self.connections:
            await asyncio.gather(*self.connections, return_exceptions=True)

    async def _accept_loop(self, server: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        name = self.listener.name
        while True:
            try:
                sock, address = await loop.sock_accept(server)
            except (ConnectionAbortedError, InterruptedError):
                continue  # the client left before it was accepted
            except OSError as exc:  # EMFILE/ENFILE and the like: log, wait, go on accepting
                log.error("accepting a connection on listener %s failed: %s", name, exc)
                await asyncio.sleep(ACCEPT_RETRY_DELAY_S)
                continue
            ip = normalize_ip(str(address[0])) if isinstance(address, tuple) else str(address)
            try:
                waited_s = await self.quotas.wait_for_slot(name)  # nothing else is accepted meanwhile
            except BaseException:
                sock.close()
                raise
            if waited_s:
                self.metrics.acceptor_blocked_seconds.labels(name).inc(waited_s)
            limit = self.quotas.add(name, ip)
            if limit is not None:
                self.quotas.remove(name, ip)
                self.metrics.connections_rejected.labels(name).inc()
                sock.close()
                log.info("Rejected connection from %s, address already has the configured maximum of %d "
                         "connections.", ip, limit)
                continue
            if self._send_buffer_bytes != -1:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
                except OSError:  # the client may already have reset it; serving finds that out
                    pass
            task = asyncio.create_task(self._connection(sock, ip), name=f"connection {ip} on {name}")
            self.connections.add(task)
            task.add_done_callback(self.connections.discard)

    async def _connection(self, sock: socket.socket, ip: str) -> None:
        """Streams over the accepted socket (after the TLS handshake on an SSL listener), then serve them;
        the connection is uncounted when it ends, however it ends."""
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=STREAM_LIMIT_BYTES)
            protocol = asyncio.StreamReaderProtocol(reader)
            try:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, sock, ssl=self._tls,
                    ssl_handshake_timeout=self._handshake_timeout_s if self._tls is not None else None)
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError: a failed TLS handshake
                log.info("closing connection from %s on listener %s: %s", ip, self.listener.name,
                         exc or type(exc).__name__)
                sock.close()
                return
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            await self._serve_connection(self.listener, reader, writer)
        finally:
            self.quotas.remove(self.listener.name, ip)
