"""One secured broker through a busy security session, with real `confluent_kafka` clients.

The broker has the four listener kinds at once: SASL_SSL (PLAIN from the SCRAM store, SCRAM-SHA-256/512),
SSL that requires a client certificate (its principal mapped by `ssl.principal.mapping.rules`),
SASL_PLAINTEXT with JAAS PLAIN users, and PLAINTEXT; a StandardAuthorizer with
`super.users=User:admin;User:bob;User:carol`, `connections.max.reauth.ms` and Kafka's default failed-login
delay (100 ms).

- Failed logins as clients see them: a wrong SCRAM or PLAIN password, and a login after the user's SCRAM
  credential was deleted (on both SASL listeners, and the re-authentication of a connection that logged
  in before the deletion), reach librdkafka's error callback as `_AUTHENTICATION` with Kafka's message
  (the SaslAuthenticate error response arrives before the broker closes the connection, pipelined
  requests or not).
- A flood of failed logins against a broker whose stderr nobody reads: failed logins are logged at INFO,
  so the pipe never fills and the broker keeps answering (at WARNING it stalled after a few hundred and
  clients saw only `Local: Broker transport failure`).
- CreateAcls after a busy session: failed logins, a certificate principal, the super users' own ACL calls
  over three listeners and re-authentications leave nothing behind that lets a SCRAM user without ACLs
  create ACLs: it gets CLUSTER_AUTHORIZATION_FAILED, as on a fresh broker; a certificate mapped to a super
  user's name is that super user and lends its decisions to no other principal.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)

from kio.index import load_response_schema  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from tests.security_harness import (  # noqa: E402
    PASSWORDS,
    Certificates,
    TlsRawClient,
    plain_login,
    read_until_closed,
    req,
    scram_login,
)
from tests.server_harness import RawClient, ServeProcess  # noqa: E402
from tests.share_clients import WAIT_S  # noqa: E402

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";')
LIFETIME_MS = 2000
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
PLAIN_FAILED = "Authentication failed: Invalid username or password"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates.make(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    server = ServeProcess(
        tmp_path_factory.mktemp("busy-session") / "data",
        "--override", "listeners=SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                      "PLAINTEXT://127.0.0.1:0",
        "--override", "ssl.keystore.type=PEM",
        "--override", f"ssl.keystore.location={certs.server_pem}",
        "--override", "ssl.truststore.type=PEM",
        "--override", f"ssl.truststore.location={certs.ca_pem}",
        "--override", "listener.name.ssl.ssl.client.auth=required",
        "--override", "ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/L",
        "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", f"authorizer.class.name={STANDARD}",
        "--override", "super.users=User:admin;User:bob;User:carol",
        "--override", f"connections.max.reauth.ms={LIFETIME_MS}",
        "--add-scram", f"SCRAM-SHA-256=[name=alice,password={PASSWORDS['alice']}]",
        "--add-scram", f"SCRAM-SHA-512=[name=bob,iterations=8192,password={PASSWORDS['bob']}]",
        "--add-scram", "SCRAM-SHA-256=[name=dave,password=dave-secret]",
        "--add-scram", "SCRAM-SHA-256=[name=erin,password=erin-secret]",
        "--add-scram", "SCRAM-SHA-256=[name=frank,password=frank-secret]",
        "--metrics-port", "0",
    )
    try:
        server.metrics_url = None
        for _ in range(20):  # warnings may come first on stderr; the metrics line is printed before readiness
            line = server.proc.stderr.readline()
            if " metrics on " in line:
                server.metrics_url = line.split(" metrics on ", 1)[1].strip()
                break
        assert server.metrics_url is not None
        server.ports = {line.split()[3]: int(line.rsplit(":", 1)[1]) for line in server.listener_lines}
        yield server
    finally:
        server.kill()


def _config(broker, certs, listener: str, mechanism: str | None = None, user: str = "", password: str = "",
            certificate: bool = False) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}", "security.protocol": listener}
    if "SSL" in listener:
        config["ssl.ca.location"] = str(certs.ca_pem)
    if certificate:
        config["ssl.certificate.location"] = str(certs.client_cert_pem)
        config["ssl.key.location"] = str(certs.client_key_pem)
    if mechanism is not None:
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return config


def _first_error(config: dict, client: str = "producer") -> KafkaError:
    """The first error librdkafka reports to the error callback (bounded wait)."""
    errors: list[KafkaError] = []
    settings = {**config, "error_cb": errors.append}
    handle = Producer(settings) if client == "producer" else AdminClient(settings)
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:
        handle.poll(0.1)
    assert errors, "no client error within the wait"
    return errors[0]


def _scrape(url: str, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" ([0-9.e+]+)", text)
    return float(match.group(1)) if match else 0.0


def _acl(principal: str, resource_type=ResourceType.TOPIC, name: str = "orders",
         operation=AclOperation.READ) -> AclBinding:
    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def _create(admin: AdminClient, *bindings: AclBinding) -> list:
    """Per binding: None (created) or the error code that refused it."""
    outcomes = []
    for future in admin.create_acls(list(bindings), request_timeout=WAIT_S).values():
        try:
            outcomes.append(future.result(WAIT_S))
        except KafkaException as exc:
            outcomes.append(exc.args[0].code())
    return outcomes


# -- failed logins as clients see them -----------------------------------------------------------------


@pytest.mark.parametrize("client", ["producer", "admin"])
@pytest.mark.parametrize("listener, mechanism, user, message", [
    ("SASL_SSL", "SCRAM-SHA-256", "alice", SCRAM_FAILED.format("SCRAM-SHA-256")),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", SCRAM_FAILED.format("SCRAM-SHA-512")),
    ("SASL_SSL", "PLAIN", "alice", PLAIN_FAILED),  # PLAIN checked against the SCRAM store
    ("SASL_PLAINTEXT", "PLAIN", "carol", PLAIN_FAILED),  # a JAAS user
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", SCRAM_FAILED.format("SCRAM-SHA-256")),
])
def test_failed_logins_reach_the_client_as_authentication_errors_with_kafkas_message(
        broker, certs, client, listener, mechanism, user, message):
    """Rule: the SaslAuthenticate error response reaches the client before the connection closes, after
    the failed-login delay, so librdkafka reports `_AUTHENTICATION` with Kafka's text."""
    error = _first_error(_config(broker, certs, listener, mechanism, user, "not-the-password"), client)
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert message in error.str()


