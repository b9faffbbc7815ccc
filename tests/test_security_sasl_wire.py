"""Kafka's SASL state machine on the wire (raw kio frames against an in-process broker), with exact codes.

One broker with a SASL_PLAINTEXT listener (PLAIN with JAAS users, SCRAM-SHA-256/512 from the store)
and a PLAINTEXT listener; the failed-login delay is 0 here so every refusal is answered at once (the
delay itself is checked on the authenticator in test_security_units.py).
"""

from __future__ import annotations

import logging

import pytest
from kio.schema.errors import ErrorCode

from sharegroup.server.security.scram_credentials import credential_from_password
from tests.security_harness import authenticate, handshake, metadata, plain_login, req, scram_login
from tests.server_harness import BrokerThread, RawClient

GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_carol="carol-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("sasl-wire"), overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "connections.max.reauth.ms": "60000",
    })
    b.broker.security.store.apply([
        ("alice", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "alice-secret")),
        ("bob", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "bob-secret", 8192)),
    ], [])
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.bound["SASL_PLAINTEXT"][1])
    yield c
    c.close()


def test_a_request_before_the_handshake_closes_the_connection_without_an_answer(client, caplog):
    """A failed login for Kafka (IllegalSaslStateException): no answer, closed after the delay (0 here);
    logged at INFO, as Kafka logs a failed authentication."""
    caplog.set_level(logging.INFO, logger="sharegroup.server")
    client.send_raw(client.frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)))
    assert client.is_closed_by_peer()
    assert "Unexpected Kafka request of type METADATA during SASL handshake." in caplog.text


def test_after_api_versions_only_a_handshake_is_accepted(broker):
    for second in ("metadata", "api_versions"):
        c = RawClient(broker.broker.bound["SASL_PLAINTEXT"][1])
        assert c.request(18, 3, req(18, 3, client_software_name="t", client_software_version="1")).error_code == 0
        if second == "metadata":
            c.send_raw(c.frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)))
        else:
            c.send_raw(c.frame(18, 3, req(18, 3, client_software_name="t", client_software_version="1")))
        assert c.is_closed_by_peer(), second
        c.close()


def test_bytes_that_are_no_kafka_request_close_the_connection(client, caplog):
    caplog.set_level(logging.INFO, logger="sharegroup.server")
    client.send_raw(b"\x00\x00\x00\x05hello")
    assert client.is_closed_by_peer()
    assert ("Exception handling first SASL packet from client, GSSAPI is not supported by server"
            in caplog.text)


def test_a_frame_above_sasl_server_max_receive_size_is_refused_before_login(client):
    client.send_raw((524_289).to_bytes(4, "big"))
    assert client.is_closed_by_peer()


