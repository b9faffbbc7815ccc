"""Real `confluent_kafka.Consumer`s with `group.protocol=classic` against the broker: partitions split
across members and moved without ever being owned twice, committed offsets across a SIGKILL, a static
member's restart without a rebalance, and a share group beside a consumer group on one topic.

Every wait is bounded and ends as soon as what it waits for happened."""

from __future__ import annotations

import signal
import time
from typing import Any, Callable

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.server_harness import BrokerThread, ServeProcess  # noqa: E402
from tests.share_clients import SERVE_ARGS, WAIT_S, produce, share_consumer  # noqa: E402

OVERRIDES = {"group.initial.rebalance.delay.ms": "300", "group.min.session.timeout.ms": "1000"}


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides=OVERRIDES, group_configs={"share.auto.offset.reset": "earliest"})
    try:
        yield b
    finally:
        b.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(WAIT_S)


class Member:
    """A classic consumer that records what it was assigned and revoked, in a shared ownership map."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, owners: dict[int, str] | None = None,
                 **config: Any) -> None:
        self.name = name
        self.owners = owners if owners is not None else {}
        self.assigned: set[int] = set()
        self.assigns = self.revokes = 0
        self.violations: list[str] = []
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
                "enable.auto.commit": False}
        conf.update(config)
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.messages: list[Any] = []

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.assigns += 1
        for p in partitions:
            owner = self.owners.get(p.partition)
            if owner is not None and owner != self.name:
                self.violations.append(f"{self.name} got {p.partition} while {owner} owns it")
            self.owners[p.partition] = self.name
            self.assigned.add(p.partition)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.revokes += 1
        for p in partitions:
            if self.owners.get(p.partition) == self.name:
                del self.owners[p.partition]
            self.assigned.discard(p.partition)

    def poll(self, timeout_s: float = 0.05) -> None:
        message = self.consumer.poll(timeout_s)
        if message is not None and message.error() is None:
            self.messages.append(message)

    def close(self) -> None:
        self.consumer.close()


def poll_all_until(members: list[Member], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll()


def test_three_consumers_split_the_partitions_and_a_leaver_hands_over_without_double_ownership(broker):
    create_topic(broker.bootstrap, "orders", 6)
    owners: dict[int, str] = {}
    members = [Member(broker.bootstrap, "cg", "orders", f"m{i}", owners) for i in range(3)]
    try:
        poll_all_until(members, lambda: sorted(owners) == list(range(6)) and all(len(m.assigned) == 2 for m in members),
                       "three members with two partitions each")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        result = admin.list_consumer_groups(request_timeout=WAIT_S).result(WAIT_S)
        listed = {g.group_id: g for g in result.valid}
        assert not result.errors, result.errors
        assert (listed["cg"].state.name, listed["cg"].type.name, listed["cg"].is_simple_consumer_group) == (
            "STABLE", "CLASSIC", False)
        leaver = members.pop()
        handed_over = set(leaver.assigned)
        counts = [(m.assigns, m.revokes) for m in members]
        leaver.close()  # a dynamic member leaves with LeaveGroup
        poll_all_until(members, lambda: sorted(owners) == list(range(6)) and all(len(m.assigned) == 3 for m in members),
                       "the two members left with three partitions each")
        assert handed_over <= set(owners) and leaver.name not in owners.values()
        assert all(m.violations == [] for m in members + [leaver]), [m.violations for m in members + [leaver]]
        # One rebalance: each remaining member revoked once (eager protocol) and was assigned once.
        assert [(m.assigns, m.revokes) for m in members] == [(a + 1, r + 1) for a, r in counts]
    finally:
        for member in members:
            member.close()


def test_a_static_member_restarted_within_its_session_timeout_causes_no_rebalance(broker):
    create_topic(broker.bootstrap, "events", 4)
    owners: dict[int, str] = {}
    a = Member(broker.bootstrap, "static", "events", "a", owners, **{"group.instance.id": "instance-a"})
    b = Member(broker.bootstrap, "static", "events", "b", owners, **{"group.instance.id": "instance-b",
                                                                       "session.timeout.ms": 10_000})
    try:
        poll_all_until([a, b], lambda: len(a.assigned) == 2 and len(b.assigned) == 2, "a stable static group")
        a_assigns, a_revokes, b_partitions = a.assigns, a.revokes, set(b.assigned)
        b.close()  # a static member does not send LeaveGroup: its place is kept for its session timeout
        for p in b_partitions:
            owners.pop(p, None)
        b2 = Member(broker.bootstrap, "static", "events", "b2", owners, **{"group.instance.id": "instance-b",
                                                                            "session.timeout.ms": 10_000})
        poll_all_until([a, b2], lambda: b2.assigned == b_partitions, "the restarted member taking its partitions back")
        for _ in range(20):  # a little longer: a rebalance would show up in a's callbacks
            a.poll()
            b2.poll()
        assert (a.assigns, a.revokes) == (a_assigns, a_revokes)
        assert a.violations == [] and b2.violations == []
        b2.close()
    finally:
        a.close()


def test_a_share_group_and_a_consumer_group_read_the_same_topic_independently(broker):
    create_topic(broker.bootstrap, "shared", 2)
    produce(broker.bootstrap, "shared", [(b"k%d" % i, b"v%d" % i, None) for i in range(20)])
    classic = Member(broker.bootstrap, "classic-group", "shared", "c")
    share = share_consumer(broker.bootstrap, "share-group", "shared")
    shared_values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(classic.messages) < 20 or len(shared_values) < 20:
            assert time.monotonic() < deadline, (len(classic.messages), len(shared_values))
            classic.poll()
            for message in share.poll(0.1):
                assert message.error() is None, message.error()
                shared_values.append(message.value())
        assert sorted(m.value() for m in classic.messages) == sorted(b"v%d" % i for i in range(20))
        assert sorted(shared_values) == sorted(b"v%d" % i for i in range(20))
        types = {g.group_id: g.group_type for g in broker.share.coordinator.list_groups()}
        assert types == {"classic-group": "classic", "share-group": "share"}
    finally:
        classic.close()
        share.close()


def test_committed_offsets_survive_a_sigkill_and_the_restarted_consumer_resumes_there(tmp_path):
    args = [*SERVE_ARGS, *(x for k, v in OVERRIDES.items() for x in ("--override", f"{k}={v}"))]
    server = ServeProcess(tmp_path, *args)
    try:
        create_topic(server.bootstrap, "ledger", 1)
        produce(server.bootstrap, "ledger", [(None, b"v%d" % i, None) for i in range(20)])
        first = Member(server.bootstrap, "resume", "ledger", "first")
        poll_all_until([first], lambda: len(first.messages) >= 12, "twelve records")
        first.consumer.commit(offsets=[TopicPartition("ledger", 0, 12)], asynchronous=False)
        first.consumer.close()
    finally:
        server.terminate(signal.SIGKILL)
    server = ServeProcess(tmp_path, *args)
    try:
        second = Member(server.bootstrap, "resume", "ledger", "second")
        poll_all_until([second], lambda: len(second.messages) >= 8, "the rest of the records")
        assert [m.offset() for m in second.messages] == list(range(12, 20))
        committed = second.consumer.committed([TopicPartition("ledger", 0)], timeout=WAIT_S)
        assert committed[0].offset == 12
        second.close()
    finally:
        server.terminate()


def test_admin_client_describes_lists_alters_and_deletes_consumer_groups(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions

    create_topic(broker.bootstrap, "admin-t", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    member = Member(broker.bootstrap, "described", "admin-t", "m")
    try:
        poll_all_until([member], lambda: len(member.assigned) == 2, "an assignment")
        described = admin.describe_consumer_groups(["described"], request_timeout=WAIT_S)["described"].result(WAIT_S)
        assert (described.group_id, described.state.name, described.partition_assignor) == ("described", "STABLE", "range")
        assert [sorted(p.partition for p in m.assignment.topic_partitions) for m in described.members] == [[0, 1]]
    finally:
        member.close()
    # An admin commit (generation -1) on a new group id creates a simple group.
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "admin-only", [TopicPartition("admin-t", 0, 5), TopicPartition("admin-t", 1, 9)])])["admin-only"].result(WAIT_S)
    assert sorted((p.partition, p.offset, p.error) for p in altered.topic_partitions) == [(0, 5, None), (1, 9, None)]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-only")])["admin-only"].result(WAIT_S)
    assert sorted((p.topic, p.partition, p.offset) for p in listed.topic_partitions) == [("admin-t", 0, 5), ("admin-t", 1, 9)]
    groups = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=WAIT_S).result(WAIT_S).valid}
    assert groups["admin-only"].is_simple_consumer_group and groups["described"].state.name == "EMPTY"
    deletions = admin.delete_consumer_groups(["admin-only", "described"], request_timeout=WAIT_S)
    assert [deletions[g].result(WAIT_S) for g in ("admin-only", "described")] == [None, None]
    assert broker.share.coordinator.list_groups() == []
