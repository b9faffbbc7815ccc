"""`sharegroup share-groups` and `sharegroup configs` against a secured broker with Kafka's
`--command-config` client properties: SASL_SSL with SCRAM-SHA-512 (the admin a super user of the ACL
authorizer), a wrong password (Kafka's message, exit 1), an SSL listener that requires a client
certificate, and settings the tools refuse."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from sharegroup.admin.client_security import client_security
from sharegroup.cli import main
from sharegroup.server.security.scram_credentials import credential_from_password
from tests.security_harness import Certificates
from tests.server_harness import BrokerThread, batch_bytes

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates.make(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    b = BrokerThread(tmp_path_factory.mktemp("admin-cli"), share=True, overrides={
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": STANDARD, "super.users": "User:admin;User:CN=writer,OU=eng,O=acme",
    })
    b.broker.security.store.apply([("admin", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "admin-secret"))],
                                  [])
    info = b.call(b.store.create_topic("orders", 1))
    b.call(b.store.append(info.topic_id, 0, batch_bytes(3), acks=-1))
    yield b
    b.stop()


def _properties(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _scram_config(tmp_path, certs, password: str) -> str:
    return _properties(tmp_path / "admin.properties", (
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs.ca_pem}\n"))


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _bootstrap(broker, listener: str) -> str:
    return f"127.0.0.1:{broker.broker.bound[listener][1]}"


def test_both_tools_over_sasl_ssl_with_scram_sha_512(broker, certs, tmp_path):
    config = _scram_config(tmp_path, certs, "admin-secret")
    sasl = _bootstrap(broker, "SASL_SSL")
    code, out, _ = cli("configs", "--bootstrap-server", sasl, "--command-config", config, "--alter",
                       "--entity-type", "users", "--entity-name", "alice",
                       "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    code, out, _ = cli("configs", "--bootstrap-server", sasl, "--command-config", config, "--describe",
                       "--entity-type", "users", "--entity-name", "alice")
    assert (code, out) == (0, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n")
    code, out, _ = cli("configs", "--bootstrap-server", sasl, "--command-config", config, "--alter",
                       "--entity-type", "topics", "--entity-name", "orders", "--add-config", "retention.ms=60000")
    assert (code, out) == (0, "Completed updating config for topic orders.\n")
    code, out, _ = cli("share-groups", "--bootstrap-server", sasl, "--command-config", config, "--reset-offsets",
                       "--group", "g", "--topic", "orders", "--to-earliest", "--execute")
    assert code == 0 and out.splitlines()[-1].split() == ["g", "orders", "0", "0"]
    code, out, _ = cli("share-groups", "--bootstrap-server", sasl, "--command-config", config, "--list")
    assert (code, out) == (0, "g\n")
    code, out, _ = cli("share-groups", "--bootstrap-server", sasl, "--command-config", config, "--describe",
                       "--group", "g")
    assert code == 0 and out.splitlines()[-1].split() == ["g", "orders", "0", "0", "3"]


def test_a_wrong_password_is_kafkas_authentication_error_and_exit_1(broker, certs, tmp_path):
    config = _scram_config(tmp_path, certs, "not-the-password")
    sasl = _bootstrap(broker, "SASL_SSL")
    code, out, _ = cli("share-groups", "--bootstrap-server", sasl, "--command-config", config, "--list")
    assert (code, out) == (1, "\nError: Executing share group command failed due to "
                              f"org.apache.kafka.common.errors.SaslAuthenticationException: {GENERIC}\n")
    code, out, _ = cli("configs", "--bootstrap-server", sasl, "--command-config", config, "--describe",
                       "--entity-type", "users")
    assert code == 1
    assert out.splitlines() == [
        f"Error while executing config command with args '--bootstrap-server {sasl} --entity-type users "
        f"--command-config {config} --describe'",
        f"org.apache.kafka.common.errors.SaslAuthenticationException: {GENERIC}"]


def test_an_ssl_listener_that_requires_a_client_certificate(broker, certs, tmp_path):
    ssl_bootstrap = _bootstrap(broker, "SSL")
    with_cert = _properties(tmp_path / "ssl.properties", (
        "security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs.ca_pem}\n"
        f"ssl.certificate.location={certs.client_cert_pem}\nssl.key.location={certs.client_key_pem}\n"))
    code, out, _ = cli("share-groups", "--bootstrap-server", ssl_bootstrap, "--command-config", with_cert, "--list")
    assert code == 0  # the certificate's subject is a super user
    without = _properties(tmp_path / "nocert.properties",
                          f"security.protocol=SSL\nssl.ca.location={certs.ca_pem}\n")
    code, out, _ = cli("share-groups", "--bootstrap-server", ssl_bootstrap, "--command-config", without, "--list")
    assert (code, out) == (1, f"\nError: Executing share group command failed due to {ssl_bootstrap}: the broker "
                              "closed the connection right after the TLS handshake (a listener that requires a "
                              "client certificate refuses one without; see ssl.keystore.location in "
                              "--command-config)\n")


@pytest.mark.parametrize("props, words", [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism: GSSAPI is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs username"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "only PEM stores are supported"),
    ({"security.protocol": "HTTPS"}, "security.protocol: 'HTTPS' is not one of"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"},
     "ssl.truststore: cannot load the trusted certificates"),
])
def test_settings_the_tools_refuse_name_the_key(props, words):
    with pytest.raises(ValueError, match=words):
        client_security(props)


def test_librdkafka_style_credentials_and_plaintext_without_a_file():
    s = client_security({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
                         "sasl.username": "u", "sasl.password": "p"})
    assert (s.protocol, s.mechanism, s.username, s.password, s.context) == ("SASL_PLAINTEXT", "PLAIN", "u", "p", None)
    assert client_security({}).protocol == "PLAINTEXT"


def test_a_missing_command_config_file_is_a_clear_error(broker, tmp_path):
    code, out, _ = cli("share-groups", "--bootstrap-server", _bootstrap(broker, "SASL_SSL"),
                       "--command-config", str(tmp_path / "missing.properties"), "--list")
    assert code == 1 and "cannot read --command-config" in out