def test_an_unknown_mechanism_gets_unsupported_sasl_mechanism_with_the_enabled_list_then_close(client):
    resp = handshake(client, "GSSAPI")
    assert (resp.error_code, resp.mechanisms) == (ErrorCode.unsupported_sasl_mechanism,
                                                  ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    assert client.is_closed_by_peer()


def test_another_api_during_the_exchange_gets_illegal_sasl_state_then_close(client):
    assert handshake(client, "PLAIN").error_code == 0
    resp = metadata(client, ["t"])
    assert [(t.name, t.error_code) for t in resp.topics] == [("t", ErrorCode.illegal_sasl_state)]
    assert client.is_closed_by_peer()


@pytest.mark.parametrize("token, message", [
    (b"\0carol\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0carol-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0carol-secret", "Authentication failed: username not specified"),
    (b"\0carol\0", "Authentication failed: password not specified"),
    (b"admin\0carol\0carol-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"carol\0carol-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\0carol\0carol-secret\0x\0y", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),  # counts stop at 4
])
def test_plain_failures_carry_kafkas_message_then_close(client, token, message):
    assert handshake(client, "PLAIN").error_code == 0
    resp = authenticate(client, token)
    assert (resp.error_code, resp.error_message) == (ErrorCode.sasl_authentication_failed, message)
    assert client.is_closed_by_peer()


def test_plain_login_with_a_jaas_user_then_requests_are_served_and_a_second_authenticate_is_illegal(client):
    resp = plain_login(client, "carol", "carol-secret")
    assert (resp.error_code, resp.error_message, resp.auth_bytes) == (0, None, b"")
    assert resp.session_lifetime.total_seconds() * 1000 == 60000  # connections.max.reauth.ms
    assert metadata(client, []).controller_id == 1
    again = authenticate(client, b"\0carol\0carol-secret")
    assert (again.error_code, again.error_message) == (
        ErrorCode.illegal_sasl_state, "SaslAuthenticate request received after successful authentication")
    assert metadata(client, []).controller_id == 1  # not closed


def test_plain_also_accepts_a_scram_users_password(client):
    assert plain_login(client, "bob", "bob-secret").error_code == 0


@pytest.mark.parametrize("mechanism, user, password", [("SCRAM-SHA-256", "alice", "alice-secret"),
                                                       ("SCRAM-SHA-512", "bob", "bob-secret")])
def test_scram_login_succeeds_and_the_server_proves_its_key(client, mechanism, user, password):
    resp = scram_login(client, mechanism, user, password)
    assert resp.error_code == 0 and resp.auth_bytes.startswith(b"v=")
    assert metadata(client, []).controller_id == 1


@pytest.mark.parametrize("mechanism, user, password", [
    ("SCRAM-SHA-256", "alice", "wrong"),          # wrong proof
    ("SCRAM-SHA-256", "nobody", "alice-secret"),  # unknown user: the same text, so users cannot be probed
    ("SCRAM-SHA-512", "alice", "alice-secret"),   # alice has no SCRAM-SHA-512 credential
])
def test_scram_failures_get_the_generic_message_then_close(client, mechanism, user, password):
    resp = scram_login(client, mechanism, user, password)
    assert (resp.error_code, resp.error_message) == (ErrorCode.sasl_authentication_failed, GENERIC.format(mechanism))
    assert client.is_closed_by_peer()


def test_handshake_v0_exchanges_raw_tokens(client):
    assert handshake(client, "PLAIN", version=0).error_code == 0
    token = b"\0carol\0carol-secret"
    client.send_raw(len(token).to_bytes(4, "big") + token)
    assert client.read_frame() == b""  # PLAIN answers an empty token, size-prefixed, no header
    assert metadata(client, []).controller_id == 1


def test_reauthentication_keeps_the_principal_and_refuses_another(broker):
    same, other = (RawClient(broker.broker.bound["SASL_PLAINTEXT"][1]) for _ in range(2))
    try:
        assert plain_login(same, "carol", "carol-secret").error_code == 0
        again = plain_login(same, "carol", "carol-secret")
        assert again.error_code == 0 and again.session_lifetime.total_seconds() == 60
        assert metadata(same, []).controller_id == 1
        assert plain_login(other, "carol", "carol-secret").error_code == 0
        changed = plain_login(other, "admin", "admin-secret")
        assert (changed.error_code, changed.error_message) == (
            ErrorCode.sasl_authentication_failed,
            "Cannot change principals during re-authentication from User.carol: User.admin")
        assert other.is_closed_by_peer()
    finally:
        same.close()
        other.close()


def test_a_handshake_within_a_second_of_the_last_re_authentication_is_an_ordinary_request(client):
    """Kafka starts at most one re-authentication per second; a SaslHandshake sooner is handled like any
    request: ILLEGAL_SASL_STATE with no mechanisms, and the connection stays logged in."""
    assert plain_login(client, "carol", "carol-secret", version=0).error_code == 0  # v0: re-auth all the same
    assert handshake(client, "PLAIN").error_code == 0  # the re-authentication starts
    assert authenticate(client, b"\0carol\0carol-secret").error_code == 0
    soon = handshake(client, "PLAIN")
    assert (soon.error_code, soon.mechanisms) == (ErrorCode.illegal_sasl_state, ())
    assert metadata(client, []).controller_id == 1


def test_without_a_session_lifetime_a_handshake_after_login_gets_illegal_sasl_state(tmp_path):
    b = BrokerThread(tmp_path, overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                          "sasl.enabled.mechanisms": "PLAIN",
                                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    c = RawClient(b.broker.port)
    try:
        login = plain_login(c, "carol", "carol-secret")
        assert (login.error_code, login.session_lifetime.total_seconds()) == (0, 0)
        resp = handshake(c, "PLAIN")
        assert (resp.error_code, resp.mechanisms) == (ErrorCode.illegal_sasl_state, ())
        assert metadata(c, []).controller_id == 1  # still logged in
    finally:
        c.close()
        b.stop()


def test_reauthentication_with_another_mechanism_fails_without_an_answer(broker, caplog):
    """The handshake is accepted; the SaslAuthenticate after it fails before it is handled (Kafka's
    REAUTH_BAD_MECHANISM), so no response is sent and the connection closes."""
    caplog.set_level(logging.INFO, logger="sharegroup.server")
    c = RawClient(broker.broker.bound["SASL_PLAINTEXT"][1])
    try:
        assert plain_login(c, "bob", "bob-secret").error_code == 0
        assert handshake(c, "SCRAM-SHA-512").error_code == 0
        c.send_raw(c.frame(36, 2, req(36, 2, auth_bytes=b"n,,n=bob,r=abcdefgh")))
        assert c.is_closed_by_peer()
        assert ("SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for re-authentication of "
                "mechanism 'PLAIN'") in caplog.text
    finally:
        c.close()


def test_sasl_requests_on_the_plaintext_listener_get_illegal_sasl_state(broker):
    c = RawClient(broker.broker.bound["PLAINTEXT"][1])
    try:
        resp = handshake(c, "PLAIN")
        assert (resp.error_code, resp.mechanisms) == (ErrorCode.illegal_sasl_state, ())
        assert metadata(c, []).controller_id == 1  # PLAINTEXT needs no login
    finally:
        c.close()


def test_metadata_answers_each_listeners_own_port(broker, client):
    assert plain_login(client, "carol", "carol-secret").error_code == 0
    sasl_port = broker.broker.bound["SASL_PLAINTEXT"][1]
    assert [(b.host, b.port) for b in metadata(client, []).brokers] == [("127.0.0.1", sasl_port)]
    find = client.request(10, 6, req(10, 6, key_type=0, coordinator_keys=["g"]))
    assert [(c.host, c.port) for c in find.coordinators] == [("127.0.0.1", sasl_port)]
    plain = RawClient(broker.broker.bound["PLAINTEXT"][1])
    try:
        assert [b.port for b in metadata(plain, []).brokers] == [broker.broker.bound["PLAINTEXT"][1]]
    finally:
        plain.close()


def test_a_failed_login_is_muted_for_the_delay_before_its_answer(tmp_path):
    """With a long connection.failed.authentication.delay.ms, neither the failure answer nor the answer to
    a later request arrives within a short read, and the connection stays open meanwhile (breaking the
    delay makes the answer arrive at once)."""
    import socket

    b = BrokerThread(tmp_path, overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                          "sasl.enabled.mechanisms": "PLAIN",
                                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                                          "connection.failed.authentication.delay.ms": "60000"})
    c, early = RawClient(b.broker.port), RawClient(b.broker.port)
    try:
        assert handshake(c, "PLAIN").error_code == 0
        c.send_raw(c.frame(36, 2, req(36, 2, auth_bytes=b"\0carol\0wrong")))
        c.send_raw(c.frame(18, 0, req(18, 0)))
        # A request before the handshake is a failed login too: not closed at once, but after the delay.
        early.send_raw(early.frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False)))
        for s in (c.sock, early.sock):
            s.settimeout(0.5)
            with pytest.raises(socket.timeout):
                s.recv(1)
    finally:
        c.close()
        early.close()
        b.stop()
