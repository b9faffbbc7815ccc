"""One client connection: size-prefixed frames in, responses out in request order.

A reader task reads frames ahead (pipelining), a processor starts them one at a time, in order, and a
responder writes the answers in the same order (an answer ready with none before it pending is written
by the processor at once). The processor decodes the header and body with kio and
runs the handler. A Produce (a handler with `start`, api.py) is started: its appends are checked and
placed in order, and while its fsync is in flight the processor goes on to the next request, so a
producer's pipelined requests share the disk's fsyncs (group commit) instead of waiting for each
other; its answer is written once the appends are durable, after every earlier answer. Any other
request first waits until every earlier one is answered, then is handled whole, as Kafka handles one
request of a connection at a time. So responses come back in the order the requests were sent, appends
of one producer stay in order, and nothing is acknowledged before it is durable. Other connections are
independent tasks. A request with more of its connection's requests waiting behind it first takes a
turn (`turns.PipelineTurns`, one per pass of the event loop among all pipelining connections), so
clients that pipeline cannot crowd out one that sends a request at a time.

Limits (Kafka's socket server mutes a channel while its one request is in flight; this broker allows a
few, in order):
- at most `MAX_IN_FLIGHT_REQUESTS` requests read and not yet answered (so at most that many Produce
  requests overlap): the reader stops reading while
  that many are pending, or while the transport's send buffer holds more than `SEND_BUFFER_HIGH_BYTES`
  (asyncio's write flow control: a response waits in `drain()` until the client reads). Unread, the
  socket's bytes stay in the kernel and TCP stops the client sending. So a client that pipelines and
  never reads its responses gets a bounded amount of work done, and only its own connection stalls;
- at most `socket.request.max.bytes` of request bodies read ahead, besides the one being read;
- a request's body is read in pieces as its bytes arrive (nothing is allocated for the size a prefix
  announces), and must arrive whole within `connections.max.idle.ms` of its size prefix;
- a connection that sends no request for `connections.max.idle.ms` is closed, and so is one whose
  requests in flight get no answer taken for that long (a client not reading its responses).

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
from typing import Any, Awaitable

from kio.schema.errors import ErrorCode

from .api import ApiHandler, BrokerView, CloseConnection, DelayedClose, Later, Ready, RequestContext, SessionExpired
from .authorization import ANONYMOUS
from .codec import API_VERSIONS_KEY, DecodeFailure, decode_body, decode_header, encode_response, request_class
from .security.listeners import Listener
from .security.sasl import SaslAuthenticator, authenticator_for
from .turns import PipelineTurns

__all__ = ["BODY_CHUNK_BYTES", "Connection", "MAX_IN_FLIGHT_REQUESTS", "SEND_BUFFER_HIGH_BYTES"]

log = logging.getLogger("sharegroup.server")

# Requests of one connection read and not yet answered. Kafka allows one (a muted channel); a few let a
# pipelining client (a producer with max.in.flight.requests.per.connection=5) keep its requests coming
# while one is handled. Responses always go out in request order.
MAX_IN_FLIGHT_REQUESTS = 5
SEND_BUFFER_HIGH_BYTES = 64 * 1024  # the transport's write-buffer high-water mark (low: a quarter of it)
BODY_CHUNK_BYTES = 64 * 1024  # a request body above this is read in pieces of at most this
_CLOSE = object()
_connection_index = itertools.count()  # makes connection ids unique even when a client port is reused


class Connection:
    """Serves one accepted socket until the client leaves, sends bad input, or the broker stops."""

    def __init__(self, broker: BrokerView, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener: Listener | None = None, turns: PipelineTurns | None = None) -> None:
        self.broker = broker
        self._turns = turns if turns is not None else PipelineTurns()  # the broker's, shared by its connections
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        local = writer.get_extra_info("sockname")
        self.local_host = local[0] if isinstance(local, tuple) else "127.0.0.1"
        local_address = f"{local[0]}:{local[1]}" if isinstance(local, tuple) else str(local)
        # Kafka's connection id: local address, peer address and an index (share sessions are tied to it).
        self.connection_id = f"{local_address}-{self.peer}-{next(_connection_index)}"
        writer.transport.set_write_buffer_limits(high=SEND_BUFFER_HIGH_BYTES)
        self._frames: asyncio.Queue[Any] = asyncio.Queue()  # bounded by MAX_IN_FLIGHT_REQUESTS (+ a close)
        self._queued_bytes = 0  # bodies read ahead and not yet taken by the processor
        self._in_flight = 0  # requests read and not yet answered (queued, being handled, or being sent)
        self._progress = asyncio.Event()  # set when a request is taken or answered: room to read may be back
        self._answers: asyncio.Queue[Any] = asyncio.Queue()  # answers in request order (bounded like _frames)
        self._unanswered = 0  # requests started and not yet answered
        self._all_answered = asyncio.Event()  # set when _unanswered drops to 0
        self._unsent: list[bytes] = []  # answers delivered in this pass of the loop, written by `_flush`
        self.requests_handled = 0
        self.max_in_flight = 0  # the most requests this connection had in flight at once
        self.reads_paused = 0  # times reading stopped for want of room (requests in flight, send buffer)
        self.body_received = 0  # bytes received so far of the last large body read in pieces
        self.listener_name = "PLAINTEXT" if listener is None else listener.name
        self.principal = ANONYMOUS  # the transport's principal (TLS client certificate) or the SASL login's
        self.sasl: SaslAuthenticator | None = None
        if listener is not None:
            self.principal = broker.security.tls_principal(listener, writer.get_extra_info("ssl_object"))
            self.sasl = authenticator_for(broker.security, listener, broker.registry, self._context, self._handle)
            if self.sasl is not None:
                self.sasl.on_outcome = functools.partial(broker.metrics.count_authentication, self.listener_name)

    @property
    def in_flight(self) -> int:
        """Requests read and not yet answered."""
        return self._in_flight

    async def serve(self) -> None:
        reader_task = asyncio.create_task(self._read_frames(), name=f"read {self.peer}")
        processor = asyncio.create_task(self._process(), name=f"process {self.peer}")
        responder = asyncio.create_task(self._respond(), name=f"respond {self.peer}")
        try:
            done, _ = await asyncio.wait((processor, responder), return_when=asyncio.FIRST_COMPLETED)
            if processor in done and processor.exception() is None:
                await responder  # the processor stopped (a close): the answers before it go out first
        finally:
            for task in (reader_task, processor, responder):
                task.cancel()
            outcomes = await asyncio.gather(reader_task, processor, responder, return_exceptions=True)
            self._discard_answers()
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the broker stops: unsent responses are dropped
                self.writer.transport.abort()
            else:
                await self._close_transport()
            for outcome in outcomes:  # a bug, not the client leaving: let the broker log it
                if isinstance(outcome, Exception) and not isinstance(
                        outcome, (ConnectionError, asyncio.IncompleteReadError)):
                    raise outcome

    async def _close_transport(self) -> None:
        """Close after the responses written so far are sent; abort when the client does not take them
        within `connections.max.idle.ms`."""
        self._flush()
        self.writer.close()
        try:
            async with asyncio.timeout(self._idle_s()):
                await self.writer.wait_closed()
        except (TimeoutError, asyncio.CancelledError) as exc:  # cancelled: the broker stops meanwhile
            self.writer.transport.abort()
            if isinstance(exc, asyncio.CancelledError):
                raise
        except (ConnectionError, OSError):
            pass

    def _idle_s(self) -> float | None:
        idle_ms = self.broker.config["connections.max.idle.ms"]
        return idle_ms / 1000 if idle_ms >= 0 else None

    def _check(self) -> None:
        """Read-ahead stays within its bounds: bytes in [0, socket.request.max.bytes], requests in flight in
        [0, MAX_IN_FLIGHT_REQUESTS], no more frames queued than are in flight (plus a close)."""
        assert 0 <= self._queued_bytes <= self.broker.config["socket.request.max.bytes"], self._queued_bytes
        assert 0 <= self._in_flight <= MAX_IN_FLIGHT_REQUESTS, self._in_flight
        assert self._frames.qsize() <= self._in_flight + 1, (self._frames.qsize(), self._in_flight)

    # -- reading ------------------------------------------------------------------------------------

    def _has_room(self, size: int = 0) -> bool:
        """Whether another request (of `size` body bytes, once its prefix is read) may be read now."""
        if self._in_flight >= MAX_IN_FLIGHT_REQUESTS:
            return False
        if self.writer.transport.get_write_buffer_size() > SEND_BUFFER_HIGH_BYTES:
            return False
        return not self._queued_bytes or self._queued_bytes + size <= self.broker.config["socket.request.max.bytes"]

    async def _wait_for_room(self, size: int = 0) -> bool:
        """Wait (not reading) until `_has_room`; False when no request was taken or answered for
        `connections.max.idle.ms` meanwhile (the client does not read its responses)."""
        if self._has_room(size):
            return True
        self.reads_paused += 1
        self.broker.metrics.reads_paused.inc()
        while not self._has_room(size):
            self._progress.clear()
            try:
                async with asyncio.timeout(self._idle_s()):
                    await self._progress.wait()
            except TimeoutError:
                return False
        return True

    async def _read_frames(self) -> None:
        max_bytes = self.broker.config["socket.request.max.bytes"]
        idle_s = self._idle_s()
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not await self._wait_for_room():
                    return self._time_out("responses", "no response of its %d requests in flight was taken",
                                          self._in_flight)
                # One deadline per frame: `connections.max.idle.ms` for the size prefix, moved on to the same
                # span from the prefix for the body when it can be read at once (the common case).
                size: int | None = None
                frame: bytes | None = None
                try:
                    async with asyncio.timeout(idle_s) as deadline:
                        prefix = await self.reader.readexactly(4)  # cancelled, it leaves the bytes it saw buffered
                        size = int.from_bytes(prefix, "big", signed=True)
                        if 0 <= size <= max_bytes and self._has_room(size) and (
                                self.sasl is None or self.sasl.frame_limit is None or size <= self.sasl.frame_limit):
                            if idle_s is not None:
                                deadline.reschedule(loop.time() + idle_s)
                            frame = await self._read_body(size)
                except TimeoutError:
                    if size is not None:
                        return self._time_out("request", "a request of %d bytes was not received whole", size)
                    if self._in_flight:  # a request being handled, however long, keeps the connection from idling
                        continue
                    return self._time_out("idle", "no request received")
                assert size is not None
                if frame is None:
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
                    if not await self._wait_for_room(size):  # the bodies read ahead leave no room for this one
                        return self._time_out("responses", "no response of its %d requests in flight was taken",
                                              self._in_flight)
                    try:
                        async with asyncio.timeout(idle_s):
                            frame = await self._read_body(size)
                    except TimeoutError:
                        return self._time_out("request", "a request of %d bytes was not received whole", size)
                self.broker.metrics.bytes_in.inc(4 + size)
                self._queued_bytes += size
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
                self._frames.put_nowait(frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            self._frames.put_nowait(_CLOSE)  # the client went away (possibly mid-frame)

    async def _read_body(self, size: int) -> bytes:
        """The `size` bytes of a request body, read in pieces of at most BODY_CHUNK_BYTES as they arrive
        (memory grows with what the client sent, not with what it announced)."""
        if size <= BODY_CHUNK_BYTES:
            return await self.reader.readexactly(size)
        pieces: list[bytes] = []
        self.body_received = 0
        while self.body_received < size:
            piece = await self.reader.read(min(size - self.body_received, BODY_CHUNK_BYTES))
            if not piece:
                raise asyncio.IncompleteReadError(b"".join(pieces), size)
            pieces.append(piece)
            self.body_received += len(piece)
        return b"".join(pieces)

    def _time_out(self, reason: str, what: str, *args: Any) -> None:
        """Close for `connections.max.idle.ms` (the processor stops at the close marker); for responses not
        taken, at once, dropping what is unsent (abort: the client is not reading it)."""
        log.info("closing connection %s: " + what + " within connections.max.idle.ms (%d ms)", self.peer, *args,
                 self.broker.config["connections.max.idle.ms"])
        self.broker.metrics.connections_timed_out.labels(reason).inc()
        if reason == "responses":
            self.writer.transport.abort()
        self._frames.put_nowait(_CLOSE)

    # -- handling -----------------------------------------------------------------------------------

    async def _process(self) -> None:
        """Start the requests in order; each one's answer (an awaitable of its response frame) goes to the
        responder. Ends at the close marker or a request that closes the connection."""
        while True:
            frame = await self._frames.get()
            if frame is _CLOSE:
                self._answers.put_nowait(_CLOSE)
                return
            if isinstance(frame, CloseConnection):  # the reader refused a frame (a failed SASL login)
                self._answers.put_nowait(frame)
                return
            self._queued_bytes -= len(frame)
            self._progress.set()
            self._check()
            if not self._frames.empty():  # more requests wait behind this one: a pipelined request's turn
                await self._turns.take()
            try:
                if self.sasl is not None and self.sasl.wants(frame):
                    await self._answered()
                    answer: Any = Ready(await self.sasl.receive(frame))
                    self.principal = self.sasl.principal or self.principal
                else:
                    answer = await self._begin(frame)
            except CloseConnection as exc:
                self._answers.put_nowait(exc)
                return
            if isinstance(answer, Ready) and not self._unanswered:  # nothing before it: out at once
                await self._deliver(answer.value)
                continue
            self._unanswered += 1
            self._answers.put_nowait(answer)

    async def _respond(self) -> None:
        """Write the answers in request order, each once it is ready; close when the processor says so."""
        while True:
            answer = await self._answers.get()
            if answer is _CLOSE:
                return
            if isinstance(answer, CloseConnection):
                await self._close_for(answer)
                return
            try:
                out = await answer
            except CloseConnection as exc:
                await self._close_for(exc)
                return
            await self._deliver(out)
            self._unanswered -= 1
            if not self._unanswered:
                self._all_answered.set()

    async def _deliver(self, out: bytes | None) -> None:
        """Write one answer (None: a request without a response) and count the request answered.

        The bytes go to the socket at the end of this pass of the event loop (`_flush`), together with any
        other answer of this connection ready in the same pass (a group commit makes several Produce
        answers ready at once): one send instead of one per answer, in request order."""
        if out is not None:
            if not self._unsent:
                asyncio.get_running_loop().call_soon(self._flush)
            self._unsent.append(out)
            await self.writer.drain()  # waits while the send buffer is over SEND_BUFFER_HIGH_BYTES
        self.requests_handled += 1
        self._in_flight -= 1
        self._progress.set()

    def _flush(self) -> None:
        """Write the answers delivered and not yet written (in order), unless the connection is closing."""
        if not self._unsent:
            return
        unsent, self._unsent = self._unsent, []
        if self.writer.transport.is_closing():
            return
        out = unsent[0] if len(unsent) == 1 else b"".join(unsent)
        self.writer.write(out)
        self.broker.metrics.bytes_out.inc(len(out))

    async def _answered(self) -> None:
        """Wait until every request started before is answered (its response written)."""
        while self._unanswered:
            self._all_answered.clear()
            await self._all_answered.wait()

    def _discard_answers(self) -> None:
        """Drop the answers nobody will await (the connection ended first; their appends, queued
        already, still become durable)."""
        while not self._answers.empty():
            self._answers.get_nowait()

    async def _close_for(self, exc: CloseConnection) -> None:
        """Close for `exc`: after its delay (muted meanwhile: nothing else of this connection is handled)
        and its response, when it has them (a failed SASL login).

        Logged at Kafka's levels: a failed login (Kafka's "Failed authentication with ...") and an expired
        session at INFO, anything else at WARNING. Clients cause failed logins at will, so at the default
        level they write nothing to stderr: a broker whose stderr nobody reads (a pipe that fills up
        blocks every write, and the event loop with it) keeps answering."""
        if isinstance(exc, (DelayedClose, SessionExpired)):
            log.info("closing connection %s: %s", self.peer, exc)
        else:
            log.warning("closing connection %s: %s", self.peer, exc)
        self.broker.metrics.closed_connections.inc()
        if isinstance(exc, SessionExpired):
            self.broker.metrics.expired_connections_killed.inc()
        if exc.delay_s > 0:
            await asyncio.sleep(exc.delay_s)
        self._flush()
        if exc.response is not None:
            self.writer.write(exc.response)
            await self.writer.drain()

    async def _handle(self, frame: bytes) -> bytes | None:
        """Handle one request whole: its response frame (None: no response)."""
        return await (await self._begin(frame))

    async def _begin(self, frame: bytes) -> Awaitable[bytes | None]:
        """Decode a request and start it: a Produce's ordered part (its appends placed), any other request
        whole once every earlier one is answered. Returns the awaitable of its response frame."""
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
                return Ready(encode_response(header.correlation_id, self._unsupported_api_versions()))
            raise CloseConnection(f"API key {key} version {version} is not served")
        cls = request_class(key, version)
        if cls is None:  # advertised but unknown to kio: cannot happen (the registry checks), but never crash
            raise CloseConnection(f"no codec for API key {key} version {version}")
        try:
            request = decode_body(cls, frame, offset)
        except DecodeFailure as exc:
            raise CloseConnection(str(exc)) from None
        started = time.perf_counter()
        if handler.start is None:
            await self._answered()
            return Ready(await self._finish(handler, ctx, request, handler.handle(ctx, request), started))
        try:
            response = await handler.start(ctx, request)
        except (asyncio.CancelledError, CloseConnection):  # CloseConnection: a request Kafka refuses to parse
            raise
        except Exception:
            log.exception("%s v%d from %s failed", handler.name, version, self.peer)
            response = self._failed(handler, ctx, request)
        return Later(self._finish, handler, ctx, request, response, started)

    async def _finish(self, handler: ApiHandler, ctx: RequestContext, request: Any, response: Awaitable[Any],
                      started: float) -> bytes | None:
        """Await a handler's response and encode it (an unexpected failure: its error response)."""
        try:
            answer = await response
        except (asyncio.CancelledError, CloseConnection):
            raise
        except Exception:
            log.exception("%s v%d from %s failed", handler.name, ctx.api_version, self.peer)
            answer = await self._failed(handler, ctx, request)
        out = None if answer is None else encode_response(ctx.correlation_id, answer)
        self.broker.count_request(handler.name, time.perf_counter() - started)
        return out

    @staticmethod
    def _failed(handler: ApiHandler, ctx: RequestContext, request: Any) -> Awaitable[Any]:
        if handler.error_response is None:
            raise CloseConnection(f"{handler.name} failed") from None
        return Ready(handler.error_response(ctx, request, ErrorCode.unknown_server_error))

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
