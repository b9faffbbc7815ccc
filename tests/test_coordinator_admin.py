"""Share-partition state through the Persister: two-stage initialization (state epoch = group epoch,
start offset -1 / 0 / altered), retries, two-stage deletion, and the admin APIs (describe group,
describe offsets with lag, alter offsets, delete offsets, delete group) with their error codes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError, StateBatch
from sharegroup.coordinator import (
    PERSISTER_ATTEMPTS,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    InMemoryTopics,
    MemoryRecordSink,
    OffsetInfo,
    TopicInfo,
)
from sharegroup.coordinator.share.records import (
    ShareGroupMetadataKey,
    ShareGroupStatePartitionMetadataKey,
    TopicMetadata,
)

A = uuid.UUID(int=0xA1)
B = uuid.UUID(int=0xB2)
UNKNOWN = uuid.UUID(int=0xFF)
G = "group-1"
M1, M2 = "member-1", "member-2"


def run(coro):
    return asyncio.run(coro)


class CrashingSink(MemoryRecordSink):
    """A sink whose next append fails when one of its records matches `crash_when`."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_when = None

    async def append(self, records):
        if self.crash_when is not None and any(self.crash_when(r) for r in records):
            self.crash_when = None
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, "crash")
        await super().append(records)


class Env:
    def __init__(self, config=None, topics_impl=None, **topics: int) -> None:
        self.clock = ManualClock(10_000)
        self.topics = InMemoryTopics()
        ids = {"a": A, "b": B}
        for name, n in (topics or {"a": 2}).items():
            self.topics.create_topic(name, n, ids.get(name))
        self.persister = InMemoryPersister(clock=self.clock)
        self.sink = CrashingSink()
        self.gc = GroupCoordinator(
            persister=self.persister,
            topics=topics_impl(self.topics) if topics_impl else self.topics,
            clock=self.clock,
            config=config or GroupConfig(assignment_interval_ms=0),
            record_sink=self.sink,
        )

    async def start(self):
        await self.gc.load()
        return self

    async def hb(self, member_id, epoch, topics=None, group=G):
        r = await self.gc.share_group_heartbeat(group, member_id, epoch, topics)
        self.gc._check()
        return r

    def lifecycle(self, group=G):
        """The latest share-partition metadata record's value of a group."""
        for record in reversed(self.sink.read_all()):
            if record.key == ShareGroupStatePartitionMetadataKey(group):
                return record.value
        return None

    def metadata_records(self, group=G):
        return [r.value for r in self.sink.read_all() if r.key == ShareGroupStatePartitionMetadataKey(group)]

    def snapshot(self):
        return self.gc._dump(), len(self.sink)


async def env(config=None, **topics) -> Env:
    return await Env(config, **topics).start()


async def refused(e: Env, error: Errors, coro):
    before = e.snapshot()
    with pytest.raises(ShareError) as info:
        await coro
    assert info.value.error is error, info.value
    assert e.snapshot() == before, "a refusal leaves state unchanged"
    return info.value


def tm(topic_id, name, *partitions):
    return TopicMetadata(topic_id, name, tuple(partitions))


# -- two-stage initialization ------------------------------------------------------------------------------


def test_initialization_is_two_stage_with_state_epoch_the_group_epoch():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        stages = e.metadata_records()
        assert [(s.initializing_topics, s.initialized_topics) for s in stages] == [
            ((tm(A, "a", 0, 1),), ()),
            ((), (tm(A, "a", 0, 1),)),
        ]
        for p in (0, 1):
            state = e.persister.state_of(G, A, p)
            assert (state.state_epoch, state.start_offset, state.state_batches) == (2, -1, [])
        e.gc._check(replay=True)

    run(main())


def test_only_initialized_partitions_are_assigned_and_failures_are_retried_by_the_next_heartbeat():
    async def main():
        e = await env(a=3)
        e.persister.fail_next_initializes(1, Errors.UNKNOWN_SERVER_ERROR)  # not retriable: partition 0 fails
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [1, 2]}
        assert e.persister.state_of(G, A, 0) is None
        last = e.lifecycle()
        assert (last.initializing_topics, last.initialized_topics) == ((), (tm(A, "a", 1, 2),))
        epoch = e.group_epoch = e.gc.describe_group(G).group_epoch
        r = await e.hb(M1, r.member_epoch)
        assert r.assignment == {A: [0, 1, 2]}, "retried and assigned"
        assert e.gc.describe_group(G).group_epoch == epoch + 1, "newly initialized partitions bump the epoch"
        state = e.persister.state_of(G, A, 0)
        assert (state.state_epoch, state.start_offset) == (epoch, -1), "still new to the group: -1"
        e.gc._check(replay=True)

    run(main())


