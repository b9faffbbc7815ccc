"""Kafka's SASL state machine for SASL_PLAINTEXT and SASL_SSL connections (SaslHandshake + SaslAuthenticate).

A `SaslAuthenticator` sits in front of a connection's handlers. Until the client has authenticated it
sees every frame, and it lets through only what Kafka lets through:

1. First request: ApiVersions (answered normally) or SaslHandshake. Any other API, or a first frame
   that is not a Kafka request at all (or above `sasl.server.max.receive.size`), is a failed login:
   no answer, and the connection closes after the failed-login delay, muted meanwhile (Kafka raises
   an authentication exception there, IllegalSaslState / UnsupportedSaslMechanism, not a plain I/O
   error).
2. After ApiVersions: only SaslHandshake (a second ApiVersions, or a frame whose header does not
   decode, closes the connection at once).
3. SaslHandshake names a mechanism. Enabled: the answer lists the enabled mechanisms and the exchange
   starts. Not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, sent after the failed-login
   delay, then the connection closes. SaslHandshake v0 means the mechanism's tokens follow as raw
   size-prefixed frames (no Kafka header); v1 means each token comes in a SaslAuthenticate request.
4. During the exchange every request must be SaslAuthenticate: any other API gets its own error
   response with ILLEGAL_SASL_STATE after the delay, then the connection closes.
5. A failed login answers SASL_AUTHENTICATION_FAILED with Kafka's message (the mechanism's own text
   for PLAIN, a generic text for SCRAM so the client cannot probe which users exist), sent after
   `connection.failed.authentication.delay.ms`, then the connection closes. During the delay the
   connection is muted: nothing else it sent is handled.
6. Success: the principal is `User:<name>`; later requests go to the handlers. With
   `connections.max.reauth.ms` > 0 (for the listener and mechanism) the session has a lifetime: the
   last SaslAuthenticate answer carries it (v1+; v0 has no such field), and a connection whose session
   expired is closed at its next request other than a re-authentication. As in Kafka, the expiry
   does not depend on the client's SaslAuthenticate version: a client that cannot re-authenticate is
   disconnected when its session ends.
7. Re-authentication: a SaslHandshake on a logged-in connection starts one only when the session has
   a lifetime and the previous re-authentication started at least `MIN_REAUTH_INTERVAL_MS` before;
   then the same mechanism and the same principal must follow (another mechanism: the handshake is
   answered, but the next token is a failed login with no answer, as Kafka's REAUTH_BAD_MECHANISM
   state). Otherwise the SaslHandshake is an ordinary request: the handler answers ILLEGAL_SASL_STATE
   with no mechanisms and the connection stays (Kafka's `maybeBeginServerReauthentication`).
"""

from __future__ import annotations

import logging
import re
import time
from enum import Enum
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode

from ..api import CloseConnection, DelayedClose, HandlerRegistry, RequestContext, SessionExpired
from ..codec import (
    API_VERSIONS_KEY,
    DecodeFailure,
    build,
    decode_body,
    decode_header,
    encode_response,
    request_class,
    response_class,
)
from .broker_security import BrokerSecurity
from .listeners import Listener, listener_value
from .sasl_mechanisms import MechanismServer, SaslAuthenticationFailed, SaslFailure

# DelayedClose and SessionExpired live in `api` (the connection handles them); re-exported here, where they are raised.
__all__ = ["DelayedClose", "SaslAuthenticator", "SaslState", "SessionExpired", "SASL_HANDSHAKE_KEY", "SASL_AUTHENTICATE_KEY",
           "authenticator_for"]

log = logging.getLogger("sharegroup.server")

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)
NO_MECHANISM = "NONE"  # the mechanism label of a failure before an enabled mechanism was chosen
MIN_REAUTH_INTERVAL_MS = 1000  # Kafka: at most one re-authentication start per second and connection
NOT_GSSAPI = "Exception handling first SASL packet from client, GSSAPI is not supported by server"
INVALID_RECEIVE_SIZE = "Failing SASL authentication due to invalid receive size"
NOT_KAFKA = ("Invalid request, potential reasons: kafka client configured with the wrong security protocol, "
             "it does not support KIP-43 or it is not a kafka client.")


