"""Security rules one at a time: listener parsing, TLS config refusals, principal mapping rules, the
SCRAM credential store and handlers (Kafka's codes), `--add-scram`, and the authenticator's failed-login
delay and session expiry on a manual clock."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import ssl

import pytest
from kio.schema.errors import ErrorCode

from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.api import CloseConnection
from sharegroup.server.security.broker_security import BrokerSecurity
from sharegroup.server.security.listeners import Listener, parse_listeners
from sharegroup.server.security.sasl import SaslAuthenticator
from sharegroup.server.security.sasl_mechanisms import PlainServer, parse_jaas_options
from sharegroup.server.security.scram_credentials import (
    ScramCredentialStore,
    credential_from_password,
    credential_from_salted_password,
    parse_add_scram,
)
from sharegroup.server.security.ssl_principal import NoMatchingRule, PrincipalMapper, rfc2253_subject
from tests.security_harness import req
from tests.server_harness import BrokerThread, RawClient

# -- listeners ---------------------------------------------------------------------------------------


def test_listeners_with_default_and_custom_protocol_names():
    got = parse_listeners("SASL_SSL://127.0.0.1:0,internal://:9093,PLAINTEXT://[::1]:0",
                          "INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL", "x", 1)
    assert got == [Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", 0), Listener("INTERNAL", "SASL_PLAINTEXT", "", 9093),
                   Listener("PLAINTEXT", "PLAINTEXT", "::1", 0)]
    assert parse_listeners(None, None, "127.0.0.1", 9092) == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]


@pytest.mark.parametrize("listeners, protocol_map, words", [
    ("PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2", None, "different name"),
    ("PLAINTEXT://127.0.0.1:7,SSL://127.0.0.1:7", None, "different port"),
    ("INTERNAL://127.0.0.1:0", None, "no security protocol defined for listener INTERNAL"),
    ("PLAINTEXT:/127.0.0.1:0", None, "unable to parse"),
    ("X://127.0.0.1:0", "X:TLS", "unknown security protocol"),
])
def test_bad_listener_configs_are_refused_naming_the_problem(listeners, protocol_map, words):
    with pytest.raises(ValueError, match=words):
        parse_listeners(listeners, protocol_map, "127.0.0.1", 0)


def _security(tmp_path, **overrides) -> BrokerSecurity:
    return BrokerSecurity.from_config(ServeConfig.build(overrides), tmp_path)


@pytest.mark.parametrize("overrides, words", [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI not supported"),  # Kafka's default mechanism
    ({"listeners": "SSL://127.0.0.1:0"}, "JKS is not supported"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM"}, "needs a key store"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.password": "x",
      "ssl.keystore.location": "/nonexistent"}, "SSL key store password cannot be specified with PEM format"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.key": "x"},
     "SSL private key can be specified only for PEM, but key store type is JKS."),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent"},
     "cannot read"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
      "connections.max.idle.ms": "100"}, "must be less than connections.max.idle.ms"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"}, "invalid regex"),
    ({"ssl.principal.mapping.rules": "NOPE"}, "invalid rule"),
])
def test_bad_security_configs_are_refused_at_start_up(tmp_path, overrides, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(".", r"\.")):
        _security(tmp_path, **overrides)


def test_listener_prefixed_configs_win_and_are_not_warned_about():
    config = ServeConfig.build({"sasl.enabled.mechanisms": "PLAIN",
                                "listeners": "SASL_SSL://127.0.0.1:0,OTHER://127.0.0.1:0",
                                "listener.security.protocol.map": "SASL_SSL:SASL_SSL,OTHER:SASL_PLAINTEXT",
                                "listener.name.SASL_SSL.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                "listener.name.sasl_ssl.plain.sasl.jaas.config": 'x required user_a="b";'})
    from sharegroup.server.security.listeners import listener_value

    assert listener_value(config, "SASL_SSL", "sasl.enabled.mechanisms") == "SCRAM-SHA-512"
    assert listener_value(config, "OTHER", "sasl.enabled.mechanisms") == "PLAIN"
    assert listener_value(config, "SASL_SSL", "sasl.jaas.config", mechanism="PLAIN") == 'x required user_a="b";'
    assert config.warnings == ()
    unused = ServeConfig.build({"listener.name.controller.ssl.keystore.location": "/x"})  # no such listener here
    assert unused.listener_configs == {} and len(unused.warnings) == 1


def test_jaas_user_entries():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a;b c";')
    assert parse_jaas_options(text) == {"username": "admin", "password": "admin-secret",
                                        "user_admin": "admin-secret", "user_alice": "a;b c"}


# -- SSL principal -----------------------------------------------------------------------------------

KAFKA_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
               "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
               "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")


@pytest.mark.parametrize("dn, name", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafkas_principal_mapping_examples(dn, name):
    assert PrincipalMapper(KAFKA_RULES).name(dn) == name


def test_a_comma_inside_a_rule_regex_and_an_out_of_range_back_reference():
    mapper = PrincipalMapper("RULE:^CN=([^,]*),O=(a,b)$/$1-$3/")
    assert len(mapper.rules) == 1
    assert mapper.name("CN=x,O=a,b") == "x-$3"


def test_no_matching_rule_is_an_error_not_anonymous():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        PrincipalMapper("RULE:^CN=y$/y/").name("CN=x")


def test_rfc2253_subject_reverses_rdns_and_escapes():
    peer = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
                        (("commonName", "#w+r"), ("userId", "7")))}
    assert rfc2253_subject(peer) == "CN=\\#w\\+r+UID=7,O=Acme\\, Inc.,C=US"


# -- credentials -------------------------------------------------------------------------------------


def test_add_scram_parses_kafka_storage_syntax_and_stores_no_password(tmp_path):
    name, mechanism, credential = parse_add_scram("SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]")
    assert (name, mechanism, credential.iterations) == ("alice", "SCRAM-SHA-256", 8192)
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", credential.salt, 8192)
    assert credential_from_salted_password(mechanism, credential.salt, salted, 8192) == credential
    store = ScramCredentialStore(tmp_path)
    store.apply([(name, mechanism, credential)], [])
    assert ScramCredentialStore(tmp_path).get("alice", "SCRAM-SHA-256") == credential
    assert b"alice-secret" not in (tmp_path / "scram-credentials.json").read_bytes()


def test_a_credential_file_that_does_not_parse_is_refused_naming_it(tmp_path):
    (tmp_path / "scram-credentials.json").write_text('{"credentials": {"a": {"SCRAM-SHA-256": "salt=x"}}}')
    with pytest.raises(ValueError, match="cannot read the SCRAM credentials in .*scram-credentials.json"):
        ScramCredentialStore(tmp_path)


@pytest.mark.parametrize("text, words", [
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown SCRAM mechanism"),
    ("SCRAM-SHA-256=[password=b]", "name"),
    ("SCRAM-SHA-256=[name=a,iterations=100,password=b]", "Too few iterations"),
    ("SCRAM-SHA-256=[name=a,iterations=20000,password=b]", "Too many iterations"),
    ("SCRAM-SHA-256=[name=a]", "password"),
    ("SCRAM-SHA-256=name=a,password=b", "expected MECHANISM="),
])
def test_bad_add_scram_values_are_refused(text, words):
    with pytest.raises(ValueError, match=words):
        parse_add_scram(text)


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory):
    b = BrokerThread(tmp_path_factory.mktemp("scram-api"))
    yield b
    b.stop()


def _upsert(name, mechanism=1, iterations=4096, salt=None, password=b"pw"):
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = "sha256" if mechanism == 1 else "sha512"
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(digest, password, salt, max(iterations, 1))}


def test_alter_and_describe_user_scram_credentials_with_kafkas_codes(plain_broker):
    client = RawClient(plain_broker.broker.port)
    try:
        resp = client.request(51, 0, req(51, 0, deletions=[{"name": "ghost", "mechanism": 1}], upsertions=[
            _upsert("u1"), _upsert("u2", mechanism=2, iterations=8192), _upsert("", 1),
            _upsert("u3", mechanism=3), _upsert("u4", iterations=4095), _upsert("u5", iterations=16385),
            _upsert("dup"), _upsert("dup", mechanism=2), _upsert("u6", salt=b"short")]))
        assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
            ("ghost", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
            ("u1", ErrorCode.none, None),
            ("u2", ErrorCode.none, None),
            ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
            ("u3", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ("u4", ErrorCode.unacceptable_credential, "Too few iterations"),
            ("u5", ErrorCode.unacceptable_credential, "Too many iterations"),
            ("dup", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
            ("u6", ErrorCode.unacceptable_credential, "The salt must be at least 12 bytes"),
        ]
        described = client.request(50, 0, req(50, 0, users=[{"name": "u2"}, {"name": "nobody"},
                                                            {"name": "u1"}, {"name": "u1"}]))
        assert described.error_code == 0
        assert [(r.user, r.error_code, r.error_message, [(i.mechanism, i.iterations) for i in r.credential_infos])
                for r in described.results] == [
            ("u2", 0, None, [(2, 8192)]),
            ("nobody", ErrorCode.resource_not_found,
             "Attempt to describe a user credential that does not exist: nobody", []),
            ("u1", ErrorCode.duplicate_resource,
             "Cannot describe SCRAM credentials for the same user twice in a single request: u1", []),
        ]
        every = client.request(50, 0, req(50, 0, users=None))
        assert [r.user for r in every.results] == ["u1", "u2"]
        deleted = client.request(51, 0, req(51, 0, deletions=[{"name": "u1", "mechanism": 1}], upsertions=[]))
        assert [(r.user, r.error_code) for r in deleted.results] == [("u1", 0)]
        assert [r.user for r in client.request(50, 0, req(50, 0, users=[])).results] == ["u2"]
    finally:
        client.close()


def test_the_credential_apis_ask_for_alter_and_describe_on_the_cluster(tmp_path):
    from sharegroup.server.authorization import AclOperation, ResourceType

    class DenyAll:
        def __init__(self):
            self.asked = []

        def authorize(self, principal, host, operation, resource_type, name):
            self.asked.append((operation, resource_type, name))
            return False

    b = BrokerThread(tmp_path)
    b.broker.authorizer = DenyAll()
    client = RawClient(b.broker.port)
    try:
        d = client.request(50, 0, req(50, 0, users=None))
        assert (d.error_code, d.results) == (ErrorCode.cluster_authorization_failed, ())
        a = client.request(51, 0, req(51, 0, deletions=[], upsertions=[_upsert("x")]))
        assert [(r.user, r.error_code) for r in a.results] == [("x", ErrorCode.cluster_authorization_failed)]
        assert b.broker.authorizer.asked == [(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
                                             (AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")]
        assert b.broker.security.store.users() == []
    finally:
        client.close()
        b.stop()


# -- the authenticator on a manual clock -------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _frame(key: int, version: int, body, correlation_id: int = 1) -> bytes:
    return RawClient.frame(type("C", (), {"correlation_id": correlation_id - 1})(), key, version, body)[4:]


def _authenticator(clock, delay_ms=250, reauth_ms=1000):
    class Ctx:
        class broker:
            class registry:
                @staticmethod
                def get(key, version):
                    return None

    async def handle_api(frame):
        return b"api"

    return SaslAuthenticator(mechanisms=["PLAIN"],
                             new_server=lambda m: PlainServer({"carol": "pw"}, ScramCredentialStore(None)),
                             registry=Ctx.broker.registry, ctx_for=lambda header: Ctx, handle_api=handle_api,
                             failed_delay_ms=delay_ms, max_reauth_ms=lambda mechanism: reauth_ms,
                             max_receive_size=524288, now_ms=clock)


def test_a_failed_login_is_answered_after_the_configured_delay_then_closed():
    gate = _authenticator(_Clock(), delay_ms=250)
    asyncio.run(gate.receive(_frame(17, 1, req(17, 1, mechanism="PLAIN"))))
    with pytest.raises(CloseConnection) as failure:
        asyncio.run(gate.receive(_frame(36, 2, req(36, 2, auth_bytes=b"\0carol\0bad"))))
    assert failure.value.delay_s == 0.25 and failure.value.response is not None
    with pytest.raises(CloseConnection):  # a failed connection answers nothing more
        asyncio.run(gate.receive(_frame(18, 0, req(18, 0))))


def test_an_expired_session_closes_at_the_next_request_unless_it_re_authenticates():
    clock = _Clock()
    gate = _authenticator(clock, reauth_ms=1000)
    asyncio.run(gate.receive(_frame(17, 1, req(17, 1, mechanism="PLAIN"))))
    asyncio.run(gate.receive(_frame(36, 2, req(36, 2, auth_bytes=b"\0carol\0pw"))))
    metadata = _frame(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False))
    assert (gate.principal, gate.session_expires_ms) == ("User:carol", 2000)
    clock.now = 1999
    assert not gate.wants(metadata)  # still inside the session: the handlers serve it
    clock.now = 2000
    assert gate.wants(metadata)
    handshake = _frame(17, 1, req(17, 1, mechanism="PLAIN"))
    assert gate.wants(handshake)
    asyncio.run(gate.receive(handshake))  # re-authentication is still allowed
    asyncio.run(gate.receive(_frame(36, 2, req(36, 2, auth_bytes=b"\0carol\0pw"))))
    assert gate.session_expires_ms == 3000 and not gate.wants(metadata)
    clock.now = 3000
    with pytest.raises(CloseConnection, match="expired"):
        asyncio.run(gate.receive(metadata))


def test_salted_password_credential_matches_scramp():
    credential = credential_from_password("SCRAM-SHA-512", "pw", 4096, salt=b"0123456789abcdef")
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"0123456789abcdef", 4096)
    assert credential_from_salted_password("SCRAM-SHA-512", b"0123456789abcdef", salted, 4096) == credential


# -- listeners in a running broker -------------------------------------------------------------------


def test_advertised_listeners_are_what_metadata_answers_and_port_0_means_the_bound_port(tmp_path):
    b = BrokerThread(tmp_path, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://broker.example.com:19092,INTERNAL://:0",
    })
    try:
        answers = {}
        for name in ("PLAINTEXT", "INTERNAL"):
            client = RawClient(b.broker.bound[name][1])
            md = client.request(3, 12, req(3, 12, topics=[], allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
            answers[name] = [(x.host, x.port) for x in md.brokers]
            client.close()
        assert answers == {"PLAINTEXT": [("broker.example.com", 19092)],
                           "INTERNAL": [("127.0.0.1", b.broker.bound["INTERNAL"][1])]}
    finally:
        b.stop()


def test_advertised_listeners_must_name_a_listener():
    with pytest.raises(ValueError, match="listener OTHER is not in listeners"):
        BrokerSecurity.from_config(ServeConfig.build({"advertised.listeners": "OTHER://h:1"}), None)


# -- TLS configs -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    trustme = pytest.importorskip("trustme")
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pw")).decode()
    chain = "".join(blob.bytes().decode() for blob in cert.cert_chain_pems)
    return {"chain": chain, "encrypted_key": encrypted, "ca": ca.cert_pem.bytes().decode()}


def _tls(config: dict, listener: str = "SSL"):
    from sharegroup.server.security.tls import server_context

    return server_context(ServeConfig.build({"ssl.keystore.type": "PEM", "listeners": f"{listener}://127.0.0.1:0",
                                             **config}),
                          Listener(listener, listener, "127.0.0.1", 0))


def test_inline_pem_with_an_encrypted_key_and_lost_line_breaks(pem):
    one_line = lambda text: " ".join(text.split())  # noqa: E731  (a properties continuation joins lines)
    context = _tls({"ssl.keystore.certificate.chain": one_line(pem["chain"]),
                    "ssl.keystore.key": one_line(pem["encrypted_key"]), "ssl.key.password": "key-pw",
                    "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pem["ca"],
                    "ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3"})
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ValueError, match="cannot load the key store"):
        _tls({"ssl.keystore.certificate.chain": pem["chain"], "ssl.keystore.key": pem["encrypted_key"],
              "ssl.key.password": "wrong"})
    with pytest.raises(ValueError, match="SSL trust store password cannot be specified for PEM format."):
        _tls({"ssl.keystore.certificate.chain": pem["chain"], "ssl.keystore.key": pem["encrypted_key"],
              "ssl.key.password": "key-pw", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pem["ca"],
              "ssl.truststore.password": "x"})


def test_on_sasl_ssl_only_the_listener_prefixed_client_auth_counts(pem):
    base = {"ssl.keystore.certificate.chain": pem["chain"], "ssl.keystore.key": pem["encrypted_key"],
            "ssl.key.password": "key-pw", "ssl.client.auth": "required"}
    assert _tls(base, "SASL_SSL").verify_mode == ssl.CERT_NONE  # SASL authenticates there
    prefixed = {**base, "listener.name.sasl_ssl.ssl.client.auth": "requested"}
    assert _tls(prefixed, "SASL_SSL").verify_mode == ssl.CERT_OPTIONAL
    assert _tls(base, "SSL").verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("args, words", [
    (("--add-scram", "SCRAM-SHA-256=[name=a,iterations=10,password=b]"), "Too few iterations"),
    (("--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0"), "GSSAPI not supported"),
])
def test_serve_refuses_bad_security_settings_with_exit_2(tmp_path, args, words):
    from tests.server_harness import run_cli

    done = run_cli("serve", "--port", "0", "--data", str(tmp_path / "data"), *args)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def _configs(*args: str) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from sharegroup.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["configs", *args])
    return code, out.getvalue() + err.getvalue()


def test_configs_users_alters_describes_and_reports_kafkas_messages(plain_broker):
    base = ("--bootstrap-server", plain_broker.bootstrap, "--entity-type", "users")
    assert _configs(*base, "--alter", "--entity-name", "frank", "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=pw-1],SCRAM-SHA-512=[password=pw-2]") == (
        0, "Completed updating config for user frank.\n")
    assert _configs(*base, "--describe", "--entity-name", "frank") == (
        0, "SCRAM credential configs for user-principal 'frank' are SCRAM-SHA-256=iterations=8192, "
           "SCRAM-SHA-512=iterations=4096\n")
    assert _configs(*base, "--alter", "--entity-name", "frank", "--delete-config", "SCRAM-SHA-512")[0] == 0
    code, out = _configs(*base, "--alter", "--entity-name", "frank", "--delete-config", "SCRAM-SHA-512")
    assert code == 1 and out.endswith("Attempt to delete a user credential that does not exist\n"), out
    code, out = _configs(*base, "--describe", "--entity-name", "nobody")
    assert code == 1 and out.endswith("Attempt to describe a user credential that does not exist: nobody\n"), out
    code, out = _configs(*base, "--alter", "--entity-name", "frank",
                         "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")
    assert code == 1 and "must be at least 4096" in out
    salted = plain_broker.broker.security.store.get("frank", "SCRAM-SHA-256")
    assert salted is not None and salted.iterations == 8192 and b"pw-1" not in salted.to_text().encode()


def test_alter_scram_a_user_whose_first_entry_is_invalid_keeps_that_error_not_duplicate_resource(plain_broker):
    """Kafka validates the first entry of a user; a later entry of a user that already failed is skipped,
    so the answer is the first entry's error (DUPLICATE_RESOURCE only follows a valid first entry)."""
    client = RawClient(plain_broker.broker.port)
    try:
        resp = client.request(51, 0, req(51, 0, deletions=[{"name": "v1", "mechanism": 9}], upsertions=[
            _upsert("v1"), _upsert("v2", iterations=100), _upsert("v2"), _upsert("v3"), _upsert("v3", iterations=100)]))
        assert sorted((r.user, r.error_code, r.error_message) for r in resp.results) == [
            ("v1", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ("v2", ErrorCode.unacceptable_credential, "Too few iterations"),
            ("v3", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
        ]
        assert [u for u in plain_broker.broker.security.store.users() if u.startswith("v")] == []
    finally:
        client.close()


def test_refused_scram_credential_requests_answer_kafkas_error_response_shapes(tmp_path):
    """Describe: the top-level error and one result per listed user (no name) with the same code; Alter:
    one result per distinct user, sorted by name (Kafka's getErrorResponse)."""
    class DenyAll:
        def authorize(self, principal, host, operation, resource_type, name):
            return False

    b = BrokerThread(tmp_path)
    b.broker.authorizer = DenyAll()
    client = RawClient(b.broker.port)
    try:
        d = client.request(50, 0, req(50, 0, users=[{"name": "bob"}, {"name": "alice"}]))
        assert (d.error_code, d.error_message) == (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        assert [(r.user, r.error_code, r.error_message) for r in d.results] == [
            ("", ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")] * 2
        a = client.request(51, 0, req(51, 0, deletions=[{"name": "zed", "mechanism": 1}],
                                      upsertions=[_upsert("bob"), _upsert("amy"), _upsert("bob")]))
        assert [(r.user, r.error_code) for r in a.results] == [
            ("amy", ErrorCode.cluster_authorization_failed), ("bob", ErrorCode.cluster_authorization_failed),
            ("zed", ErrorCode.cluster_authorization_failed)]
    finally:
        client.close()
        b.stop()
