"""Static membership (KIP-345) in classic groups: a member with `group.instance.id` that comes back
within its session timeout takes its place again without a rebalance; its old member id is fenced
(FENCED_INSTANCE_ID); it leaves by instance id."""

from __future__ import annotations

import asyncio

from sharegroup import Errors
from sharegroup.coordinator.classic.records import GroupMetadataKey
from tests.classic_env import DELAY_MS, G, SESSION_MS, ClassicEnv, protocols


def run(coro_fn):
    async def main():
        env = await ClassicEnv().start()
        await coro_fn(env)
    asyncio.run(main())


async def static_group(env):
    generation, members = await env.stable_group(2, instances=["i-a", "i-b"])
    by_instance = {d.group_instance_id: d.member_id for d in env.gc.describe_groups([G])[0].members}
    return generation, by_instance


def test_static_members_join_without_member_id_required():
    async def body(env):
        task = env.join("", instance="i-a")
        await env.finish_join(task)
        result = task.result()
        assert result.error is Errors.NONE and result.member_id.startswith("i-a-")
        assert [(m.member_id, m.group_instance_id) for m in result.members] == [(result.member_id, "i-a")]
    run(body)


def test_a_static_member_that_restarts_gets_a_new_id_and_its_assignment_without_a_rebalance():
    async def body(env):
        generation, ids = await static_group(env)
        old_b = ids["i-b"]
        records_before = len(env.sink)
        rejoined = await env.join_now("", instance="i-b")  # a restart: no member id, same instance id
        assert rejoined.error is Errors.NONE and rejoined.member_id != old_b
        assert rejoined.generation_id == generation and env.state() == "Stable"
        assert not rejoined.skip_assignment and rejoined.members == ()  # a follower
        synced = await env.sync_now(rejoined.member_id, generation, instance="i-b")
        assert (synced.error, synced.assignment) == (Errors.NONE, old_b.encode())
        # The replacement is stored (the new member id survives a restart).
        assert len(env.sink) == records_before + 1
        stored = env.sink.read_all()[-1]
        assert stored.key == GroupMetadataKey(G)
        assert {m.group_instance_id: m.member_id for m in stored.value.members}["i-b"] == rejoined.member_id
        # The other member noticed nothing.
        assert await env.gc.heartbeat(G, generation, ids["i-a"], "i-a") is Errors.NONE
    run(body)


def test_the_old_member_id_of_a_replaced_static_member_is_fenced():
    async def body(env):
        generation, ids = await static_group(env)
        new = await env.join_now("", instance="i-b")
        old_b = ids["i-b"]
        assert await env.gc.heartbeat(G, generation, old_b, "i-b") is Errors.FENCED_INSTANCE_ID
        assert (await env.sync_now(old_b, generation, instance="i-b")).error is Errors.FENCED_INSTANCE_ID
        assert (await env.join_now(old_b, instance="i-b")).error is Errors.FENCED_INSTANCE_ID
        assert await env.gc.heartbeat(G, generation, new.member_id, "i-b") is Errors.NONE
        assert await env.gc.heartbeat(G, generation, old_b, "i-unknown") is Errors.UNKNOWN_MEMBER_ID
    run(body)


def test_a_static_leader_that_restarts_is_told_to_skip_the_assignment():
    async def body(env):
        generation, ids = await static_group(env)
        leader_instance = next(i for i, m in ids.items() if env.gc._store.classic_groups[G].leader_id == m)
        rejoined = await env.join_now("", instance=leader_instance)
        assert rejoined.skip_assignment and rejoined.leader == rejoined.member_id
        assert sorted(m.group_instance_id for m in rejoined.members) == ["i-a", "i-b"]
        assert env.state() == "Stable"
    run(body)


def test_a_static_member_with_other_protocols_triggers_a_rebalance():
    async def body(env):
        generation, ids = await static_group(env)
        task = env.join("", instance="i-b", protos=protocols(names=("roundrobin", "range")))
        await env.settle()
        # "range" is still what the members prefer in common? i-a supports only range: the selection
        # stays range, so no rebalance is needed.
        assert task.done() and env.state() == "Stable"
        other = env.join("", instance="i-a", protos=protocols(names=("range", "roundrobin")))
        await env.settle()
        assert other.done() and env.state() == "Stable"
        changed = env.join("", instance="i-a", protos=protocols(names=("roundrobin",)))
        await env.settle()
        assert not changed.done() and env.state() == "PreparingRebalance"
    run(body)


def test_a_static_member_rejoining_while_completing_restarts_the_rebalance_and_fences_the_old_join():
    async def body(env):
        a = env.join("", instance="i-a")
        b = env.join("", instance="i-b")
        await env.finish_join(a, b)
        assert env.state() == "CompletingRebalance"
        old_b = b.result().member_id
        again = env.join("", instance="i-b")
        await env.settle()
        assert env.state() == "PreparingRebalance"
        assert (await env.sync_now(old_b, 1, instance="i-b")).error is Errors.FENCED_INSTANCE_ID
        assert not again.done()
    run(body)