def test_retriable_initialize_errors_are_retried_in_place():
    async def main():
        e = await env(a=1)
        e.persister.fail_next_initializes(PERSISTER_ATTEMPTS - 1, Errors.COORDINATOR_NOT_AVAILABLE)
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0]}

    run(main())


def test_retriable_errors_past_the_attempts_leave_the_partition_for_the_next_heartbeat():
    async def main():
        e = await env(a=1)
        e.persister.fail_next_initializes(PERSISTER_ATTEMPTS, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {}
        assert e.lifecycle().initialized_topics == () and e.lifecycle().initializing_topics == ()
        r = await e.hb(M1, r.member_epoch)
        assert r.assignment == {A: [0]}

    run(main())


def test_a_crash_between_the_stages_is_completed_after_restart():
    async def main():
        e = await env(a=2)
        e.sink.crash_when = lambda r: r.key == ShareGroupStatePartitionMetadataKey(G) and r.value.initialized_topics
        with pytest.raises(ShareError):
            await e.hb(M1, 0, ["a"])
        assert e.lifecycle().initializing_topics == (tm(A, "a", 0, 1),), "stuck initializing"
        gc2 = GroupCoordinator(persister=e.persister, topics=e.topics, clock=e.clock, record_sink=e.sink)
        await gc2.load()
        assert gc2._dump() == e.gc._dump()
        r = await gc2.share_group_heartbeat(G, M1, 0, ["a"])  # the join failed: the client joins again
        assert r.assignment == {A: [0, 1]}
        assert e.persister.state_of(G, A, 0).start_offset == -1
        gc2._check(replay=True)

    run(main())


def test_new_partitions_of_a_consumed_topic_start_at_zero_and_new_topics_at_minus_one():
    async def main():
        e = await env(a=1, b=1)
        r = await e.hb(M1, 0, ["a"])
        e.topics.set_partitions("a", 2)
        r = await e.hb(M1, r.member_epoch, ["a", "b"])
        epoch = e.gc.describe_group(G).group_epoch
        assert e.persister.state_of(G, A, 1) == (epoch, 0, [])
        assert e.persister.state_of(G, B, 0) == (epoch, -1, [])
        assert e.persister.state_of(G, A, 0) == (2, -1, []), "initialized partitions are left alone"
        assert r.assignment == {A: [0, 1], B: [0]}

    run(main())


def test_unsubscribed_topics_keep_their_state():
    async def main():
        e = await env(a=1, b=1)
        r = await e.hb(M1, 0, ["a", "b"])
        r = await e.hb(M1, r.member_epoch, ["a"])
        assert r.assignment == {A: [0]}
        assert {tm.topic_id for tm in e.lifecycle().initialized_topics} == {A, B}
        assert set(await e.gc.describe_offsets(G)) == {A, B}

    run(main())


# -- describe ------------------------------------------------------------------------------------------------


def test_describe_group():
    async def main():
        e = await env(a=2)
        await e.gc.share_group_heartbeat(G, M1, 0, ["a"], rack_id="r1", client_id="c1", client_host="/h1")
        d = e.gc.describe_group(G)
        assert (d.group_id, d.state, d.group_epoch, d.assignment_epoch) == (G, GroupState.STABLE, 2, 2)
        (m,) = d.members
        assert m == (M1, 2, "c1", "/h1", "r1", ["a"], {A: [0, 1]})
        assert str(d.state) == "Stable"
        with pytest.raises(ShareError) as info:
            e.gc.describe_group("missing")
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
        with pytest.raises(ShareError) as info:
            e.gc.describe_group("")
        assert info.value.error is Errors.INVALID_GROUP_ID

    run(main())


def test_describe_offsets_start_offset_and_lag():
    async def main():
        e = await env(a=3)
        await e.hb(M1, 0, ["a"])
        assert await e.gc.describe_offsets(G) == {A: {p: OffsetInfo(-1, -1) for p in range(3)}}
        # The share-partition leaders resolve and advance their state.
        w = dict(state_epoch=2, leader_epoch=0)
        await e.persister.write_state(
            G, A, 0, start_offset=10, state_batches=[StateBatch(12, 14, 2, 1)], delivery_complete_count=3, **w
        )
        await e.persister.write_state(G, A, 1, start_offset=100, state_batches=[], delivery_complete_count=0, **w)
        await e.persister.write_state(G, A, 2, start_offset=7, state_batches=[], **w)  # count unknown
        e.topics.set_latest_offset(A, 0, 50)
        e.topics.set_latest_offset(A, 1, 90)  # the log end is behind the start offset: lag 0, never negative
        offsets = await e.gc.describe_offsets(G)
        assert offsets == {A: {0: OffsetInfo(10, 37), 1: OffsetInfo(100, 0), 2: OffsetInfo(7, -1)}}

    run(main())


def test_describe_offsets_errors():
    async def main():
        e = await env(a=2)
        with pytest.raises(ShareError) as info:
            await e.gc.describe_offsets(G)
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
        with pytest.raises(ShareError) as info:
            await e.gc.describe_offsets(" ")
        assert info.value.error is Errors.INVALID_GROUP_ID
        await e.hb(M1, 0, ["a"])
        for p in (0, 1):
            await e.persister.write_state(
                G, A, p, state_epoch=2, leader_epoch=0, start_offset=5, state_batches=[], delivery_complete_count=0
            )
        e.persister.fail_next_reads(1, Errors.UNKNOWN_SERVER_ERROR)
        offsets = await e.gc.describe_offsets(G)
        expected = [OffsetInfo(-1, -1, Errors.UNKNOWN_SERVER_ERROR), OffsetInfo(5, 0)]
        assert sorted(offsets[A].values()) == sorted(expected)
        e.persister.fail_next_reads(2, Errors.COORDINATOR_NOT_AVAILABLE)  # retriable: retried
        assert await e.gc.describe_offsets(G) == {A: {0: OffsetInfo(5, 0), 1: OffsetInfo(5, 0)}}
        e.topics.set_partitions("a", 1)  # partition 1's log end cannot be known any more
        offsets = await e.gc.describe_offsets(G)
        assert offsets[A][1] == OffsetInfo(5, -1, Errors.UNKNOWN_TOPIC_OR_PARTITION)

    run(main())


# -- alter offsets --------------------------------------------------------------------------------------------


def test_alter_offsets_only_on_an_empty_group():
    async def main():
        e = await env(a=2)
        r = await e.hb(M1, 0, ["a"])
        await refused(e, Errors.GROUP_NOT_EMPTY, e.gc.alter_offsets(G, {A: {0: 5}}))
        await e.hb(M1, -1)
        epoch = e.gc.describe_group(G).group_epoch
        assert await e.gc.alter_offsets(G, {A: {0: 5, 1: 7}}) == {A: {0: Errors.NONE, 1: Errors.NONE}}
        assert e.persister.state_of(G, A, 0) == (epoch, 5, [])
        assert e.persister.state_of(G, A, 1) == (epoch, 7, [])
        assert e.gc.describe_group(G).group_epoch == epoch, "altering does not bump the epoch"
        assert await e.gc.describe_offsets(G) == {A: {0: OffsetInfo(5, 0), 1: OffsetInfo(7, 0)}}
        # Joining again keeps the altered state (already initialized).
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0, 1]}
        assert e.persister.state_of(G, A, 0).start_offset == 5
        e.gc._check(replay=True)

    run(main())


