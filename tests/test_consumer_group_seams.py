"""Where KIP-848 consumer groups meet the rest of the broker: offset retention deleting an empty group,
topic deletion and partition growth reaching the target assignment, a restart in the middle of a
reconciliation, and the group-level admin answers (DeleteGroups, ListGroups filters)."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import Errors, ShareError
from sharegroup.coordinator import GroupCoordinator, MemoryRecordSink
from sharegroup.coordinator.classic.config import ClassicGroupConfig
from sharegroup.coordinator.classic.records import GroupMetadataKey
from sharegroup.coordinator.offsets import CommitRequest
from sharegroup.server.codec import build, request_class
from tests.classic_env import G as CLASSIC_G
from tests.classic_env import ClassicEnv
from tests.consumer_group_env import G, T1, T2, ConsumerEnv


def run(coro):
    return asyncio.run(coro)


def env(**topics) -> ConsumerEnv:
    e = ConsumerEnv(**topics)
    e.gc = GroupCoordinator(persister=e.gc._lifecycle.persister, topics=e.topics, clock=e.clock, record_sink=e.sink,
                            classic_config=ClassicGroupConfig(offsets_retention_minutes=1))
    return run(e.start())


def restarted(e: ConsumerEnv) -> GroupCoordinator:
    gc = GroupCoordinator(persister=e.gc._lifecycle.persister, topics=e.topics, clock=e.clock, record_sink=e.sink,
                          classic_config=ClassicGroupConfig(offsets_retention_minutes=1))
    run(gc.load())
    gc._check(replay=True)
    return gc


def test_an_empty_consumer_group_without_offsets_is_deleted_by_the_retention_pass():
    e = env()
    run(e.join("m1"))
    run(e.gc.expire_offsets())
    assert e.gc.group_types() == {G: "consumer"}  # it has a member
    run(e.hb("m1", -1))
    assert e.gc.list_groups() and e.gc.list_groups()[0].state == "Empty"
    run(e.gc.expire_offsets())
    assert e.gc.group_types() == {}
    assert restarted(e).group_types() == {}  # tombstoned, not only forgotten


def test_an_empty_consumer_group_keeps_living_while_it_holds_offsets():
    e = env()
    r = run(e.join("m1"))
    run(e.gc.offset_commit(G, r.member_epoch, "m1", [CommitRequest("t1", 0, 7)]))
    run(e.hb("m1", -1))
    e.clock.advance(60_000 - 1)
    assert run(e.gc.expire_offsets()) == 0
    assert e.gc.group_types() == {G: "consumer"}
    e.clock.advance(1)
    assert run(e.gc.expire_offsets()) == 1
    assert e.gc.group_types() == {}


def test_topic_deletion_and_partition_growth_reach_the_target_assignment():
    e = env(t1=2, t2=2)
    r = run(e.join("m1", topics=("t1", "t2")))
    assert r.assignment == {T1: [0, 1], T2: [0, 1]}
    run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1], T2: [0, 1]}))
    e.topics.set_partitions("t1", 3)
    r = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1], T2: [0, 1]}))
    assert (r.member_epoch, r.assignment) == (2, {T1: [0, 1, 2], T2: [0, 1]})
    e.topics.delete_topic("t2")
    r = run(e.hb("m1", 2, owned_topic_partitions={T1: [0, 1, 2], T2: [0, 1]}))
    assert (r.member_epoch, r.assignment) == (2, {T1: [0, 1, 2]})  # revoke t2 first
    r = run(e.hb("m1", 2, owned_topic_partitions={T1: [0, 1, 2]}))
    assert (r.member_epoch, r.assignment) == (3, None)
    e.gc._check(replay=True)


def test_a_restart_in_the_middle_of_a_reconciliation_hands_over_without_double_ownership():
    e = env(t1=4)
    run(e.join("m1"))
    run(e.join("m2"))
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3]}))
    assert r1.assignment == {T1: [0, 1]}  # m1 must give up 2 and 3 before m2 gets them
    assert run(e.hb("m2", 2, owned_topic_partitions={})).assignment is None
    e.gc = restarted(e)
    # m2 still waits after the restart; m1 is told its assignment again, revokes, then m2 gets 2 and 3.
    assert run(e.hb("m2", 2, owned_topic_partitions={})).assignment in (None, {})
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1, 2, 3]}))
    assert (r1.member_epoch, r1.assignment) == (1, {T1: [0, 1]})
    r1 = run(e.hb("m1", 1, owned_topic_partitions={T1: [0, 1]}))
    assert r1.member_epoch == 2
    r2 = run(e.hb("m2", 2, owned_topic_partitions={}))
    assert (r2.member_epoch, r2.assignment) == (2, {T1: [2, 3]})
    assert {m.member_id: m.assignment for m in e.gc.consumer_group_describe(G).members} == {
        "m1": {T1: [0, 1]}, "m2": {T1: [2, 3]}}


def test_delete_groups_and_list_groups_filters_with_consumer_group_states():
    e = env(t1=4)
    run(e.join("m1"))
    run(e.join("m2"))
    assert [g.group_id for g in e.gc.list_groups(states=["reconciling"])] == [G]
    assert [g.group_id for g in e.gc.list_groups(states=["Stable"], types=["consumer"])] == []
    assert [g.group_id for g in e.gc.list_groups(types=["classic"])] == []
    try:
        run(e.gc.delete_group(G))
        raise AssertionError("deleted a group with members")
    except Exception as exc:  # noqa: BLE001 - checked exactly below
        assert getattr(exc, "error", None) == 68  # GROUP_NOT_EMPTY
    assert e.gc.group_types() == {G: "consumer"}


def test_a_broker_restart_mid_reconciliation_keeps_the_pending_revocation(tmp_path):
    """Over the wire with the broker's own record files: m1 must still revoke after a restart, and m2
    gets the partitions only once m1 did."""
    from tests.server_harness import BrokerThread, RawClient
    from tests.test_server_consumer_group_wire import OVERRIDES, heartbeat

    def owned(topic_id, *partitions):
        return [{"topic_id": topic_id, "partitions": list(partitions)}]

    broker = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    try:
        broker.call(broker.store.create_topic("t", 4))
        topic_id = broker.store.topic_by_name("t").topic_id
        client = RawClient(broker.broker.port)
        assert heartbeat(client, "m1", 0, ["t"]).member_epoch == 1
        assert heartbeat(client, "m2", 0, ["t"]).member_epoch == 2
        r1 = heartbeat(client, "m1", 1, topic_partitions=owned(topic_id, 0, 1, 2, 3))
        assert [list(tp.partitions) for tp in r1.assignment.topic_partitions] == [[0, 1]]
        client.close()
    finally:
        broker.stop()
    broker = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    try:
        client = RawClient(broker.broker.port)
        r2 = heartbeat(client, "m2", 2, topic_partitions=[])
        assert (r2.error_code, r2.member_epoch) == (0, 2)
        assert r2.assignment is None or list(r2.assignment.topic_partitions) == []
        r1 = heartbeat(client, "m1", 1, topic_partitions=owned(topic_id, 0, 1))
        assert (r1.error_code, r1.member_epoch) == (0, 2)
        r2 = heartbeat(client, "m2", 2, topic_partitions=[])
        assert [(tp.topic_id, list(tp.partitions)) for tp in r2.assignment.topic_partitions] == [(topic_id, [2, 3])]
        client.close()
    finally:
        broker.stop()


def test_consumer_group_describe_leaves_out_a_deleted_topic_before_the_members_heard_of_it(tmp_path):
    from tests.server_harness import BrokerThread, RawClient
    from tests.test_server_consumer_group_wire import OVERRIDES, describe, heartbeat

    broker = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    try:
        for name in ("keep", "gone"):
            broker.call(broker.store.create_topic(name, 1))
        keep = broker.store.topic_by_name("keep").topic_id
        client = RawClient(broker.broker.port)
        assert heartbeat(client, "m1", 0, ["keep", "gone"]).error_code == 0
        assert client.request(20, 4, build(request_class(20, 4), {"topic_names": ["gone"], "timeout": 5000})
                              ).responses[0].error_code == 0
        (member,) = describe(client, "g").groups[0].members
        for assignment in (member.assignment, member.target_assignment):
            assert [(tp.topic_id, tp.topic_name, list(tp.partitions)) for tp in assignment.topic_partitions] == [
                (keep, "keep", [0])]
        client.close()
    finally:
        broker.stop()


# -- classic groups meeting ConsumerGroupHeartbeat / ConsumerGroupDescribe (Kafka's GroupMetadataManager) --


def _classic_env() -> ClassicEnv:
    return run(ClassicEnv().start())


def _consumer_join(gc, member_id="m-new", epoch=0):
    return gc.consumer_group_heartbeat(CLASSIC_G, member_id, epoch, rebalance_timeout_ms=5000,
                                       subscribed_topic_names=["t"] if epoch == 0 else None,
                                       owned_topic_partitions={} if epoch == 0 else None)


def _refused(coro) -> tuple[Errors, str]:
    with pytest.raises(ShareError) as info:
        run(coro)
    return info.value.error, info.value.message


NOT_A_CONSUMER_GROUP = (Errors.GROUP_ID_NOT_FOUND, f"Group {CLASSIC_G} is not a consumer group.")


def test_a_consumer_group_heartbeat_to_a_classic_group_of_another_protocol_type_is_group_id_not_found():
    async def connect_group(e):
        task = e.join("", protocol_type="connect", require_known=False)
        await e.finish_join(task)
        assert task.result().error is Errors.NONE
    e = _classic_env()
    run(connect_group(e))
    state = e.state()
    for epoch in (0, 1, -1):
        assert _refused(_consumer_join(e.gc, epoch=epoch)) == NOT_A_CONSUMER_GROUP
    assert (len(e.sink), e.gc.group_type(CLASSIC_G), e.state()) == (0, "classic", state)
    # A classic group of the consumer protocol with members is not converted either (no online upgrade).
    e = _classic_env()
    run(e.stable_group(1))
    assert _refused(_consumer_join(e.gc)) == NOT_A_CONSUMER_GROUP
    assert e.gc.group_type(CLASSIC_G) == "classic"
    e.gc._check(replay=True)


def test_consumer_group_describe_of_a_classic_group_is_group_id_not_found_not_a_consumer_group():
    e = _classic_env()
    run(e.stable_group(1))
    with pytest.raises(ShareError) as info:
        e.gc.consumer_group_describe(CLASSIC_G)
    assert (info.value.error, info.value.message) == NOT_A_CONSUMER_GROUP


def test_a_joining_consumer_takes_the_id_of_an_empty_classic_group_and_its_offsets():
    """Kafka's maybeDeleteEmptyClassicGroup: a ConsumerGroupHeartbeat join on an Empty classic group
    writes the classic group's tombstone with the new group's records; committed offsets stay. A
    restart replays it, also when compaction dropped the tombstone (the offsets come first then)."""
    async def empty_classic_group_with_offsets(e):
        generation, members = await e.stable_group(1)
        committed = await e.gc.offset_commit(CLASSIC_G, generation, members[0], [CommitRequest("t", 0, 42)])
        assert committed == {("t", 0): Errors.NONE}
        await e.gc.leave_group(CLASSIC_G, [(members[0], None)])
        await e.settle()
        assert e.state() == "Empty"
    e = _classic_env()
    run(empty_classic_group_with_offsets(e))
    joined = run(_consumer_join(e.gc))
    assert joined.member_epoch == 1 and e.gc.group_type(CLASSIC_G) == "consumer"
    assert [g.group_type for g in e.gc.list_groups()] == ["consumer"]
    assert run(e.gc.offset_fetch(CLASSIC_G, [("t", 0)]))[("t", 0)].offset == 42
    e.gc._check(replay=True)

    def reloaded(records):
        sink = MemoryRecordSink()
        run(sink.append(records))
        gc = GroupCoordinator(persister=e.gc._lifecycle.persister, topics=e.topics, clock=e.clock,
                              record_sink=sink, classic_config=e.config)
        run(gc.load())
        gc._check(replay=True)
        assert [(g.group_id, g.group_type) for g in gc.list_groups()] == [(CLASSIC_G, "consumer")]
        assert run(gc.offset_fetch(CLASSIC_G, [("t", 0)]))[("t", 0)].offset == 42
    reloaded(e.sink.read_all())
    reloaded([r for r in e.sink.read_all() if not isinstance(r.key, GroupMetadataKey)])  # compacted