def test_a_static_member_that_does_not_come_back_within_its_session_is_removed():
    async def body(env):
        generation, ids = await static_group(env)
        await env.advance(SESSION_MS - 1)
        assert await env.gc.heartbeat(G, generation, ids["i-a"], "i-a") is Errors.NONE
        await env.advance(1)  # i-b's session ends
        assert env.state() == "PreparingRebalance"
        assert [m.group_instance_id for m in env.gc.describe_groups([G])[0].members] == ["i-a"]
        assert await env.gc.heartbeat(G, generation, ids["i-b"], "i-b") is Errors.UNKNOWN_MEMBER_ID
    run(body)


def test_leave_group_by_instance_id_and_its_fencing():
    async def body(env):
        generation, ids = await static_group(env)
        results = await env.gc.leave_group(G, [("", "i-a"), ("someone-else", "i-b"), ("", "i-zzz")])
        assert [(r.member_id, r.group_instance_id, r.error) for r in results] == [
            ("", "i-a", Errors.NONE),
            ("someone-else", "i-b", Errors.FENCED_INSTANCE_ID),
            ("", "i-zzz", Errors.UNKNOWN_MEMBER_ID)]
        assert env.state() == "PreparingRebalance"
        assert [m.group_instance_id for m in env.gc.describe_groups([G])[0].members] == ["i-b"]
        left = await env.gc.leave_group(G, [(ids["i-b"], "i-b")])
        assert left[0].error is Errors.NONE
        await env.settle()
        assert env.state() == "Empty"
    run(body)


def test_static_members_that_do_not_rejoin_stay_through_the_join_phase():
    async def body(env):
        generation, ids = await static_group(env)
        leader = env.gc._store.classic_groups[G].leader_id
        leader_instance = next(i for i, m in ids.items() if m == leader)
        other_instance = next(i for i in ids if i != leader_instance)
        rejoin = env.join(leader, instance=leader_instance)
        await env.settle()
        await env.advance(SESSION_MS - 1)
        await env.gc.heartbeat(G, generation, ids[other_instance], other_instance)
        await env.advance(DELAY_MS)  # keep i-b alive through its session...
        await env.gc.heartbeat(G, generation, ids[other_instance], other_instance)
        await env.advance(20_000 - SESSION_MS - DELAY_MS + 1)  # ...until the rebalance timeout
        result = rejoin.result()
        # The static member that did not rejoin is kept (with its old metadata) for the leader to assign.
        assert sorted(m.group_instance_id for m in result.members) == ["i-a", "i-b"]
        assert result.generation_id == generation + 1
    run(body)


def test_when_no_member_rejoins_the_join_phase_waits_again_and_the_leader_stays():
    async def body(env):
        generation, ids = await static_group(env)
        leader = env.gc._store.classic_groups[G].leader_id
        newcomer = env.join(await env.new_member())
        await env.settle()
        assert env.state() == "PreparingRebalance"
        joined = newcomer  # it leaves again before the phase ends: now nobody is waiting in the phase
        await env.gc.leave_group(G, [(m.member_id, None) for m in env.gc.describe_groups([G])[0].members
                                     if m.group_instance_id is None])
        await env.settle()
        assert joined.result().error is Errors.UNKNOWN_MEMBER_ID
        for _ in range(3):  # the static members stay alive (heartbeats) but do not rejoin
            await env.advance(7_000)
            for instance, member_id in ids.items():
                assert await env.gc.heartbeat(G, generation, member_id, instance) is Errors.REBALANCE_IN_PROGRESS
        assert env.state() == "PreparingRebalance"
        assert env.gc._store.classic_groups[G].leader_id == leader
    run(body)


def test_fenced_static_group_a_static_member_replaced_while_rebalancing_completes_the_join_at_the_next_generation():
    """Kafka's JoinGroupRequestTest.testFencedStaticGroup: the leader rejoins (PreparingRebalance), a
    new process of the static follower joins with an unknown member id and the same instance id: it
    replaces the old member, the join phase completes at once at the next generation, and the old
    member id is fenced."""
    async def body(env):
        generation, ids = await static_group(env)
        leader = env.gc._store.classic_groups[G].leader_id
        leader_instance = next(i for i, m in ids.items() if m == leader)
        follower_instance = next(i for i in ids if i != leader_instance)
        old_follower = ids[follower_instance]
        rejoin = env.join(leader, instance=leader_instance)
        await env.settle()
        assert env.state() == "PreparingRebalance" and not rejoin.done()
        new_follower = env.join("", instance=follower_instance)
        await env.settle()
        assert new_follower.done() and rejoin.done(), "the join phase completes once every member rejoined"
        assert env.state() == "CompletingRebalance"
        joined, led = new_follower.result(), rejoin.result()
        assert joined.error is Errors.NONE and joined.member_id not in (old_follower, leader)
        assert (joined.generation_id, joined.leader, joined.members) == (generation + 1, leader, ())
        assert (led.error, led.generation_id, led.leader) == (Errors.NONE, generation + 1, leader)
        assert sorted((m.member_id, m.group_instance_id) for m in led.members) == sorted(
            [(leader, leader_instance), (joined.member_id, follower_instance)])
        fenced = await env.join_now(old_follower, instance=follower_instance)
        assert (fenced.error, fenced.member_id) == (Errors.FENCED_INSTANCE_ID, old_follower)
        assert env.state() == "CompletingRebalance"
    run(body)
