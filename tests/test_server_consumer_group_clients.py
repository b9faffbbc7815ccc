"""Real `confluent_kafka.Consumer`s with `group.protocol=consumer` (KIP-848) against `sharegroup serve`.

librdkafka's KIP-848 consumer needs ConsumerGroupHeartbeat (advertised in ApiVersions), FindCoordinator,
Metadata with topic ids (assignments come as topic ids), ListOffsets and Fetch; for the start position
of a partition it asks OffsetFetch, unless the application gives an explicit offset when it assigns.
These tests give one (the beginning, in `on_assign`) and commit nothing (`enable.auto.commit=False`),
so they do not depend on committed offsets.

Ownership is tracked through `on_assign` / `on_revoke` while one thread polls every consumer, so the
callbacks are serialized: a partition assigned while another consumer still holds it fails at once.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.server_harness import RawClient, ServeProcess  # noqa: E402
from tests.share_clients import SERVE_ARGS, WAIT_S, produce, share_consumer  # noqa: E402
from tests.test_server_consumer_group_wire import describe  # noqa: E402

CONSUMER_ARGS = (
    "--override", "group.consumer.min.session.timeout.ms=1000",
    "--override", "group.consumer.session.timeout.ms=6000",
    "--override", "group.consumer.min.heartbeat.interval.ms=100",
    "--override", "group.consumer.heartbeat.interval.ms=200",
)


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("kip848"), *SERVE_ARGS, *CONSUMER_ARGS)
    yield server
    code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def create_topic(serve, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": serve.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(WAIT_S)


class Owners:
    """Who holds which partition, from the consumers' own callbacks; fails on a second owner."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}
        self.events: list[tuple[str, str, list[int]]] = []
        # Recorded, not raised: an exception inside a librdkafka callback must not cut the rebalance short.
        self.violations: list[str] = []

    def consumer(self, serve, name: str, group: str, topic: str, **extra) -> Consumer:
        conf = {"bootstrap.servers": serve.bootstrap, "group.id": group, "group.protocol": "consumer",
                "enable.auto.commit": False, "client.id": name}
        conf.update(extra)
        consumer = Consumer(conf)

        def on_assign(c, partitions):
            for p in partitions:
                if p.partition in self.owner:
                    self.violations.append(f"{name} got {p.partition}, still owned by {self.owner[p.partition]}")
                self.owner[p.partition] = name
            self.events.append((name, "assign", sorted(p.partition for p in partitions)))
            c.incremental_assign([TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) for p in partitions])

        def on_revoke(c, partitions):
            for p in partitions:
                if self.owner.get(p.partition) == name:
                    del self.owner[p.partition]
                else:
                    self.violations.append(f"{name} revoked {p.partition}, owned by {self.owner.get(p.partition)}")
            self.events.append((name, "revoke", sorted(p.partition for p in partitions)))

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        return consumer

    def held_by(self, name: str) -> list[int]:
        return sorted(p for p, n in self.owner.items() if n == name)