def test_list_topics_reports_a_transport_failure_whatever_the_cause_while_the_error_callback_has_kafkas(
        broker, certs):
    """What a client sees, pinned so a failure is not misread: librdkafka's `list_topics` (its Metadata call)
    raises `_TRANSPORT` ("Failed to get metadata: Local: Broker transport failure") whenever no broker
    became usable in time, whatever the reason (rd_kafka_metadata returns it when no broker is up); the
    broker's SaslAuthenticate answer reaches the error callback as `_AUTHENTICATION` with Kafka's text."""
    errors: list[KafkaError] = []
    admin = AdminClient({**_config(broker, certs, "SASL_SSL", "SCRAM-SHA-256", "alice", "not-the-password"),
                         "error_cb": errors.append})
    with pytest.raises(KafkaException) as raised:
        admin.list_topics(timeout=2)
    assert raised.value.args[0].code() == KafkaError._TRANSPORT
    admin.poll(0)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert SCRAM_FAILED.format("SCRAM-SHA-256") in errors[0].str()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_failed_login_is_answered_on_the_wire_before_the_connection_closes(broker, certs, mechanism):
    """The same rule in raw frames over TLS: after the delay, the whole SaslAuthenticate response with
    SASL_AUTHENTICATION_FAILED and Kafka's message, then the close (EOF), and nothing else."""
    client = TlsRawClient(broker.ports["SASL_SSL"], certs.client_context())
    try:
        if mechanism == "PLAIN":
            answer = plain_login(client, "alice", "not-the-password")
            message = PLAIN_FAILED
        else:
            answer = scram_login(client, mechanism, "alice", "not-the-password")
            message = SCRAM_FAILED.format(mechanism)
        assert (answer.error_code, answer.error_message) == (58, message)  # SASL_AUTHENTICATION_FAILED
        assert client.is_closed_by_peer()
    finally:
        client.close()


