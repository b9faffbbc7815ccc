"""The secured broker end to end: TLS + SASL (SCRAM-SHA-512) + ACLs together, with real clients.

`bob` authenticates with SCRAM-SHA-512 over TLS. His ACLs allow READ on group `orders-app` and READ on
topic `orders`, nothing else. His ShareConsumer consumes every record of `orders` in `orders-app`; the
same principal is refused another group (GROUP_AUTHORIZATION_FAILED) and another topic
(TOPIC_AUTHORIZATION_FAILED), and Metadata answers the same for a topic he may not see whether or not it
exists. The ACLs are created by `admin`, a super user who logs in with PLAIN, through AdminClient.
"""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.security_harness import (  # noqa: E402
    PASSWORDS,
    Certificates,
    TlsRawClient,
    client_config,
    metadata,
    scram_login,
    secured_serve_args,
)
from tests.server_harness import ServeProcess  # noqa: E402
from tests.share_clients import WAIT_S, consume_or_refusal  # noqa: E402

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BOB = "User:bob"
TIMINGS = ("--override", "group.share.min.session.timeout.ms=1000", "--override", "group.share.session.timeout.ms=5000",
           "--override", "group.share.min.heartbeat.interval.ms=100", "--override", "group.share.heartbeat.interval.ms=250")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates.make(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory, certs):
    """A broker with TLS, SASL and ACLs; `admin` (super user) has made two topics with 5 records each and
    given bob READ on group orders-app and topic orders."""
    data = tmp_path_factory.mktemp("acceptance") / "data"
    server = ServeProcess(data, *secured_serve_args(
        certs, "--override", f"authorizer.class.name={STANDARD}", "--override", "super.users=User:admin",
        "--group-config", "share.auto.offset.reset=earliest", *TIMINGS))
    try:
        admin_config = client_config(certs, server.bootstrap, "PLAIN", "admin", "admin-secret")
        admin = AdminClient(admin_config)
        for future in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("payments", 1, 1)]).values():
            future.result(WAIT_S)
        for future in admin.create_acls([
            AclBinding(ResourceType.GROUP, "orders-app", ResourcePatternType.LITERAL, BOB, "*", AclOperation.READ,
                       AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, BOB, "*", AclOperation.READ,
                       AclPermissionType.ALLOW),
        ], request_timeout=WAIT_S).values():
            assert future.result() is None
        producer = Producer({**admin_config, "enable.idempotence": True, "linger.ms": 5})
        for topic in ("orders", "payments"):
            for i in range(5):
                producer.produce(topic, value=b"%s-%d" % (topic.encode(), i))
        assert producer.flush(WAIT_S) == 0
        yield server, certs
    finally:
        server.kill()


def _consume(server: ServeProcess, certs: Certificates, group: str, topic: str, count: int) -> tuple[list[bytes], int | None]:
    """bob's ShareConsumer: (values received, the error code that stopped it or None)."""
    config = client_config(certs, server.bootstrap, "SCRAM-SHA-512", "bob", PASSWORDS["bob"])
    return consume_or_refusal(config, group, topic, count)


def test_scram_sha_512_over_tls_consumes_its_groups_topic(secured):
    server, certs = secured
    assert _consume(server, certs, "orders-app", "orders", 5) == ([b"orders-%d" % i for i in range(5)], None)


def test_the_same_principal_is_refused_another_group(secured):
    server, certs = secured
    assert _consume(server, certs, "billing-app", "orders", 1) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)


def test_the_same_principal_is_refused_another_topic(secured):
    server, certs = secured
    assert _consume(server, certs, "orders-app", "payments", 1) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_metadata_does_not_reveal_whether_an_unauthorized_topic_exists(secured):
    server, certs = secured
    client = TlsRawClient(server.port, certs.client_context())
    try:
        assert scram_login(client, "SCRAM-SHA-512", "bob", PASSWORDS["bob"]).error_code == 0
        topics = metadata(client, ["orders", "payments", "no-such-topic"]).topics
    finally:
        client.close()
    answers = {t.name: (t.error_code, t.topic_id.int if t.topic_id else 0) for t in topics}  # kio: zero id is None
    assert answers["orders"][0] == 0 and answers["orders"][1] != 0
    assert answers["payments"] == answers["no-such-topic"] == (29, 0)
