"""One client connection: size-prefixed frames in, responses out in request order.

A reader task reads frames ahead (pipelining) into a bounded queue (at most `READ_AHEAD_FRAMES` frames
and `socket.request.max.bytes` of bodies); a processor takes them in order,
decodes the header and body with kio, runs the handler and writes the response before it takes the
next one. So requests of one connection are handled one at a time, as Kafka does (it mutes a channel
while a request is in flight): appends of one producer stay in order, and responses come back in the
order the requests were sent. Other connections are independent tasks.

Kafka's answers to bad input, which this follows:
- a size prefix above `socket.request.max.bytes` (or negative) closes the connection before any of the
  body is read, so nothing is allocated for it;
- a header or body that does not decode, or an API key / version this broker does not serve, closes the
  connection; except an ApiVersions request of an unknown version, which gets an ApiVersions v0
  response with UNSUPPORTED_VERSION listing the ApiVersions versions served, so the client can retry.

On a secured listener the connection also carries its principal (a TLS client certificate's, see
`security/`) and, on SASL listeners, a `SaslAuthenticator` that sees every frame until the client has
logged in (and re-authentication frames after); a failed login closes the connection after Kafka's
delay, muted meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from .api import BrokerView, CloseConnection, RequestContext, SessionExpired
from .authorization import ANONYMOUS
from .codec import API_VERSIONS_KEY, DecodeFailure, decode_body, decode_header, encode_response, request_class
from .security.listeners import Listener
from .security.sasl import SaslAuthenticator, authenticator_for

__all__ = ["Connection", "READ_AHEAD_FRAMES"]

log = logging.getLogger("sharegroup.server")

READ_AHEAD_FRAMES = 16  # frames read ahead of the one being handled (bounds a pipelining client's memory)
_CLOSE = object()
_connection_index = itertools.count()  # makes connection ids unique even when a client port is reused


class Connection:
    """Serves one accepted socket until the client leaves, sends bad input, or the broker stops."""

    def __init__(self, broker: BrokerView, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener: Listener | None = None) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        local = writer.get_extra_info("sockname")
        self.local_host = local[0] if isinstance(local, tuple) else "127.0.0.1"
        local_address = f"{local[0]}:{local[1]}" if isinstance(local, tuple) else str(local)
        # Kafka's connection id: local address, peer address and an index (share sessions are tied to it).
        self.connection_id = f"{local_address}-{self.peer}-{next(_connection_index)}"
        self._frames: asyncio.Queue[Any] = asyncio.Queue(maxsize=READ_AHEAD_FRAMES)
        self._queued_bytes = 0  # bodies read ahead and not yet handled
        self._drained = asyncio.Event()
        self.requests_handled = 0
        self.listener_name = "PLAINTEXT" if listener is None else listener.name
        self.principal = ANONYMOUS  # the transport's principal (TLS client certificate) or the SASL login's
        self.sasl: SaslAuthenticator | None = None
        if listener is not None:
            self.principal = broker.security.tls_principal(listener, writer.get_extra_info("ssl_object"))
            self.sasl = authenticator_for(broker.security, listener, broker.registry, self._context, self._handle)
            if self.sasl is not None:
                self.sasl.on_outcome = functools.partial(broker.metrics.count_authentication, self.listener_name)

    async def serve(self) -> None:
        reader_task = asyncio.create_task(self._read_frames(), name=f"read {self.peer}")
        try:
            await self._process()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            reader_task.cancel()
            await asyncio.gather(reader_task, return_exceptions=True)
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    def _check(self) -> None:
        """Read-ahead stays within its bounds: bytes in [0, socket.request.max.bytes], frames <= READ_AHEAD_FRAMES."""
        assert 0 <= self._queued_bytes <= self.broker.config["socket.request.max.bytes"], self._queued_bytes
        assert self._frames.qsize() <= READ_AHEAD_FRAMES

    # -- reading ------------------------------------------------------------------------------------

    async def _read_frames(self) -> None:
        max_bytes = self.broker.config["socket.request.max.bytes"]
        idle_ms = self.broker.config["connections.max.idle.ms"]
        idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        try:
            while True:
                try:
                    async with asyncio.timeout(idle_s):
                        prefix = await self.reader.readexactly(4)
                except TimeoutError:
                    log.info("closing idle connection %s", self.peer)
                    await self._frames.put(_CLOSE)
                    return
                size = int.from_bytes(prefix, "big", signed=True)
                if self.sasl is not None and self.sasl.frame_limit is not None and size > self.sasl.frame_limit:
                    # A failed login: closed after the failed-login delay, without an answer.
                    await self._frames.put(self.sasl.oversized())
                    return
                if size < 0 or size > max_bytes:
                    log.warning(
                        "closing connection %s: frame of %d bytes exceeds socket.request.max.bytes %d",
                        self.peer, size, max_bytes,
                    )
                    self.broker.metrics.closed_connections.inc()
                    await self._frames.put(_CLOSE)
                    return
                # Read ahead at most `socket.request.max.bytes` of bodies (or one frame): a pipelining
                # client cannot make one connection hold more than about two maximal frames.
                while self._queued_bytes and self._queued_bytes + size > max_bytes:
                    self._drained.clear()
                    await self._drained.wait()
                frame = await self.reader.readexactly(size)
                self.broker.metrics.bytes_in.inc(4 + size)
                self._queued_bytes += size
                await self._frames.put(frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            await self._frames.put(_CLOSE)  # the client went away (possibly mid-frame)

    # -- handling -----------------------------------------------------------------------------------

    async def _process(self) -> None:
        while True:
            frame = await self._frames.get()
            if frame is _CLOSE:
                return
            if isinstance(frame, CloseConnection):  # the reader refused a frame (a failed SASL login)
                await self._close_for(frame)
                return
            self._queued_bytes -= len(frame)
            self._drained.set()
            self._check()
            try:
                if self.sasl is not None and self.sasl.wants(frame):
                    out = await self.sasl.receive(frame)
                    self.principal = self.sasl.principal or self.principal
                else:
                    out = await self._handle(frame)
            except CloseConnection as exc:
                await self._close_for(exc)
                return
            if out is not None:
                self.writer.write(out)
                self.broker.metrics.bytes_out.inc(len(out))
                await self.writer.drain()
            self.requests_handled += 1

    async def _close_for(self, exc: CloseConnection) -> None:
        """Close for `exc`: after its delay (muted meanwhile: nothing else of this connection is handled)
        and its response, when it has them (a failed SASL login)."""
        log.warning("closing connection %s: %s", self.peer, exc)
        self.broker.metrics.closed_connections.inc()
        if isinstance(exc, SessionExpired):
            self.broker.metrics.expired_connections_killed.inc()
        if exc.delay_s > 0:
            await asyncio.sleep(exc.delay_s)
        if exc.response is not None:
            self.writer.write(exc.response)
            await self.writer.drain()

    async def _handle(self, frame: bytes) -> bytes | None:
        try:
            header, offset = decode_header(frame)
        except DecodeFailure as exc:
            raise CloseConnection(str(exc)) from None
        key, version = header.request_api_key, header.request_api_version
        registry = self.broker.registry
        handler = registry.get(key, version)
        ctx = self._context(header)
        if handler is None:
            if key == API_VERSIONS_KEY:
                return encode_response(header.correlation_id, self._unsupported_api_versions())
            raise CloseConnection(f"API key {key} version {version} is not served")
        cls = request_class(key, version)
        if cls is None:  # advertised but unknown to kio: cannot happen (the registry checks), but never crash
            raise CloseConnection(f"no codec for API key {key} version {version}")
        try:
            request = decode_body(cls, frame, offset)
        except DecodeFailure as exc:
            raise CloseConnection(str(exc)) from None
        started = time.perf_counter()
        try:
            response = await handler.handle(ctx, request)
        except (asyncio.CancelledError, CloseConnection):  # CloseConnection: a request Kafka refuses to parse
            raise
        except Exception:
            log.exception("%s v%d from %s failed", handler.name, version, self.peer)
            if handler.error_response is None:
                raise CloseConnection(f"{handler.name} failed") from None
            response = handler.error_response(ctx, request, ErrorCode.unknown_server_error)
        out = None if response is None else encode_response(header.correlation_id, response)
        self.broker.count_request(handler.name, time.perf_counter() - started)
        return out

    def _context(self, header: Any) -> RequestContext:
        return RequestContext(self.broker, header.request_api_key, header.request_api_version, header.correlation_id,
                              header.client_id, self.peer, self.local_host, self.principal, self.listener_name,
                              self.connection_id)

    def _unsupported_api_versions(self) -> Any:
        """ApiVersions v0 with UNSUPPORTED_VERSION and the ApiVersions range (KIP-511), as Kafka answers."""
        from .codec import build, response_class

        api_versions = self.broker.registry.handler(API_VERSIONS_KEY)
        assert api_versions is not None
        return build(
            response_class(API_VERSIONS_KEY, 0),
            {
                "error_code": ErrorCode.unsupported_version,
                "api_keys": [
                    {"api_key": API_VERSIONS_KEY, "min_version": api_versions.min_version,
                     "max_version": api_versions.max_version}
                ],
            },
        )
