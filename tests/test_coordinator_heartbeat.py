"""ShareGroupHeartbeat: join / leave / regular heartbeats with their exact error codes, session timeouts,
group and assignment epochs, the assignment interval, topic metadata changes, and state left unchanged
by every refusal."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError
from sharegroup.coordinator import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    HeartbeatResult,
    InMemoryTopics,
    MemoryRecordSink,
)

A = uuid.UUID(int=0xA1)
B = uuid.UUID(int=0xB2)
G = "group-1"
M1, M2, M3 = "member-1", "member-2", "member-3"


def run(coro):
    return asyncio.run(coro)


class Env:
    """A coordinator over an InMemoryPersister, in-memory topics and a manual clock."""

    def __init__(self, config: GroupConfig | None = None, **topics: int) -> None:
        self.clock = ManualClock(10_000)
        self.topics = InMemoryTopics()
        ids = {"a": A, "b": B}
        for name, n in (topics or {"a": 4}).items():
            self.topics.create_topic(name, n, ids.get(name))
        self.persister = InMemoryPersister(clock=self.clock)
        self.sink = MemoryRecordSink()
        self.gc = GroupCoordinator(
            persister=self.persister,
            topics=self.topics,
            clock=self.clock,
            config=config or GroupConfig(),
            record_sink=self.sink,
        )

    async def start(self) -> "Env":
        await self.gc.load()
        return self

    async def hb(self, member_id, epoch, topics=None, group=G, **kw) -> HeartbeatResult:
        result = await self.gc.share_group_heartbeat(group, member_id, epoch, topics, **kw)
        self.gc._check()
        return result

    def group(self, group_id=G):
        return self.gc.describe_group(group_id)

    def snapshot(self):
        return self.gc._dump(), len(self.sink)


async def env(config=None, **topics) -> Env:
    return await Env(config, **topics).start()


async def refused(e: Env, error: Errors, coro):
    """Await `coro`, expecting ShareError(error), and check that nothing changed."""
    before = e.snapshot()
    with pytest.raises(ShareError) as info:
        await coro
    assert info.value.error is error, info.value
    assert e.snapshot() == before, "a refusal leaves state unchanged"
    e.gc._check(replay=True)
    return info.value


# -- join ------------------------------------------------------------------------------------------------


def test_join_creates_group_and_returns_member_epoch_interval_and_assignment():
    async def main():
        e = await env(a=4)
        r = await e.hb(M1, 0, ["a"])
        assert r == HeartbeatResult(M1, 2, 5000, {A: [0, 1, 2, 3]})
        d = e.group()
        assert (d.state, d.group_epoch, d.assignment_epoch) == (GroupState.STABLE, 2, 2)
        assert d.members[0].member_id == M1 and d.members[0].subscribed_topic_names == ["a"]
        e.gc._check(replay=True)

    run(main())


def test_join_with_empty_member_id_gets_a_generated_uuid():
    async def main():
        e = await env()
        r = await e.hb("", 0, ["a"])
        assert str(uuid.UUID(r.member_id)) == r.member_id
        assert [m.member_id for m in e.group().members] == [r.member_id]
        r2 = await e.hb(r.member_id, r.member_epoch)
        assert r2.member_id == r.member_id

    run(main())


def test_join_records_client_details():
    async def main():
        e = await env()
        await e.hb(M1, 0, ["a"], rack_id="rack-1", client_id="consumer-1", client_host="/10.0.0.1")
        m = e.group().members[0]
        assert (m.rack_id, m.client_id, m.client_host) == ("rack-1", "consumer-1", "/10.0.0.1")
        # rack None means unchanged; client id and host are the request's
        await e.hb(M1, 2, client_id="consumer-1b", client_host="/10.0.0.2")
        m = e.group().members[0]
        assert (m.rack_id, m.client_id, m.client_host) == ("rack-1", "consumer-1b", "/10.0.0.2")

    run(main())


def test_rejoin_with_epoch_zero_is_accepted_and_returns_the_assignment():
    async def main():
        e = await env()
        r = await e.hb(M1, 0, ["a"])
        epoch = e.group().group_epoch
        again = await e.hb(M1, 0, ["a"])
        assert again == r
        assert e.group().group_epoch == epoch, "same subscription: no bump"

    run(main())


def test_members_share_partitions_when_they_outnumber_them():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=0), a=1)
        results = {m: await e.hb(m, 0, ["a"]) for m in (M1, M2, M3)}
        for m in (M1, M2, M3):
            r = await e.hb(m, results[m].member_epoch)
            results[m] = r
        assert all(m.assignment == {A: [0]} for m in e.group().members)

    run(main())


# -- regular heartbeats ----------------------------------------------------------------------------------


def test_regular_heartbeat_returns_assignment_only_when_it_changed_or_on_full_request():
    async def main():
        e = await env(a=2)
        r = await e.hb(M1, 0, ["a"])
        assert (await e.hb(M1, r.member_epoch)).assignment is None
        full = await e.hb(M1, r.member_epoch, ["a"])
        assert full.assignment == {A: [0, 1]}
        r2 = await e.hb(M2, 0, ["a"])
        assert r2.assignment == {}, "the assignment interval has not passed since the last computation"
        e.clock.advance(1_000)
        changed = await e.hb(M1, r.member_epoch)
        assert changed.member_epoch == 3 and changed.assignment == {A: [0]}
        assert (await e.hb(M1, 3)).assignment is None

    run(main())


def test_fenced_member_epoch():
    async def main():
        e = await env(a=2)
        r1 = await e.hb(M1, 0, ["a"])
        await e.hb(M2, 0, ["a"])
        e.clock.advance(1_000)
        r = await e.hb(M1, r1.member_epoch)
        assert (r.member_epoch, r1.member_epoch) == (3, 2)
        await refused(e, Errors.FENCED_MEMBER_EPOCH, e.gc.share_group_heartbeat(G, M1, 4))
        await refused(e, Errors.FENCED_MEMBER_EPOCH, e.gc.share_group_heartbeat(G, M1, 1))
        # The previous epoch is accepted: the response that carried the new one may have been lost.
        assert (await e.hb(M1, 2)).member_epoch == 3

    run(main())


def test_unknown_group_and_unknown_member():
    async def main():
        e = await env()
        await refused(e, Errors.GROUP_ID_NOT_FOUND, e.gc.share_group_heartbeat("nope", M1, 1))
        await refused(e, Errors.GROUP_ID_NOT_FOUND, e.gc.share_group_heartbeat("nope", M1, -1))
        await e.hb(M1, 0, ["a"])
        await refused(e, Errors.UNKNOWN_MEMBER_ID, e.gc.share_group_heartbeat(G, M2, 2))
        await refused(e, Errors.UNKNOWN_MEMBER_ID, e.gc.share_group_heartbeat(G, M2, -1))

    run(main())


def test_group_max_size_reached():
    async def main():
        e = await env(config=GroupConfig(max_size=2))
        await e.hb(M1, 0, ["a"])
        await e.hb(M2, 0, ["a"])
        await refused(e, Errors.GROUP_MAX_SIZE_REACHED, e.gc.share_group_heartbeat(G, M3, 0, ["a"]))
        await refused(e, Errors.GROUP_MAX_SIZE_REACHED, e.gc.share_group_heartbeat(G, "", 0, ["a"]))
        await e.hb(M2, 0, ["a"])  # a member already in the group may rejoin
        await e.hb(M2, -1)
        await e.hb(M3, 0, ["a"])

    run(main())


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("", M1, 0, ["a"]), {}),
        (("   ", M1, 0, ["a"]), {}),
        ((None, M1, 0, ["a"]), {}),
        ((7, M1, 0, ["a"]), {}),
        ((G, M1, -2, None), {}),
        ((G, M1, True, ["a"]), {}),
        ((G, M1, "1", None), {}),
        ((G, M1, 2**31, None), {}),
        ((G, "", 1, None), {}),
        ((G, "", -1, None), {}),
        ((G, "  ", 0, ["a"]), {}),
        ((G, None, 0, ["a"]), {}),
        ((G, "x" * 37, 0, ["a"]), {}),
        ((G, M1, 0, None), {}),
        ((G, M1, 0, []), {}),
        ((G, M1, 0, "a"), {}),
        ((G, M1, 0, ["a", ""]), {}),
        ((G, M1, 0, ["a", None]), {}),
        ((G, M1, 0, {"a": 1}), {}),
        ((G, M1, 0, ["a"]), {"rack_id": ""}),
        ((G, M1, 0, ["a"]), {"rack_id": 5}),
        ((G, M1, 0, ["a"]), {"client_id": None}),
        ((G, M1, 0, ["a"]), {"client_host": 1}),
    ],
)
def test_malformed_requests_are_invalid_request(args, kwargs):
    async def main():
        e = await env()
        await e.hb(M2, 0, ["a"])
        await refused(e, Errors.INVALID_REQUEST, e.gc.share_group_heartbeat(*args, **kwargs))

    run(main())


# -- leave -----------------------------------------------------------------------------------------------


def test_leave_bumps_the_epoch_and_the_last_leave_empties_the_group():
    async def main():
        e = await env(a=2)
        r1 = await e.hb(M1, 0, ["a"])
        await e.hb(M2, 0, ["a"])
        epoch = e.group().group_epoch
        assert await e.hb(M2, -1) == HeartbeatResult(M2, -1, 0, None)  # Kafka sets no interval on a leave
        d = e.group()
        assert d.group_epoch == epoch + 1 and [m.member_id for m in d.members] == [M1]
        await e.hb(M1, -1)
        d = e.group()
        assert (d.state, d.members) == (GroupState.EMPTY, [])
        assert d.assignment_epoch == d.group_epoch == epoch + 2
        # The empty group is kept; a later join computes at once (no assignment interval to wait).
        r = await e.hb(M1, 0, ["a"])
        assert r.assignment == {A: [0, 1]} and r.member_epoch == epoch + 3 > r1.member_epoch
        e.gc._check(replay=True)

    run(main())


def test_leave_then_heartbeat_is_unknown_member():
    async def main():
        e = await env()
        r = await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        await refused(e, Errors.UNKNOWN_MEMBER_ID, e.gc.share_group_heartbeat(G, M1, r.member_epoch))

    run(main())


# -- sessions --------------------------------------------------------------------------------------------


def test_session_timeout_expires_silent_members():
    async def main():
        e = await env(a=2)
        await e.hb(M1, 0, ["a"])
        r2 = await e.hb(M2, 0, ["a"])
        epoch = e.group().group_epoch
        e.clock.advance(40_000)
        r2 = await e.hb(M2, r2.member_epoch)  # M2 keeps its session alive; M1 is silent
        e.clock.advance(4_999)
        assert await e.gc.expire_members() == []
        e.clock.advance(1)  # 45 s after M1's last heartbeat
        assert await e.gc.expire_members() == [M1]
        e.gc._check(replay=True)
        d = e.group()
        assert [m.member_id for m in d.members] == [M2] and d.group_epoch > epoch
        assert await e.gc.expire_members() == []
        await refused(e, Errors.UNKNOWN_MEMBER_ID, e.gc.share_group_heartbeat(G, M1, 2))
        e.clock.advance(1_000)
        r2 = await e.hb(M2, r2.member_epoch)
        assert r2.assignment == {A: [0, 1]}, "the survivor takes over the expired member's partitions"

    run(main())


def test_an_overdue_member_is_gone_even_before_expire_members_runs():
    async def main():
        e = await env()
        r1 = await e.hb(M1, 0, ["a"])
        r2 = await e.hb(M2, 0, ["a"])
        e.clock.advance(45_000)
        with pytest.raises(ShareError) as info:
            await e.hb(M1, r1.member_epoch)
        assert info.value.error is Errors.UNKNOWN_MEMBER_ID
        assert e.group().state is GroupState.EMPTY, "both sessions ran out"
        assert await e.gc.expire_members() == []
        assert r2.member_id == M2

    run(main())


def test_session_timeout_is_configurable_within_kafka_bounds():
    async def main():
        e = await env(config=GroupConfig(session_timeout_ms=60_000, heartbeat_interval_ms=15_000))
        r = await e.hb(M1, 0, ["a"])
        assert r.heartbeat_interval_ms == 15_000
        e.clock.advance(59_999)
        assert await e.gc.expire_members() == []
        e.clock.advance(1)
        assert await e.gc.expire_members() == [M1]

    run(main())


def test_expire_members_across_groups():
    async def main():
        e = await env()
        await e.hb(M1, 0, ["a"], group="g1")
        await e.hb(M1, 0, ["a"], group="g2")
        e.clock.advance(45_000)
        assert await e.gc.expire_members() == [M1, M1]
        assert e.gc.describe_group("g1").state is GroupState.EMPTY
        assert e.gc.describe_group("g2").state is GroupState.EMPTY

    run(main())


# -- epochs, assignment interval -------------------------------------------------------------------------


def test_group_epoch_bumps_on_membership_and_subscription_changes_only():
    async def main():
        e = await env(a=2, b=2)
        r = await e.hb(M1, 0, ["a"])
        assert e.group().group_epoch == 2
        await e.hb(M1, r.member_epoch)
        await e.hb(M1, r.member_epoch, ["a"])
        assert e.group().group_epoch == 2, "heartbeats and an unchanged subscription do not bump"
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch, ["a", "b"])
        assert e.group().group_epoch == 3
        assert r.assignment == {A: [0, 1], B: [0, 1]} and r.member_epoch == 3
        r = await e.hb(M1, 3, ["b"])
        # rate-limited: the assignment is re-filtered to the new subscription until it is recomputed
        assert r.assignment == {B: [0, 1]} and r.member_epoch == 3 and e.group().group_epoch == 4
        e.clock.advance(1_000)
        r = await e.hb(M1, 3)
        assert r.member_epoch == 4 and r.assignment is None

    run(main())


def test_assignment_interval_rate_limits_recomputation():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=2_000), a=4)
        r1 = await e.hb(M1, 0, ["a"])
        e.clock.advance(500)
        r2 = await e.hb(M2, 0, ["a"])
        d = e.group()
        assert (d.group_epoch, d.assignment_epoch) == (3, 2)
        assert (r2.member_epoch, r2.assignment) == (2, {})
        e.clock.advance(1_499)
        assert (await e.hb(M1, r1.member_epoch)).assignment is None
        assert e.group().assignment_epoch == 2
        e.clock.advance(1)
        r1 = await e.hb(M1, r1.member_epoch)
        assert (r1.member_epoch, r1.assignment) == (3, {A: [0, 1]})
        r2 = await e.hb(M2, r2.member_epoch)
        assert (r2.member_epoch, r2.assignment) == (3, {A: [2, 3]})

    run(main())


def test_assignment_interval_zero_recomputes_at_once():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=0), a=4)
        await e.hb(M1, 0, ["a"])
        r2 = await e.hb(M2, 0, ["a"])
        assert r2.assignment == {A: [2, 3]} and r2.member_epoch == 3

    run(main())


def test_heterogeneous_subscriptions():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=0), a=2, b=2)
        r1 = await e.hb(M1, 0, ["a"])
        r2 = await e.hb(M2, 0, ["a", "b"])
        r1 = await e.hb(M1, r1.member_epoch)
        assert r1.assignment == {A: [0]}
        assert r2.assignment == {A: [1], B: [0, 1]}

    run(main())


# -- topic metadata --------------------------------------------------------------------------------------


def test_new_partitions_bump_the_epoch_and_are_initialized_at_offset_zero():
    async def main():
        e = await env(a=2)
        r = await e.hb(M1, 0, ["a"])
        e.topics.set_partitions("a", 3)
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch)
        assert e.group().group_epoch == 3
        assert r.assignment == {A: [0, 1, 2]}
        assert e.persister.state_of(G, A, 2).start_offset == 0, "a topic already consumed starts at 0"
        assert e.persister.state_of(G, A, 0).start_offset == -1

    run(main())


def test_subscribing_to_a_topic_that_does_not_exist_yet():
    async def main():
        e = await env(a=1)
        r = await e.hb(M1, 0, ["later"])
        assert r.assignment == {} and e.group().group_epoch == 2
        r = await e.hb(M1, r.member_epoch)
        assert r.assignment is None and e.group().group_epoch == 2
        created = e.topics.create_topic("later", 2)
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch)
        assert e.group().group_epoch == 3 and r.assignment == {created.topic_id: [0, 1]}
        assert e.persister.state_of(G, created.topic_id, 0).start_offset == -1

    run(main())


def test_deleted_topic_leaves_assignments_and_partition_metadata():
    async def main():
        e = await env(a=2, b=1)
        r = await e.hb(M1, 0, ["a", "b"])
        assert r.assignment == {A: [0, 1], B: [0]}
        e.topics.delete_topic("a")
        r = await e.hb(M1, r.member_epoch)  # at once: the assignment must not hold a deleted topic
        assert r.assignment == {B: [0]} and e.group().members[0].assignment == {B: [0]}
        e.gc._check(replay=True)
        assert e.group().group_epoch == 3
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch)
        assert r.member_epoch == 3 and r.assignment is None
        recreated = e.topics.create_topic("a", 1)
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch)
        assert r.assignment == {recreated.topic_id: [0], B: [0]}
        assert e.persister.state_of(G, recreated.topic_id, 0).start_offset == -1, "a new topic to the group"

    run(main())


def test_shrunk_topic_drops_the_missing_partitions():
    async def main():
        e = await env(a=3)
        r = await e.hb(M1, 0, ["a"])
        e.topics.set_partitions("a", 1)
        e.clock.advance(1_000)
        r = await e.hb(M1, r.member_epoch)
        assert r.assignment == {A: [0]}

    run(main())


# -- failures --------------------------------------------------------------------------------------------


def test_record_sink_failure_leaves_state_unchanged():
    async def main():
        e = await env()
        e.sink.fail_next_appends(1)
        err = await refused(e, Errors.NOT_COORDINATOR, e.gc.share_group_heartbeat(G, M1, 0, ["a"]))
        assert "injected" in err.message
        with pytest.raises(ShareError):
            e.gc.describe_group(G)
        r = await e.hb(M1, 0, ["a"])
        e.sink.fail_next_appends(1)
        await refused(e, Errors.NOT_COORDINATOR, e.gc.share_group_heartbeat(G, M1, -1))
        await e.hb(M1, r.member_epoch)

    run(main())


def test_a_sink_handed_in_must_be_loaded_first():
    async def main():
        e = Env()
        with pytest.raises(ShareError) as info:
            await e.gc.share_group_heartbeat(G, M1, 0, ["a"])
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        with pytest.raises(ShareError) as info:
            await e.gc.expire_members()
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        await e.start()
        await e.hb(M1, 0, ["a"])
        # A private sink needs no load.
        gc = GroupCoordinator(persister=e.persister, topics=e.topics, clock=e.clock)
        assert (await gc.share_group_heartbeat(G, M1, 0, ["a"])).member_epoch == 2

    run(main())


def test_constructor_refuses_wrong_collaborators():
    p, t = InMemoryPersister(), InMemoryTopics()
    with pytest.raises(TypeError):
        GroupCoordinator(persister=object(), topics=t)
    with pytest.raises(TypeError):
        GroupCoordinator(persister=p, topics=object())
    with pytest.raises(TypeError):
        GroupCoordinator(persister=p, topics=t, clock=object())
    with pytest.raises(TypeError):
        GroupCoordinator(persister=p, topics=t, config={"max_size": 3})
    with pytest.raises(TypeError):
        GroupCoordinator(persister=p, topics=t, record_sink=[])


def test_concurrent_heartbeats_of_one_group_are_serialized():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=0), a=8)
        members = [f"m{i}" for i in range(6)]
        results = await asyncio.gather(*(e.gc.share_group_heartbeat(G, m, 0, ["a"]) for m in members))
        e.gc._check(replay=True)
        epochs = dict(zip(members, (r.member_epoch for r in results)))
        results = await asyncio.gather(*(e.gc.share_group_heartbeat(G, m, epochs[m]) for m in members))
        e.gc._check(replay=True)
        assigned = sorted(p for m in e.group().members for p in m.assignment.get(A, []))
        assert assigned == list(range(8))

    run(main())


def test_a_member_learns_of_a_clean_up_done_while_it_was_silent():
    async def main():
        e = await env(config=GroupConfig(assignment_interval_ms=0), a=2, b=2)
        r1 = await e.hb(M1, 0, ["a", "b"])
        r2 = await e.hb(M2, 0, ["a", "b"])
        r1 = await e.hb(M1, r1.member_epoch)
        assert r1.assignment == {A: [0], B: [0]} and r2.assignment == {A: [1], B: [1]}
        e.topics.delete_topic("b")
        await e.hb(M1, r1.member_epoch)  # M1's heartbeat strips B from every member at once
        assert {m.member_id: m.assignment for m in e.group().members}[M2] == {A: [1]}
        r2 = await e.hb(M2, r2.member_epoch)
        assert r2.assignment == {A: [1]}, "M2 is told although its epoch is unchanged"
        assert (await e.hb(M2, r2.member_epoch)).assignment is None
