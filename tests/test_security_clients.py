"""Real `confluent_kafka` clients against a secured `sharegroup serve` (one broker for the module):
a SASL_SSL listener with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and a PLAINTEXT listener.

Covered: a produce -> share-consume round trip per mechanism over TLS, a wrong password, a plaintext
client on the TLS port, the listener lines and what Metadata advertises per listener, SCRAM
credentials managed at run time (AdminClient and `sharegroup configs --entity-type users`) surviving
SIGKILL + restart, and a data directory that holds no password.
"""

from __future__ import annotations

import signal
import time

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security_harness import (  # noqa: E402
    PASSWORDS,
    Certificates,
    client_config,
    metadata,
    secured_serve_args,
)
from tests.server_harness import RawClient, ServeProcess, run_cli  # noqa: E402
from tests.share_clients import WAIT_S, poll_until  # noqa: E402

pytest.importorskip("sharegroup.topics.topic_store", reason="the durable topic store is not in this tree yet")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates.make(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    data = tmp_path_factory.mktemp("secure-serve") / "data"
    server = ServeProcess(data, *secured_serve_args(certs, "--group-config", "share.auto.offset.reset=earliest"))
    server.data = data
    server.args_extra = secured_serve_args(certs, "--group-config", "share.auto.offset.reset=earliest")
    yield server
    server.kill()


def _ports(server) -> dict[str, int]:
    return {line.split()[3]: int(line.rsplit(":", 1)[1]) for line in server.listener_lines}


def _produce(config: dict, topic: str, values: list[bytes]) -> None:
    errors: list = []
    producer = Producer({**config, "linger.ms": 5, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(WAIT_S) == 0 and not errors, errors


def _share_consume(config: dict, group: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({**config, "group.id": group, "fetch.wait.max.ms": 200})
    consumer.subscribe([topic])
    try:
        return sorted(m.value() for m in poll_until(consumer, lambda got: len(got) >= count))
    finally:
        consumer.close()


def test_listener_lines_name_each_listener_and_the_readiness_line_names_the_first(broker):
    ports = _ports(broker)
    assert [line.split()[3:5] for line in broker.listener_lines] == [
        ["SASL_SSL", "(SASL_SSL)"], ["PLAINTEXT", "(PLAINTEXT)"], ["SSL", "(SSL)"]]
    assert broker.port == ports["SASL_SSL"] != ports["PLAINTEXT"]
    assert broker.line.startswith(f"sharegroup serve: listening on 127.0.0.1:{ports['SASL_SSL']} ")


def test_metadata_advertises_the_listener_the_request_came_in_on(broker):
    client = RawClient(_ports(broker)["PLAINTEXT"])
    try:
        brokers = metadata(client, []).brokers
    finally:
        client.close()
    assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", _ports(broker)["PLAINTEXT"])]


@pytest.mark.parametrize("mechanism, user", [("PLAIN", "carol"), ("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "bob")])
def test_produce_and_share_consume_over_sasl_ssl(broker, certs, mechanism, user):
    config = client_config(certs, broker.bootstrap, mechanism, user, PASSWORDS[user])
    topic = f"secure-{mechanism.lower()}"
    values = [b"%s-%d" % (mechanism.encode(), i) for i in range(20)]
    _produce(config, topic, values)
    assert _share_consume(config, f"group-{mechanism.lower()}", topic, len(values)) == sorted(values)


def _first_error(config: dict) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "socket.timeout.ms": 5000})
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no client error within the wait"
    return errors[0]


def test_a_wrong_password_is_refused_with_kafkas_message(broker, certs):
    error = _first_error(client_config(certs, broker.bootstrap, "SCRAM-SHA-512", "bob", "not-the-password"))
    assert error.code() == KafkaError._AUTHENTICATION
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512") in error.str()


def test_a_wrong_plain_password_gets_the_plain_message(broker, certs):
    error = _first_error(client_config(certs, broker.bootstrap, "PLAIN", "carol", "wrong"))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in error.str()


def test_a_plaintext_client_on_the_tls_port_gets_a_transport_error_and_no_data(broker):
    error = _first_error({"bootstrap.servers": broker.bootstrap})
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._SSL)


def _ssl_config(broker, certs, with_certificate: bool) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{_ports(broker)['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(certs.ca_pem)}
    if with_certificate:
        config.update({"ssl.certificate.location": str(certs.client_cert_pem),
                       "ssl.key.location": str(certs.client_key_pem)})
    return config


def test_an_ssl_client_with_a_certificate_is_served_where_one_is_required(broker, certs):
    config = _ssl_config(broker, certs, with_certificate=True)
    _produce(config, "secure-ssl", [b"a", b"b"])
    assert _share_consume(config, "group-ssl", "secure-ssl", 2) == [b"a", b"b"]


def test_an_ssl_client_without_a_certificate_is_refused_where_one_is_required(broker, certs):
    error = _first_error(_ssl_config(broker, certs, with_certificate=False))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error


def test_credentials_altered_at_run_time_survive_sigkill_and_the_data_dir_holds_no_password(broker, certs):
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{_ports(broker)['PLAINTEXT']}"})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-secret-password")])
    for future in futures.values():
        future.result(WAIT_S)
    # and with the tool, like kafka-configs.sh
    plaintext = f"127.0.0.1:{_ports(broker)['PLAINTEXT']}"
    done = run_cli("configs", "--bootstrap-server", plaintext, "--alter", "--entity-type", "users",
                   "--entity-name", "erin", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-secret-pw]")
    assert done.returncode == 0 and "Completed updating config for user erin." in done.stdout, done.stdout + done.stderr
    described = run_cli("configs", "--bootstrap-server", plaintext, "--describe", "--entity-type", "users")
    assert described.stdout.splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192",
        "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=4096",
        "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=8192",
    ], described.stdout + described.stderr

    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(WAIT_S)
    files = [p for p in broker.data.rglob("*") if p.is_file()]
    assert any(p.parent.name == "security" for p in files)
    for path in files:
        content = path.read_bytes()
        for secret in (b"dave-secret-password", b"erin-secret-pw", *(p.encode() for p in PASSWORDS.values())):
            assert secret not in content, (path, secret)
    restarted = ServeProcess(broker.data, *broker.args_extra)
    try:
        for mechanism, user, password in [("SCRAM-SHA-256", "dave", "dave-secret-password"),
                                          ("SCRAM-SHA-512", "erin", "erin-secret-pw")]:
            config = client_config(certs, restarted.bootstrap, mechanism, user, password)
            _produce(config, f"after-restart-{user}", [b"x"])
    finally:
        restarted.kill()
