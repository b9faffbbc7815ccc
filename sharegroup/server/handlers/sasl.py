"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) outside a SASL exchange.

On SASL listeners the connection's `SaslAuthenticator` (`server/security/sasl.py`) answers these
requests while a client logs in or re-authenticates. What reaches these handlers is what Kafka's
request handler sees: a SaslHandshake or SaslAuthenticate on a PLAINTEXT or SSL listener, a
SaslAuthenticate after the login completed, or a SaslHandshake after the login that does not start a
re-authentication (the session has no lifetime, or the last re-authentication began less than a
second ago). Kafka answers both with ILLEGAL_SASL_STATE (SaslHandshake
with no mechanisms). They are registered so ApiVersions advertises them, as Kafka does on every listener.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..api import ApiHandler, RequestContext

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


async def handshake(ctx: RequestContext, request: Any) -> Any:
    return handshake_error(ctx, request, ErrorCode.illegal_sasl_state)


def handshake_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"error_code": code, "mechanisms": []})


async def authenticate(ctx: RequestContext, request: Any) -> Any:
    return ctx.response({"error_code": ErrorCode.illegal_sasl_state, "error_message": AFTER_AUTHENTICATION,
                         "auth_bytes": b"", "session_lifetime": 0})


def authenticate_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return ctx.response({"error_code": code, "error_message": None, "auth_bytes": b"", "session_lifetime": 0})


HANDLERS = (
    ApiHandler(17, "SaslHandshake", 0, 1, handshake, handshake_error),
    ApiHandler(36, "SaslAuthenticate", 0, 2, authenticate, authenticate_error),
)