def _delete_scram(broker, certs, user: str) -> None:
    """Delete `user`'s SCRAM-SHA-256 credential through AlterUserScramCredentials, as the super user bob."""
    bob = AdminClient(_config(broker, certs, "SASL_SSL", "SCRAM-SHA-512", "bob", PASSWORDS["bob"]))
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    for future in bob.alter_user_scram_credentials([deletion], request_timeout=WAIT_S).values():
        assert future.result(WAIT_S) is None


@pytest.mark.parametrize("listener, user", [("SASL_SSL", "dave"), ("SASL_PLAINTEXT", "erin")])
def test_a_login_after_the_scram_credential_was_deleted_fails_with_kafkas_message(broker, certs, listener, user):
    """Rule: a user whose SCRAM credential was deleted gets SASL_AUTHENTICATION_FAILED with Kafka's generic
    SCRAM text at the next login, on either SASL listener; librdkafka reports `_AUTHENTICATION`."""
    config = _config(broker, certs, listener, "SCRAM-SHA-256", user, f"{user}-secret")
    assert AdminClient(config).list_topics(timeout=WAIT_S).brokers  # the credential works
    _delete_scram(broker, certs, user)
    for client in ("producer", "admin"):
        error = _first_error(config, client)
        assert error.code() == KafkaError._AUTHENTICATION, error
        assert SCRAM_FAILED.format("SCRAM-SHA-256") in error.str()


