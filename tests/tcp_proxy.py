"""A TCP proxy for tests that must decide when the broker sees a client's connection close.

Each accepted client connection gets its own connection to the upstream broker; bytes are copied both
ways by two threads. `cut_client_side(link)` drops only the client's side (the client sees its connection
closed and reconnects through the proxy) while the broker's side stays open, and `close_upstream(link)`
closes the broker's side later: so a test orders "the client reconnected" before "the broker saw the old
connection close", deterministically. Every socket operation is bounded; `close()` ends everything.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

IO_TIMEOUT_S = 10.0


@dataclass
class Link:
    """One proxied connection: the client's socket and the proxy's socket to the broker."""

    client: socket.socket
    upstream: socket.socket
    upstream_port: int  # the local port of the broker-side socket (the broker sees the connection from it)
    client_open: bool = True
    upstream_open: bool = True
    threads: list[threading.Thread] = field(default_factory=list)


class TcpProxy:
    """Listens on 127.0.0.1 (a free port) and forwards every connection to (host, port)."""

    def __init__(self, upstream_port: int = 0, host: str = "127.0.0.1") -> None:
        self.host = host
        self.upstream_port = upstream_port  # may be set after construction (before the first client)
        self.links: list[Link] = []
        self._lock = threading.Lock()
        self._server = socket.create_server((host, 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._closing = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            upstream = socket.create_connection((self.host, self.upstream_port), timeout=IO_TIMEOUT_S)
            link = Link(client, upstream, upstream.getsockname()[1])
            for source, target, to_client in ((client, upstream, False), (upstream, client, True)):
                thread = threading.Thread(target=self._pump, args=(link, source, target, to_client), daemon=True)
                link.threads.append(thread)
            with self._lock:
                self.links.append(link)
            for thread in link.threads:
                thread.start()

    def _pump(self, link: Link, source: socket.socket, target: socket.socket, to_client: bool) -> None:
        try:
            source.settimeout(None)
        except OSError:  # the link was closed before this pump started
            return
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                if not to_client and link.client_open:  # the client closed: pass the close on
                    link.client_open = False
                    self.close_upstream(link)
                elif to_client and link.client_open:  # the broker closed: pass the close on
                    link.client_open = False
                    self._close(link.client)
                return
            if to_client and not link.client_open:
                continue  # the client side was cut: drain what the broker still sends
            try:
                target.sendall(data)
            except OSError:
                if to_client:
                    continue
                return

    @staticmethod
    def _close(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def open_links(self) -> list[Link]:
        """The links open on both sides."""
        with self._lock:
            return [link for link in self.links if link.client_open and link.upstream_open]

    def cut_client_side(self, link: Link) -> None:
        """Close the client's side only: the broker's side of `link` stays open."""
        link.client_open = False
        self._close(link.client)


    def close_upstream(self, link: Link) -> None:
        """Close the broker's side of `link` (the broker now sees that connection close)."""
        link.upstream_open = False
        self._close(link.upstream)

    def close(self) -> None:
        self._closing = True
        self._server.close()
        with self._lock:
            links = list(self.links)
        for link in links:
            self._close(link.client)
            self._close(link.upstream)
        self._acceptor.join(IO_TIMEOUT_S)
