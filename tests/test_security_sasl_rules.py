"""Kafka's finer SASL rules on the authenticator alone (a manual clock, no sockets): which refusals are
failed logins (closed after `connection.failed.authentication.delay.ms`, muted) and which close at once,
when a SaslHandshake on a logged-in connection starts a re-authentication and when it is an ordinary
request, and the outcome the wire metrics count."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup.server.api import CloseConnection
from sharegroup.server.security.sasl import (
    INVALID_RECEIVE_SIZE,
    NOT_GSSAPI,
    DelayedClose,
    SaslAuthenticator,
    SaslState,
    SessionExpired,
)
from sharegroup.server.security.sasl_mechanisms import PlainServer
from sharegroup.server.security.scram_credentials import ScramCredentialStore
from tests.security_harness import req
from tests.server_harness import RawClient


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class _Registry:
    @staticmethod
    def get(key, version):
        return object() if key == 18 else None  # only ApiVersions is served


def _frame(key: int, version: int, body) -> bytes:
    return RawClient.frame(type("C", (), {"correlation_id": 0})(), key, version, body)[4:]


def _gate(clock, delay_ms=250, reauth_ms=1000):
    async def handle_api(frame):
        return b"api"

    gate = SaslAuthenticator(mechanisms=["PLAIN"],
                             new_server=lambda m: PlainServer({"carol": "pw", "dave": "pw"}, ScramCredentialStore(None)),
                             registry=_Registry, ctx_for=lambda header: None, handle_api=handle_api,
                             failed_delay_ms=delay_ms, max_reauth_ms=lambda mechanism: reauth_ms,
                             max_receive_size=524288, now_ms=clock)
    gate.outcomes = []
    gate.on_outcome = lambda mechanism, ok, reauth: gate.outcomes.append((mechanism, ok, reauth))
    return gate


def _run(gate, frame):
    return asyncio.run(gate.receive(frame))


HANDSHAKE = _frame(17, 1, req(17, 1, mechanism="PLAIN"))
METADATA = _frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False))


def _login(gate, user=b"carol", version=2):
    _run(gate, HANDSHAKE)
    return _run(gate, _frame(36, version, req(36, version, auth_bytes=b"\0" + user + b"\0pw")))


# -- refusals before the handshake ---------------------------------------------------------------------


def test_another_api_before_the_handshake_is_a_failed_login_closed_after_the_delay_without_answer():
    gate = _gate(_Clock(), delay_ms=250)
    with pytest.raises(DelayedClose) as refused:
        _run(gate, METADATA)
    assert (str(refused.value), refused.value.delay_s, refused.value.response) == (
        "Unexpected Kafka request of type METADATA during SASL handshake.", 0.25, None)
    assert gate.state is SaslState.FAILED and gate.outcomes == [("NONE", False, False)]


def test_a_first_frame_that_is_no_kafka_request_is_a_failed_login_but_after_api_versions_it_closes_at_once():
    gate = _gate(_Clock(), delay_ms=250)
    with pytest.raises(DelayedClose) as refused:
        _run(gate, b"hello")
    assert str(refused.value).startswith(NOT_GSSAPI) and refused.value.delay_s == 0.25
    assert refused.value.response is None
    later = _gate(_Clock(), delay_ms=250)
    assert _run(later, _frame(18, 3, req(18, 3, client_software_name="t", client_software_version="1"))) == b"api"
    with pytest.raises(CloseConnection) as closed:
        _run(later, b"hello")
    assert not isinstance(closed.value, DelayedClose) and closed.value.delay_s == 0
    assert later.outcomes == []  # not an authentication failure: an invalid request


def test_a_frame_above_the_receive_size_before_login_is_a_failed_login():
    gate = _gate(_Clock(), delay_ms=250)
    refused = gate.oversized()
    assert (str(refused), refused.delay_s, refused.response) == (INVALID_RECEIVE_SIZE, 0.25, None)
    assert gate.state is SaslState.FAILED and gate.outcomes == [("NONE", False, False)]


def test_an_unknown_mechanism_counts_as_a_failure_without_a_mechanism_label():
    gate = _gate(_Clock())
    with pytest.raises(DelayedClose) as refused:
        _run(gate, _frame(17, 1, req(17, 1, mechanism="GSSAPI")))
    assert refused.value.response is not None  # UNSUPPORTED_SASL_MECHANISM with the enabled list
    assert gate.outcomes == [("NONE", False, False)]


# -- re-authentication ---------------------------------------------------------------------------------


def test_without_a_session_lifetime_a_handshake_after_login_is_an_ordinary_request():
    gate = _gate(_Clock(), reauth_ms=0)
    _login(gate)
    assert gate.session_expires_ms is None
    assert not gate.wants(HANDSHAKE)  # the handler answers ILLEGAL_SASL_STATE and the connection stays
    assert not gate.wants(METADATA)
    assert gate.outcomes == [("PLAIN", True, False)]


def test_a_saslauthenticate_v0_login_still_gets_kafkas_session_expiry_and_may_re_authenticate():
    """Kafka computes the session expiry whatever the SaslAuthenticate version (v0 only cannot carry it)."""
    clock = _Clock()
    gate = _gate(clock, reauth_ms=1000)
    _login(gate, version=0)
    assert gate.session_expires_ms == 2000
    assert gate.wants(HANDSHAKE)
    assert _run(gate, HANDSHAKE) is not None and gate.state is SaslState.REAUTH_AUTHENTICATE
    clock.now = 1500
    _run(gate, _frame(36, 0, req(36, 0, auth_bytes=b"\0carol\0pw")))
    assert gate.session_expires_ms == 2500
    assert gate.outcomes == [("PLAIN", True, False), ("PLAIN", True, True)]


def test_a_second_re_authentication_needs_a_second_since_the_previous_one_started():
    clock = _Clock()
    gate = _gate(clock, reauth_ms=10_000)
    _login(gate)
    assert gate.wants(HANDSHAKE)  # the first re-authentication may start at once
    _login(gate)
    clock.now = 1_999
    assert not gate.wants(HANDSHAKE)  # within the second: an ordinary request (ILLEGAL_SASL_STATE)
    clock.now = 2_000
    assert gate.wants(HANDSHAKE)
    _login(gate)
    assert gate.session_expires_ms == 12_000 and gate.principal == "User:carol"


def test_once_expired_a_handshake_too_soon_after_the_last_re_authentication_closes_the_connection():
    clock = _Clock()
    gate = _gate(clock, reauth_ms=1000)
    _login(gate)
    clock.now = 1_500
    _login(gate)  # re-authenticated at 1.5 s: expires at 2.5 s
    clock.now = 2_500
    assert gate.wants(HANDSHAKE)
    with pytest.raises(SessionExpired, match="expired"):
        _run(gate, _frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False)))


def test_re_authentication_over_raw_tokens_keeps_the_principal():
    clock = _Clock()
    gate = _gate(clock, reauth_ms=1000)
    _login(gate)
    assert _run(gate, _frame(17, 0, req(17, 0, mechanism="PLAIN"))) is not None
    assert _run(gate, b"\0carol\0pw") == b"\0\0\0\0"  # an empty token, size-prefixed
    assert gate.state is SaslState.COMPLETE and gate.session_expires_ms == 2000
    clock.now = 3_000
    assert _run(gate, _frame(17, 0, req(17, 0, mechanism="PLAIN"))) is not None
    with pytest.raises(DelayedClose, match="Cannot change principals during re-authentication from "
                                           "User.carol: User.dave") as refused:
        _run(gate, b"\0dave\0pw")
    assert refused.value.response is None
    assert gate.outcomes == [("PLAIN", True, False), ("PLAIN", True, True), ("PLAIN", False, True)]


# -- audit: Kafka's exact outcomes ------------------------------------------------------------------------


def test_a_second_api_versions_before_the_handshake_closes_at_once_and_is_no_failed_login():
    """Kafka's `handleApiVersionsRequest` throws IllegalStateException (not an authentication exception)
    when ApiVersions comes again: the connection closes at once, without the failed-login delay."""
    gate = _gate(_Clock(), delay_ms=250)
    versions = _frame(18, 3, req(18, 3, client_software_name="t", client_software_version="1"))
    assert _run(gate, versions) == b"api"
    with pytest.raises(CloseConnection) as closed:
        _run(gate, versions)
    assert not isinstance(closed.value, DelayedClose)
    assert gate.state is SaslState.FAILED and gate.outcomes == []


def test_re_authentication_with_another_mechanism_fails_without_an_answer():
    """Kafka's REAUTH_BAD_MECHANISM state throws before the SaslAuthenticate is handled, so no response
    is built: the connection closes after the delay with nothing sent."""
    clock = _Clock()
    gate = SaslAuthenticator(mechanisms=["PLAIN", "SCRAM-SHA-256"],
                             new_server=lambda m: PlainServer({"carol": "pw"}, ScramCredentialStore(None)),
                             registry=_Registry, ctx_for=lambda header: None, handle_api=None,
                             failed_delay_ms=250, max_reauth_ms=lambda mechanism: 1000,
                             max_receive_size=524288, now_ms=clock)
    _login(gate)
    assert _run(gate, _frame(17, 1, req(17, 1, mechanism="SCRAM-SHA-256"))) is not None
    with pytest.raises(DelayedClose, match="SASL mechanism 'SCRAM-SHA-256' requested by client is not supported "
                                           "for re-authentication of mechanism 'PLAIN'") as refused:
        _run(gate, _frame(36, 2, req(36, 2, auth_bytes=b"n,,n=carol,r=abc")))
    assert (refused.value.response, refused.value.delay_s) == (None, 0.25)