def test_alter_offsets_of_a_silent_group_expires_its_members_first():
    async def main():
        e = await env(a=1)
        await e.hb(M1, 0, ["a"])
        e.clock.advance(45_000)
        assert await e.gc.alter_offsets(G, {A: {0: 3}}) == {A: {0: Errors.NONE}}

    run(main())


def test_alter_offsets_creates_the_group_and_initializes_new_partitions_two_stage():
    async def main():
        e = await env(a=2)
        assert await e.gc.alter_offsets(G, {A: {1: 42}}) == {A: {1: Errors.NONE}}
        d = e.gc.describe_group(G)
        assert (d.state, d.group_epoch) == (GroupState.EMPTY, 1)
        assert e.persister.state_of(G, A, 1) == (1, 42, [])
        assert [(s.initializing_topics, s.initialized_topics) for s in e.metadata_records()] == [
            ((tm(A, "a", 1),), ()),
            ((), (tm(A, "a", 1),)),
        ]
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0, 1]}
        assert e.persister.state_of(G, A, 0).start_offset == 0, "the topic was already consumed"
        assert e.persister.state_of(G, A, 1).start_offset == 42
        e.gc._check(replay=True)

    run(main())


def test_alter_offsets_unknown_topics_and_partitions():
    async def main():
        e = await env(a=2)
        result = await e.gc.alter_offsets(G, {A: {0: 1, 2: 1}, UNKNOWN: {0: 1, 1: 1}})
        assert result == {
            A: {0: Errors.NONE, 2: Errors.UNKNOWN_TOPIC_OR_PARTITION},
            UNKNOWN: {0: Errors.UNKNOWN_TOPIC_OR_PARTITION, 1: Errors.UNKNOWN_TOPIC_OR_PARTITION},
        }
        before = e.snapshot()
        assert await e.gc.alter_offsets("other", {UNKNOWN: {0: 1}}) == {UNKNOWN: {0: Errors.UNKNOWN_TOPIC_OR_PARTITION}}
        assert e.snapshot() == before, "nothing valid: no group is created"

    run(main())


