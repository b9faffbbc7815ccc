"""The server side of the SASL mechanisms: PLAIN and SCRAM-SHA-256 / SCRAM-SHA-512 (through `scramp`).

Each server takes the client's tokens one at a time (`evaluate`) and answers the next server token;
when `complete` is true, `user` is the authenticated name and the principal is `User:<user>`.

Failures come in Kafka's two kinds, because the client sees them differently:
- `SaslAuthenticationFailed(message)`: the client gets `message` verbatim (all of PLAIN's messages,
  its token count included, and SCRAM's authorization-id check);
- `SaslFailure(detail)`: the client gets only the generic text "Authentication failed during
  authentication due to invalid credentials with SASL mechanism <MECH>", so it never learns whether a
  user exists; `detail` is for the broker's log.

Users: PLAIN checks Kafka's JAAS `user_<NAME>="<password>"` options of the listener's PLAIN login
module first, then the SCRAM credential store (a user with a SCRAM credential can also log in with
PLAIN). SCRAM checks the store only.
"""

from __future__ import annotations

import asyncio
import hmac
import re
from typing import Callable, Protocol

from .scram_credentials import MECHANISM_IDS, ScramCredential, ScramCredentialStore

__all__ = [
    "SCRAM_MECHANISMS",
    "SUPPORTED_MECHANISMS",
    "MechanismServer",
    "PlainServer",
    "SaslAuthenticationFailed",
    "SaslFailure",
    "ScramServer",
    "parse_jaas_options",
]

SCRAM_MECHANISMS = tuple(MECHANISM_IDS)
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))')


class SaslAuthenticationFailed(Exception):
    """A failed login whose message the client may see (Kafka's SaslAuthenticationException)."""


class SaslFailure(Exception):
    """A failed login the client sees only as the generic message (Kafka's SaslException)."""


class MechanismServer(Protocol):
    mechanism: str
    complete: bool
    user: str | None

    async def evaluate(self, token: bytes) -> bytes: ...


def parse_jaas_options(text: str | None) -> dict[str, str]:
    """The `key="value"` options of a JAAS login-module entry (`... PlainLoginModule required a="b";`)."""
    if not text:
        return {}
    return {m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)).replace('\\"', '"')
            for m in _JAAS_OPTION.finditer(text)}


def _tokens(text: str) -> list[str]:
    """Kafka's split of a PLAIN message: at most four NUL-separated tokens are looked at."""
    return text.split("\0", 3)


class PlainServer:
    """SASL/PLAIN (RFC 4616): one token `authzid NUL user NUL password`, no server token back."""

    mechanism = "PLAIN"

    def __init__(self, jaas_users: dict[str, str], store: ScramCredentialStore) -> None:
        self._jaas_users = jaas_users
        self._store = store
        self.complete = False
        self.user: str | None = None

    async def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("PLAIN exchange already complete")
        tokens = _tokens(token.decode("utf-8", errors="replace"))
        if len(tokens) != 3:
            raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if not await self._authenticate(username, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.complete, self.user = True, username
        return b""

    async def _authenticate(self, username: str, password: str) -> bool:
        expected = self._jaas_users.get(username)
        if expected is not None:
            return hmac.compare_digest(expected.encode(), password.encode())
        credentials = self._store.mechanisms(username)
        if not credentials:
            return False
        # Deriving the key costs thousands of hash rounds: off the event loop.
        return await asyncio.to_thread(_password_matches, credentials, password)


def _password_matches(credentials: dict[str, ScramCredential], password: str) -> bool:
    """Whether `password` derives the stored key of the user's (first) SCRAM credential."""
    from scramp import ScramException, ScramMechanism

    mechanism, credential = sorted(credentials.items())[0]
    try:
        _salt, stored_key, _server_key, _i = ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=credential.iterations, salt=credential.salt)
    except ScramException:  # e.g. a password SASLprep refuses
        return False
    return hmac.compare_digest(stored_key, credential.stored_key)


class ScramServer:
    """SCRAM-SHA-256/512 (RFC 5802/7677) without channel binding: client-first, client-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        from scramp import ScramMechanism

        assert mechanism in SCRAM_MECHANISMS, mechanism
        self.mechanism = mechanism
        self._lookup = lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0
        self.complete = False
        self.user: str | None = None
        self._user_seen: str | None = None

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._user_seen = username
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            return None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    async def evaluate(self, token: bytes) -> bytes:
        from scramp import ScramException

        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._check_authzid(text, self._lookup, self.mechanism)
                self._server.set_client_first(text)
                self._step = 1
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._server.set_client_final(text)
                self._step = 2
                final = self._server.get_server_final().encode()
                self.complete, self.user = True, self._user_seen
                return final
        except ScramException as exc:
            if self._step == 0 and self._user_seen is not None and "Unknown user" in str(exc):
                raise SaslFailure("Authentication failed: Invalid user credentials") from None
            raise SaslFailure(f"SCRAM exchange failed: {exc}") from None
        raise SaslFailure("Unexpected SASL request after the SCRAM exchange completed")

    @staticmethod
    def _check_authzid(text: str, lookup: Callable[[str, str], ScramCredential | None], mechanism: str) -> None:
        """Kafka refuses an authorization id other than the user name, with a message the client sees
        (after the credential lookup: an unknown user gets the generic text first)."""
        parts = text.split(",", 3)
        if len(parts) < 3 or not parts[1].startswith("a="):
            return
        authzid = parts[1][2:].replace("=2C", ",").replace("=3D", "=")
        username = next((p[2:] for p in text.split(",")[2:] if p.startswith("n=")), "")
        username = username.replace("=2C", ",").replace("=3D", "=")
        if lookup(username, mechanism) is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