def test_a_logged_in_client_whose_credential_is_deleted_fails_its_reauthentication_with_kafkas_message(
        broker, certs):
    """Rule: a connection that logged in before its user's SCRAM credential was deleted keeps working until
    its session ends (`connections.max.reauth.ms`); librdkafka's re-authentication then gets
    SASL_AUTHENTICATION_FAILED with Kafka's re-authentication text, reported as `_AUTHENTICATION`."""
    errors: list[KafkaError] = []
    frank = AdminClient({**_config(broker, certs, "SASL_SSL", "SCRAM-SHA-256", "frank", "frank-secret"),
                         "error_cb": errors.append})
    assert frank.list_topics(timeout=WAIT_S).brokers
    _delete_scram(broker, certs, "frank")
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:  # the session lifetime is LIFETIME_MS
        frank.poll(0.1)
    assert errors, "frank's connection was never re-authenticated"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]
    assert SCRAM_FAILED.replace("during authentication", "during re-authentication").format(
        "SCRAM-SHA-256") in errors[0].str()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_a_failed_login_pipelined_behind_its_handshake_and_before_more_requests_is_answered_before_the_close(
        broker, certs, listener):
    """Rule: the failure answer is written whole before the close even when the client pipelines: the
    SaslHandshake, the failing SaslAuthenticate and requests behind it in one write get the handshake
    answer, the SASL_AUTHENTICATION_FAILED answer (nothing for what followed: the connection is muted),
    then EOF."""
    if listener == "SASL_SSL":
        client = TlsRawClient(broker.ports[listener], certs.client_context())
    else:
        client = RawClient(broker.ports[listener])
    try:
        metadata_frame = client.frame(3, 12, req(3, 12, topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
        client.send_raw(client.frame(17, 1, req(17, 1, mechanism="PLAIN"))
                        + client.frame(36, 2, req(36, 2, auth_bytes=b"\0alice\0not-the-password"))
                        + metadata_frame * 20)
        handshake = _response(client.read_frame(), 17, 1)
        assert handshake.error_code == 0
        answer = _response(client.read_frame(), 36, 2)
        assert (answer.error_code, answer.error_message) == (58, PLAIN_FAILED)
        assert read_until_closed(client.sock) == b""
    finally:
        client.close()


def _response(frame: bytes, api_key: int, version: int):
    cls = load_response_schema(api_key, version)
    _header, offset = entity_reader(cls.__header_schema__)(frame, 0)
    return entity_reader(cls)(frame, offset)[0]


# -- CreateAcls after a busy session -------------------------------------------------------------------


def test_create_acls_is_refused_to_a_scram_user_without_acls_after_a_busy_security_session(broker, certs):
    """Rule: only super users and principals with ALTER on the cluster may create ACLs, whatever the
    connections before did. After failed logins (of super users too), a certificate principal's refused
    CreateAcls, the three super users' own CreateAcls/DescribeAcls/DeleteAcls over SASL_SSL and
    SASL_PLAINTEXT, and re-authentications of a super user's connections, a SCRAM user without ACLs
    logged in over SASL_SSL is refused with CLUSTER_AUTHORIZATION_FAILED (and so is the certificate
    principal, on a new connection)."""
    alice_config = _config(broker, certs, "SASL_SSL", "SCRAM-SHA-256", "alice", PASSWORDS["alice"])
    alice_throughout = AdminClient(alice_config)  # one connection kept through the session (re-authenticating)
    assert _create(alice_throughout, _acl("User:mallory")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    for listener, mechanism, user in (("SASL_SSL", "SCRAM-SHA-512", "bob"), ("SASL_SSL", "PLAIN", "admin"),
                                      ("SASL_PLAINTEXT", "PLAIN", "carol"), ("SASL_SSL", "SCRAM-SHA-256", "alice")):
        failed = _first_error(_config(broker, certs, listener, mechanism, user, "wrong"))
        assert failed.code() == KafkaError._AUTHENTICATION, failed

    writer = _config(broker, certs, "SSL", certificate=True)  # CN=writer,... -> User:writer
    assert _create(AdminClient(writer), _acl("User:writer")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    anonymous = _config(broker, certs, "PLAINTEXT")
    assert _create(AdminClient(anonymous), _acl("User:ANONYMOUS")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]

    admin = AdminClient(_config(broker, certs, "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret"))
    bob = AdminClient(_config(broker, certs, "SASL_SSL", "SCRAM-SHA-512", "bob", PASSWORDS["bob"]))
    carol = AdminClient(_config(broker, certs, "SASL_PLAINTEXT", "PLAIN", "carol", "carol-secret"))
    # ACLs on the cluster resource itself, so the refusal below is "ACLs apply, none allows ALTER".
    assert _create(admin, _acl("User:*", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
                   _acl("User:writer")) == [None, None]
    assert _create(bob, _acl("User:alice", ResourceType.GROUP, "alice-app")) == [None]
    temporary = _acl("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    assert _create(carol, temporary) == [None]
    removed = carol.delete_acls([AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                                  "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)],
                                request_timeout=WAIT_S)
    assert [len(f.result(WAIT_S)) for f in removed.values()] == [1]

    reauthentications = ("sharegroup_server_successful_reauthentication_total",
                         {"listener": "SASL_SSL", "mechanism": "SCRAM-SHA-512"})
    before = _scrape(broker.metrics_url, reauthentications[0], **reauthentications[1])
    deadline = time.monotonic() + WAIT_S
    step = 0
    while _scrape(broker.metrics_url, reauthentications[0], **reauthentications[1]) < before + 1:
        assert time.monotonic() < deadline, "bob's connections were never re-authenticated"
        assert _create(bob, _acl(f"User:reader-{step}")) == [None]  # the super user stays served
        step += 1
        bob.poll(0.2)
    assert _create(bob, _acl("User:after-reauth")) == [None]

    for alice in (AdminClient(alice_config), alice_throughout):
        refused = _create(alice, _acl("User:mallory"), _acl("User:alice", ResourceType.BROKER, "kafka-cluster",
                                                            AclOperation.ALL))
        assert refused == [KafkaError.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert _create(AdminClient(writer), _acl("User:writer")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    principals = {b.principal for b in admin.describe_acls(everything, request_timeout=WAIT_S).result(WAIT_S)}
    assert "User:mallory" not in principals  # nothing of alice's request was created


# -- a flood of failed logins ----------------------------------------------------------------------------

FLOOD_LOGINS = 400  # ~190 bytes each if logged at WARNING: more than a 64 KiB pipe holds


def test_failed_logins_are_logged_at_info_so_a_flood_never_stalls_a_broker_whose_stderr_nobody_reads(tmp_path):
    """Rule (Kafka logs "Failed authentication with ..." at INFO): a failed login writes nothing to stderr
    at the default level. Logged at WARNING, a few hundred failed logins filled the unread stderr pipe of
    a broker run as tests (and many supervisors) run it; the next log write blocked the event loop, and
    every client then saw only `Local: Broker transport failure` (the failure answer never came)."""
    server = ServeProcess(
        tmp_path / "data",
        "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "connection.failed.authentication.delay.ms=0",
    )
    try:
        port = int(server.listener_lines[0].rsplit(":", 1)[1])
        for _ in range(FLOOD_LOGINS):  # stderr is a pipe the harness reads only at the end
            client = RawClient(port)
            try:
                assert plain_login(client, "carol", "not-the-password").error_code == 58
                assert client.is_closed_by_peer()
            finally:
                client.close()
        errors: list[KafkaError] = []
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "carol", "sasl.password": "wrong",
                             "error_cb": errors.append})
        deadline = time.monotonic() + WAIT_S
        while not errors and time.monotonic() < deadline:
            producer.poll(0.1)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert PLAIN_FAILED in errors[0].str()
    finally:
        _code, _out, err = server.terminate()
    assert "closing connection" not in err and "Authentication failed" not in err


def test_a_certificate_mapped_to_a_super_users_name_is_that_super_user_and_lends_nothing_to_sasl_logins(
        broker, certs, tmp_path):
    """Rule: principals are compared as `User:<name>` whatever made them. A client certificate whose subject
    `ssl.principal.mapping.rules` maps to `bob` is the super user User:bob on the SSL listener (as in
    Kafka); beside it, a SCRAM login without ACLs (alice) and the SCRAM user bob's own logins are decided
    on their own principal: alice is refused CreateAcls, SCRAM bob is allowed, the certificate
    `CN=writer` is refused."""
    issued = certs.ca.issue_cert("bob@example.com", common_name="bob", organization_name="acme",
                                 organization_unit_name="eng")
    key, chain = tmp_path / "bob-key.pem", tmp_path / "bob-cert.pem"
    key.write_bytes(issued.private_key_pem.bytes())
    chain.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    bob_by_certificate = AdminClient({**_config(broker, certs, "SSL"), "ssl.certificate.location": str(chain),
                                      "ssl.key.location": str(key)})
    alice = AdminClient(_config(broker, certs, "SASL_SSL", "SCRAM-SHA-256", "alice", PASSWORDS["alice"]))
    bob = AdminClient(_config(broker, certs, "SASL_SSL", "SCRAM-SHA-512", "bob", PASSWORDS["bob"]))
    writer = AdminClient(_config(broker, certs, "SSL", certificate=True))
    for _ in range(2):  # interleaved, twice: no decision of one principal is reused for another
        assert _create(bob_by_certificate, _acl("User:cert-bob-grant")) == [None]
        assert _create(alice, _acl("User:alice-grant")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
        assert _create(bob, _acl("User:scram-bob-grant")) == [None]
        assert _create(writer, _acl("User:writer-grant")) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