class SaslState(Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"  # after ApiVersions: only SaslHandshake
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"
    FAILED = "FAILED"


HandleApi = Callable[[bytes], Awaitable[bytes | None]]


def authenticator_for(security: BrokerSecurity, listener: Listener, registry: HandlerRegistry,
                      ctx_for: Callable[[Any], RequestContext], handle_api: HandleApi) -> "SaslAuthenticator | None":
    """The SASL gate of a new connection on `listener` (None on PLAINTEXT and SSL listeners), with the
    broker's settings for that listener."""
    if not listener.uses_sasl:
        return None
    config = security.config

    def max_reauth_ms(mechanism: str) -> int:  # listener- and mechanism-prefixed forms win
        return int(listener_value(config, listener.name, "connections.max.reauth.ms", mechanism=mechanism))

    return SaslAuthenticator(
        mechanisms=security.mechanisms[listener.name],
        new_server=security.new_mechanism_server(listener),
        registry=registry,
        ctx_for=ctx_for,
        handle_api=handle_api,
        failed_delay_ms=config["connection.failed.authentication.delay.ms"],
        max_reauth_ms=max_reauth_ms,
        max_receive_size=config["sasl.server.max.receive.size"],
    )


class SaslAuthenticator:
    """The SASL gate of one connection (see the module docstring for the rules)."""

    def __init__(
        self,
        *,
        mechanisms: list[str],
        new_server: Callable[[str], MechanismServer],
        registry: HandlerRegistry,
        ctx_for: Callable[[Any], RequestContext],
        handle_api: HandleApi,
        failed_delay_ms: int,
        max_reauth_ms: Callable[[str], int],
        max_receive_size: int,
        now_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
    ) -> None:
        self.mechanisms = list(mechanisms)
        self._new_server = new_server
        self._registry = registry  # the broker's HandlerRegistry (what ApiVersions and error responses use)
        self._ctx_for = ctx_for  # a RequestContext for a decoded header (to build an API's error response)
        self._handle_api = handle_api  # the connection's normal path (ApiVersions before the handshake)
        self.failed_delay_s = failed_delay_ms / 1000
        self._max_reauth_ms = max_reauth_ms  # connections.max.reauth.ms for a mechanism (0: no lifetime)
        self.max_receive_size = max_receive_size
        self._now_ms = now_ms
        self.state = SaslState.INITIAL_REQUEST
        self._server: MechanismServer | None = None
        self._raw_tokens = False  # SaslHandshake v0: tokens come as raw frames
        self._bad_reauth_mechanism: str | None = None  # the failure a re-authentication is bound to get
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.session_expires_ms: int | None = None  # None: the session never expires
        self._reauth_started_ms: int | None = None  # when the last re-authentication began
        self._attempt_mechanism: str | None = None  # the enabled mechanism of the exchange in progress
        # Told of every (re-)authentication outcome: (mechanism or NO_MECHANISM, succeeded, re-authentication).
        self.on_outcome: Callable[[str, bool, bool], None] = lambda mechanism, ok, reauth: None
        self._check()

    def _check(self) -> None:
        """Once authenticated there is a principal and a mechanism; an exchange in progress has its
        mechanism server."""
        if self.state in (SaslState.COMPLETE, SaslState.REAUTH_AUTHENTICATE):
            assert self.principal is not None and self.mechanism is not None
        if self.state in (SaslState.AUTHENTICATE, SaslState.REAUTH_AUTHENTICATE):
            assert self._server is not None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def frame_limit(self) -> int | None:
        """The largest frame accepted now: `sasl.server.max.receive.size` until authenticated."""
        return None if self.authenticated else self.max_receive_size

    def wants(self, frame: bytes) -> bool:
        """Whether this frame is the authenticator's (not yet authenticated, re-authentication, or
        an expired session); after authentication the handlers serve everything else."""
        if self.state is not SaslState.COMPLETE:
            return True
        if self.session_expires_ms is None:
            return False  # no lifetime: no re-authentication, and a SaslHandshake is an ordinary request
        key = int.from_bytes(frame[0:2], "big", signed=True) if len(frame) >= 2 else -1
        now_ms = self._now_ms()
        if key == SASL_HANDSHAKE_KEY and (self._reauth_started_ms is None
                                          or now_ms - self._reauth_started_ms >= MIN_REAUTH_INTERVAL_MS):
            return True
        return now_ms >= self.session_expires_ms

    def oversized(self) -> "DelayedClose":
        """A frame above `sasl.server.max.receive.size` before login: a failed login (no answer)."""
        self.on_outcome(self._attempt_mechanism or NO_MECHANISM, False, self.principal is not None)
        self.state = SaslState.FAILED
        return DelayedClose(INVALID_RECEIVE_SIZE, None, self.failed_delay_s)

    # -- frames -------------------------------------------------------------------------------------

    async def receive(self, frame: bytes) -> bytes | None:
        """The answer to one frame, or `CloseConnection` / `DelayedClose`."""
        reauth = self.principal is not None  # a principal exists only after a successful login
        try:
            out = await self._receive(frame)
        except DelayedClose:  # Kafka's AuthenticationException: a failed (re-)authentication
            self.on_outcome(self._attempt_mechanism or NO_MECHANISM, False, reauth)
            self.state = SaslState.FAILED
            raise
        except CloseConnection:
            self.state = SaslState.FAILED
            raise
        self._check()
        return out

    async def _receive(self, frame: bytes) -> bytes | None:
        if self.state is SaslState.FAILED:
            raise CloseConnection("SASL authentication already failed")
        if self.state in (SaslState.AUTHENTICATE, SaslState.REAUTH_AUTHENTICATE) and self._raw_tokens:
            return await self._raw_token(frame)
        try:
            header, offset = decode_header(frame)
        except DecodeFailure:
            if self.state is SaslState.INITIAL_REQUEST:  # Kafka tries it as a GSSAPI token, which is not enabled
                raise DelayedClose(f"{NOT_GSSAPI} ({NOT_KAFKA})", None, self.failed_delay_s) from None
            raise CloseConnection(NOT_KAFKA) from None
        key, version = int(header.request_api_key), int(header.request_api_version)
        if self.state is SaslState.COMPLETE:
            now_ms = self._now_ms()
            if key != SASL_HANDSHAKE_KEY or (self._reauth_started_ms is not None
                                             and now_ms - self._reauth_started_ms < MIN_REAUTH_INTERVAL_MS):
                raise SessionExpired("the SASL session expired without re-authentication")
            self._reauth_started_ms = now_ms
            return await self._handshake(header, frame, offset, reauth=True)
        if self.state in (SaslState.INITIAL_REQUEST, SaslState.HANDSHAKE_REQUEST):
            if key == API_VERSIONS_KEY and self.state is SaslState.INITIAL_REQUEST:
                out = await self._handle_api(frame)
                if self._registry.get(key, version) is not None:
                    self.state = SaslState.HANDSHAKE_REQUEST  # a bad version may be retried
                return out
            if key == API_VERSIONS_KEY:  # Kafka: IllegalStateException, not a failed login: closed at once
                raise CloseConnection(f"Unexpected ApiVersions request received during SASL authentication "
                                      f"state {self.state.value}")
            if key != SASL_HANDSHAKE_KEY:  # IllegalSaslStateException: a failed login, closed after the delay
                raise DelayedClose(f"Unexpected Kafka request of type {_api_name(key)} during SASL handshake.",
                                   None, self.failed_delay_s)
            return await self._handshake(header, frame, offset, reauth=False)
        # AUTHENTICATE or REAUTH_AUTHENTICATE with Kafka headers
        if key != SASL_AUTHENTICATE_KEY:
            raise DelayedClose(
                f"Unexpected Kafka request of type {_api_name(key)} during SASL authentication.",
                self._illegal_state_response(header, frame, offset), self.failed_delay_s)
        if not AUTHENTICATE_VERSIONS[0] <= version <= AUTHENTICATE_VERSIONS[1]:
            raise CloseConnection(f"SaslAuthenticate version {version} is not supported")
        request = _decode(SASL_AUTHENTICATE_KEY, version, frame, offset)
        return await self._authenticate(header, version, bytes(request.auth_bytes))

    async def _handshake(self, header: Any, frame: bytes, offset: int, *, reauth: bool) -> bytes:
        version = int(header.request_api_version)
        if not HANDSHAKE_VERSIONS[0] <= version <= HANDSHAKE_VERSIONS[1]:
            raise CloseConnection(f"SaslHandshake version {version} is not supported")
        request = _decode(SASL_HANDSHAKE_KEY, version, frame, offset)
        mechanism = str(request.mechanism)

        def answer(code: int) -> bytes:
            body = build(response_class(SASL_HANDSHAKE_KEY, version),
                         {"error_code": code, "mechanisms": self.mechanisms})
            return encode_response(header.correlation_id, body)

        if mechanism not in self.mechanisms:
            raise DelayedClose(f"Unsupported SASL mechanism {mechanism}", answer(ErrorCode.unsupported_sasl_mechanism),
                               self.failed_delay_s)
        if reauth and mechanism != self.mechanism:
            # Kafka accepts the handshake and fails the SaslAuthenticate that follows (REAUTH_BAD_MECHANISM).
            self._bad_reauth_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                          f"re-authentication of mechanism '{self.mechanism}'")
        self._attempt_mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._raw_tokens = version == 0
        if not reauth:
            self.mechanism = mechanism
        self.state = SaslState.REAUTH_AUTHENTICATE if reauth else SaslState.AUTHENTICATE
        return answer(ErrorCode.none)

    async def _authenticate(self, header: Any, version: int, token: bytes) -> bytes:
        assert self._server is not None
        reauth = self.state is SaslState.REAUTH_AUTHENTICATE
        cls = response_class(SASL_AUTHENTICATE_KEY, version)
        if self._bad_reauth_mechanism is not None:  # Kafka fails before handling the request: no answer
            raise DelayedClose(self._bad_reauth_mechanism, None, self.failed_delay_s)
        try:
            reply = await self._server.evaluate(token)
        except (SaslAuthenticationFailed, SaslFailure) as exc:
            log.info("SASL %s authentication failed: %s", self._server.mechanism, exc)
            message = self._failure_message(exc, reauth)
            body = build(cls, {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message,
                               "auth_bytes": b"", "session_lifetime": 0})
            raise DelayedClose(message, encode_response(header.correlation_id, body), self.failed_delay_s) from None
        lifetime_ms = 0
        if self._server.complete:
            principal = f"User:{self._server.user}"
            if reauth and principal != self.principal:
                message = _principal_changed(self.principal, principal)
                body = build(cls, {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message,
                                   "auth_bytes": b"", "session_lifetime": 0})
                raise DelayedClose(message, encode_response(header.correlation_id, body), self.failed_delay_s)
            lifetime_ms = self._complete(principal, reauth)
        body = build(cls, {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": reply,
                           "session_lifetime": lifetime_ms})
        return encode_response(header.correlation_id, body)

    def _complete(self, principal: str, reauth: bool) -> int:
        """Log the principal in; the session lifetime (ms, 0: none) from `connections.max.reauth.ms`."""
        assert self._server is not None and self.mechanism is not None
        self.on_outcome(self._server.mechanism, True, reauth)
        self._attempt_mechanism = None
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._server = None
        self._raw_tokens = False
        lifetime_ms = max(0, self._max_reauth_ms(self.mechanism))
        self.session_expires_ms = self._now_ms() + lifetime_ms if lifetime_ms > 0 else None
        return lifetime_ms

    async def _raw_token(self, frame: bytes) -> bytes:
        """SaslHandshake v0: the frame is a bare token; the answer is a bare size-prefixed token."""
        assert self._server is not None
        reauth = self.state is SaslState.REAUTH_AUTHENTICATE
        try:
            if self._bad_reauth_mechanism is not None:
                raise SaslAuthenticationFailed(self._bad_reauth_mechanism)
            reply = await self._server.evaluate(frame)
            principal = f"User:{self._server.user}" if self._server.complete else None
            if reauth and principal is not None and principal != self.principal:
                raise SaslAuthenticationFailed(_principal_changed(self.principal, principal))
        except (SaslAuthenticationFailed, SaslFailure) as exc:
            raise DelayedClose(f"SASL {self._server.mechanism} authentication failed: {exc}", None,
                               self.failed_delay_s) from None
        if principal is not None:
            self._complete(principal, reauth)
        return len(reply).to_bytes(4, "big") + reply

    def _failure_message(self, exc: Exception, reauth: bool) -> str:
        if isinstance(exc, SaslAuthenticationFailed):
            return str(exc)
        assert self._server is not None
        during = "re-authentication" if reauth else "authentication"
        return (f"Authentication failed during {during} due to invalid credentials with SASL mechanism "
                f"{self._server.mechanism}")

    def _illegal_state_response(self, header: Any, frame: bytes, offset: int) -> bytes | None:
        """The API's own error response carrying ILLEGAL_SASL_STATE (None when it cannot be built)."""
        ctx = self._ctx_for(header)
        handler = self._registry.get(ctx.api_key, ctx.api_version)
        cls = request_class(ctx.api_key, ctx.api_version)
        if handler is None or handler.error_response is None or cls is None:
            return None
        try:
            request = decode_body(cls, frame, offset)
            return encode_response(header.correlation_id,
                                   handler.error_response(ctx, request, ErrorCode.illegal_sasl_state))
        except Exception:  # an undecodable or unanswerable request: closed without an answer
            return None


def _principal_changed(before: str | None, after: str) -> str:
    """Kafka's message (it prints a principal as TYPE.NAME here)."""
    return (f"Cannot change principals during re-authentication from "
            f"{before.replace(':', '.', 1) if before else None}: {after.replace(':', '.', 1)}")


def _decode(key: int, version: int, frame: bytes, offset: int) -> Any:
    cls = request_class(key, version)
    assert cls is not None
    try:
        return decode_body(cls, frame, offset)
    except DecodeFailure as exc:
        raise CloseConnection(str(exc)) from None


def _api_name(key: int) -> str:
    """Kafka's ApiKeys name of an API (METADATA, SHARE_FETCH, ...), as its messages print it."""
    for version in range(20):
        cls = request_class(key, version)
        if cls is not None:
            return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__.removesuffix("Request")).upper()
    return f"UNKNOWN({key})"