@pytest.mark.parametrize(
    "offsets",
    [
        None,
        [(A, {0: 1})],
        {"a": {0: 1}},
        {A: [1]},
        {A: {-1: 1}},
        {A: {"0": 1}},
        {A: {True: 1}},
        {A: {0: -1}},
        {A: {0: 1.5}},
        {A: {0: False}},
    ],
)
def test_alter_offsets_malformed_is_invalid_request(offsets):
    async def main():
        e = await env(a=2)
        await refused(e, Errors.INVALID_REQUEST, e.gc.alter_offsets(G, offsets))
        await refused(e, Errors.INVALID_GROUP_ID, e.gc.alter_offsets("", {A: {0: 1}}))

    run(main())


def test_alter_offsets_persister_failure_is_per_partition():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        epoch = e.gc.describe_group(G).group_epoch
        e.persister.fail_next_initializes(1, Errors.UNKNOWN_SERVER_ERROR)
        result = await e.gc.alter_offsets(G, {A: {0: 9, 1: 9}})
        assert sorted(result[A].values()) == [Errors.UNKNOWN_SERVER_ERROR, Errors.NONE]
        failed = next(p for p, err in result[A].items() if err is not Errors.NONE)
        assert e.persister.state_of(G, A, failed) == (2, -1, []), "the old state is intact"
        assert e.persister.state_of(G, A, 1 - failed) == (epoch, 9, [])
        assert {t.topic_id: t.partitions for t in e.lifecycle().initialized_topics} == {A: (0, 1)}
        # A brand-new partition whose initialization fails does not stay initializing.
        e.topics.set_partitions("a", 3)
        e.persister.fail_next_initializes(1, Errors.FENCED_STATE_EPOCH)
        assert await e.gc.alter_offsets(G, {A: {2: 1}}) == {A: {2: Errors.FENCED_STATE_EPOCH}}
        assert e.lifecycle().initializing_topics == ()
        assert {t.topic_id: t.partitions for t in e.lifecycle().initialized_topics} == {A: (0, 1)}
        e.gc._check(replay=True)

    run(main())


# -- delete offsets ----------------------------------------------------------------------------------------


def test_delete_offsets():
    async def main():
        e = await env(a=2, b=1)
        r = await e.hb(M1, 0, ["a", "b"])
        await refused(e, Errors.GROUP_NOT_EMPTY, e.gc.delete_offsets(G, [A]))
        await refused(e, Errors.GROUP_ID_NOT_FOUND, e.gc.delete_offsets("missing", [A]))
        await refused(e, Errors.INVALID_REQUEST, e.gc.delete_offsets(G, A))
        await refused(e, Errors.INVALID_REQUEST, e.gc.delete_offsets(G, ["a"]))
        await e.hb(M1, -1)
        result = await e.gc.delete_offsets(G, [A, UNKNOWN, A])
        assert result == {A: Errors.NONE, UNKNOWN: Errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert e.persister.state_of(G, A, 0) is None and e.persister.state_of(G, A, 1) is None
        assert e.persister.state_of(G, B, 0) is not None
        stages = e.metadata_records()[-2:]
        assert stages[0].deleting_topics == (tm(A, "a", 0, 1),) and stages[0].initialized_topics == (tm(B, "b", 0),)
        assert stages[1].deleting_topics == () and stages[1].initialized_topics == (tm(B, "b", 0),)
        assert set(await e.gc.describe_offsets(G)) == {B}
        # Subscribing again starts the topic afresh (-1).
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0, 1]}
        assert e.persister.state_of(G, A, 0).start_offset == -1
        e.gc._check(replay=True)

    run(main())