def poll_until(owners: Owners, consumers: dict[str, Consumer], done) -> None:
    """Poll the consumers in turn until `done()`; fails at once on an ownership violation, and after
    WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert not owners.violations, owners.violations
        assert time.monotonic() < deadline, f"timed out; events {owners.events}"
        for consumer in consumers.values():
            consumer.poll(0.05)
    assert not owners.violations, owners.violations


def test_three_consumers_split_partitions_and_a_leaver_hands_over_without_double_ownership(serve):
    create_topic(serve, "split", 6)
    produce(serve.bootstrap, "split", [(b"k%d" % i, b"v", None) for i in range(30)])
    owners = Owners()
    consumers = {"c1": owners.consumer(serve, "c1", "g-split", "split")}
    try:
        poll_until(owners, consumers, lambda: owners.held_by("c1") == list(range(6)))
        # c2 and c3 join while c1 is not polled, so c1 cannot run its revocation callback: the
        # coordinator must hold their partitions back (c1 keeps reporting them owned).
        consumers.update({n: owners.consumer(serve, n, "g-split", "split") for n in ("c2", "c3")})
        others = {n: consumers[n] for n in ("c2", "c3")}
        poll_until(owners, others, lambda: waiting_to_revoke(serve, "g-split", "c1", holding=6))
        assert owners.held_by("c2") == owners.held_by("c3") == []
        poll_until(owners, consumers, lambda: sorted(len(owners.held_by(n)) for n in consumers) == [2, 2, 2])
        leaver = owners.held_by("c1")
        consumers.pop("c1").close()  # revokes everything, then leaves with epoch -1
        assert owners.held_by("c1") == []
        poll_until(owners, consumers, lambda: sorted(owners.owner) == list(range(6)))
        assert sorted(len(owners.held_by(n)) for n in consumers) == [3, 3]
        assert all(owners.owner[p] != "c1" for p in leaver)
        assert sorted(member_clients(serve, "g-split")) == ["c2", "c3"]
    finally:
        for consumer in consumers.values():
            consumer.close()


def waiting_to_revoke(serve, group_id: str, client_id: str, holding: int) -> bool:
    """Whether the coordinator has told `client_id` (which holds `holding` partitions) to revoke some
    and waits for it: its assignment is smaller than what it holds, at an epoch behind the group's."""
    client = RawClient(serve.port)
    try:
        (group,) = describe(client, group_id).groups
    finally:
        client.close()
    for m in group.members:
        if m.client_id == client_id:
            assigned = sum(len(tp.partitions) for tp in m.assignment.topic_partitions)
            return m.member_epoch < group.assignment_epoch and assigned < holding
    return False


def member_clients(serve, group_id: str) -> list[str]:
    client = RawClient(serve.port)
    try:
        return [m.client_id for m in describe(client, group_id).groups[0].members]
    finally:
        client.close()


def test_static_member_restarted_within_the_session_gets_its_partitions_back(serve):
    create_topic(serve, "static", 4)
    owners = Owners()
    consumers = {n: owners.consumer(serve, n, "g-static", "static", **{"group.instance.id": n})
                 for n in ("s1", "s2")}
    try:
        poll_until(owners, consumers, lambda: sorted(len(owners.held_by(n)) for n in consumers) == [2, 2])
        client = RawClient(serve.port)
        epoch_before = describe(client, "g-static").groups[0].group_epoch
        s1_partitions, s2_events = owners.held_by("s1"), [e for e in owners.events if e[0] == "s2"]
        consumers.pop("s1").close()  # a static member leaves with epoch -2: it keeps its place
        assert owners.held_by("s1") == []
        consumers["s1"] = owners.consumer(serve, "s1", "g-static", "static", **{"group.instance.id": "s1"})
        poll_until(owners, consumers, lambda: owners.held_by("s1") == s1_partitions)
        (group,) = describe(client, "g-static").groups
        client.close()
        assert group.group_epoch == epoch_before  # no rebalance
        assert [e for e in owners.events if e[0] == "s2"] == s2_events  # s2 never saw a change
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_share_group_and_consumer_group_read_the_same_topic_independently(serve):
    create_topic(serve, "both", 2)
    produce(serve.bootstrap, "both", [(b"k%d" % i, b"v%d" % i, None) for i in range(20)])
    owners = Owners()
    consumer = owners.consumer(serve, "c", "g-both", "both")
    share = share_consumer(serve.bootstrap, "sg-both", "both")
    read: list[tuple[int, int]] = []
    shared: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(shared) < 20 or len(read) < 20:
            assert time.monotonic() < deadline, (len(shared), len(read))
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read.append((message.partition(), message.offset()))
            shared += [(m.partition(), m.offset()) for m in share.poll(0.1) if m.error() is None]
        # Each group got every record once: neither took anything from the other.
        assert sorted(read) == sorted(shared) and len(set(read)) == 20
        client = RawClient(serve.port)
        assert describe(client, "g-both").groups[0].group_state == "Stable"
        client.close()
    finally:
        share.close()
        consumer.close()