def test_delete_offsets_failure_keeps_the_topic_deleting_until_a_retry_succeeds():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        e.persister.fail_next_deletes(1, Errors.UNKNOWN_SERVER_ERROR)
        assert await e.gc.delete_offsets(G, [A]) == {A: Errors.UNKNOWN_SERVER_ERROR}
        assert e.lifecycle().deleting_topics == (tm(A, "a", 0, 1),)
        assert e.lifecycle().initialized_topics == ()
        e.persister.fail_next_deletes(PERSISTER_ATTEMPTS - 1, Errors.NOT_COORDINATOR)  # retriable
        assert await e.gc.delete_offsets(G, [A]) == {A: Errors.NONE}
        assert e.lifecycle().deleting_topics == ()
        assert all(e.persister.state_of(G, A, p) is None for p in (0, 1))
        e.gc._check(replay=True)

    run(main())


def test_subscribing_to_a_deleting_topic_initializes_it_again():
    async def main():
        e = await env(a=1)
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        e.persister.fail_next_deletes(1)
        await e.gc.delete_offsets(G, [A])
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0]}
        assert e.lifecycle().deleting_topics == ()
        assert e.persister.state_of(G, A, 0).start_offset == -1

    run(main())


# -- delete group ------------------------------------------------------------------------------------------


def test_delete_group():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        await refused(e, Errors.GROUP_NOT_EMPTY, e.gc.delete_group(G))
        await refused(e, Errors.GROUP_ID_NOT_FOUND, e.gc.delete_group("missing"))
        # Kafka's DeleteGroups refuses only a null group id; "" is looked up like any other.
        await refused(e, Errors.GROUP_ID_NOT_FOUND, e.gc.delete_group(""))
        await refused(e, Errors.INVALID_GROUP_ID, e.gc.delete_group(None))
        await e.hb(M1, -1)
        n = len(e.sink)
        await e.gc.delete_group(G)
        assert all(e.persister.state_of(G, A, p) is None for p in (0, 1))
        with pytest.raises(ShareError) as info:
            e.gc.describe_group(G)
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
        written = e.sink.read_all()[n:]
        assert written[0].value.deleting_topics == (tm(A, "a", 0, 1),), "stage 1: deleting"
        assert [type(r.key).__name__ for r in written[1:]] == [
            "ShareGroupTargetAssignmentMetadataKey",
            "ShareGroupStatePartitionMetadataKey",
            "ShareGroupMetadataKey",
        ]
        assert all(r.value is None for r in written[1:]), "tombstones"
        assert e.gc._dump() == {}
        e.gc._check(replay=True)
        # The id can be used again: a fresh group.
        r = await e.hb(M1, 0, ["a"])
        assert r.member_epoch == 2 and r.assignment == {A: [0, 1]}

    run(main())


def test_delete_group_failure_keeps_the_group_until_a_retry_succeeds():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        e.persister.fail_next_deletes(1, Errors.FENCED_STATE_EPOCH)
        with pytest.raises(ShareError) as info:
            await e.gc.delete_group(G)
        assert info.value.error is Errors.FENCED_STATE_EPOCH
        assert e.gc.describe_group(G).state is GroupState.EMPTY
        assert e.lifecycle().deleting_topics == (tm(A, "a", 0, 1),)
        await e.gc.delete_group(G)
        assert e.gc._dump() == {}
        assert not any(r.key == ShareGroupMetadataKey(G) and r.value is not None for r in e.sink.read_all()[-1:])

    run(main())


def test_an_unexpected_persister_exception_becomes_unknown_server_error():
    class Broken(InMemoryPersister):
        async def delete_state(self, *args):
            raise RuntimeError("disk on fire")

    async def main():
        e = await env(a=1)
        e.persister = Broken(clock=e.clock)
        e.gc._lifecycle.persister = e.persister
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        assert await e.gc.delete_offsets(G, [A]) == {A: Errors.UNKNOWN_SERVER_ERROR}

    run(main())


def test_topic_info_is_a_plain_tuple():
    assert TopicInfo(A, "a", 3) == (A, "a", 3)
