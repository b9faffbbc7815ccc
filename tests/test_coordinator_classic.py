"""Classic groups in the coordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups):
Kafka's state machine, rebalance and session timeouts on a ManualClock, and the exact error codes."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import Errors, ShareError
from sharegroup.coordinator import MemoryRecordSink
from sharegroup.coordinator.classic.records import GroupMetadataKey
from tests.classic_env import DELAY_MS, G, REBALANCE_MS, SESSION_MS, ClassicEnv, protocols


def run(coro_fn):
    """Run an async test body on a fresh loop with a fresh ClassicEnv."""
    async def main():
        env = await ClassicEnv().start()
        await coro_fn(env)
    asyncio.run(main())


def test_first_join_requires_a_member_id_and_the_group_waits_for_the_initial_delay():
    async def body(env):
        member_id = await env.new_member()
        assert member_id.startswith("client-")
        assert env.state() == "Empty"  # a pending member is not a member yet
        task = env.join(member_id)
        await env.settle()
        assert env.state() == "PreparingRebalance" and not task.done()
        await env.advance(DELAY_MS - 1)
        assert not task.done()
        await env.advance(1)
        result = task.result()
        assert (result.error, result.member_id, result.generation_id, result.leader) == (
            Errors.NONE, member_id, 1, member_id)
        assert result.protocol_type == "consumer" and result.protocol_name == "range"
        assert [m.member_id for m in result.members] == [member_id]
        assert env.state() == "CompletingRebalance"
    run(body)


def test_old_join_versions_join_directly_without_member_id_required():
    async def body(env):
        task = env.join("", require_known=False)
        await env.settle()
        await env.advance(DELAY_MS)
        assert task.result().error is Errors.NONE and task.result().member_id.startswith("client-")
    run(body)


def test_initial_delay_extends_while_new_members_arrive_up_to_the_rebalance_timeout():
    async def body(env):
        first = env.join(await env.new_member())
        await env.settle()
        await env.advance(DELAY_MS - 1)
        second = env.join(await env.new_member())  # arrives within the delay: extends it
        await env.settle()
        await env.advance(1)
        assert not first.done() and not second.done()
        await env.advance(DELAY_MS)
        assert first.result().generation_id == second.result().generation_id == 1
        assert sorted(m.member_id for m in first.result().members) == sorted(
            [first.result().member_id, second.result().member_id])
        assert second.result().members == ()  # only the leader gets the members
    run(body)


def test_leader_sync_stores_the_generation_and_answers_every_member():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        assert generation == 1
        again = await env.sync_now(follower, generation)
        assert (again.error, again.assignment) == (Errors.NONE, follower.encode())
        records = [r for r in env.sink.read_all() if isinstance(r.key, GroupMetadataKey)]
        assert len(records) == 1
        value = records[0].value
        assert (value.generation, value.protocol, value.leader, value.protocol_type) == (1, "range", leader, "consumer")
        assert {m.member_id: m.assignment for m in value.members} == {leader: leader.encode(), follower: follower.encode()}
    run(body)


def test_follower_sync_waits_for_the_leader():
    async def body(env):
        leader, follower = await env.joined_pair()
        follower_sync = env.sync(follower, 1)
        await env.settle()
        assert not follower_sync.done()
        await env.sync_now(leader, 1, {follower: b"F"})
        assert follower_sync.result().assignment == b"F"
        assert env.state() == "Stable"
    run(body)


def test_sync_and_heartbeat_errors():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        assert (await env.sync_now(leader, generation + 1)).error is Errors.ILLEGAL_GENERATION
        assert (await env.sync_now("nobody", generation)).error is Errors.UNKNOWN_MEMBER_ID
        assert (await env.sync_now(leader, generation, group="missing")).error is Errors.UNKNOWN_MEMBER_ID
        inconsistent = await env.gc.sync_group(G, generation, leader, {}, protocol_name="roundrobin")
        assert inconsistent.error is Errors.INCONSISTENT_GROUP_PROTOCOL
        assert await env.gc.heartbeat(G, generation, leader) is Errors.NONE
        assert await env.gc.heartbeat(G, generation - 1, leader) is Errors.ILLEGAL_GENERATION
        assert await env.gc.heartbeat(G, generation, "nobody") is Errors.UNKNOWN_MEMBER_ID
        assert await env.gc.heartbeat("missing", generation, leader) is Errors.UNKNOWN_MEMBER_ID
        with pytest.raises(ShareError) as info:
            await env.gc.heartbeat("", generation, leader)
        assert info.value.error is Errors.INVALID_GROUP_ID
    run(body)


def test_a_new_member_makes_the_group_rebalance_and_heartbeats_say_so():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        newcomer = env.join(await env.new_member())
        await env.settle()
        assert env.state() == "PreparingRebalance"
        assert await env.gc.heartbeat(G, generation, follower) is Errors.REBALANCE_IN_PROGRESS
        assert (await env.sync_now(follower, generation)).error is Errors.REBALANCE_IN_PROGRESS
        rejoin = [env.join(leader), env.join(follower)]
        await env.settle()
        # Everyone rejoined: the join phase ends at once (no initial delay for a non-empty group).
        results = [t.result() for t in (*rejoin, newcomer)]
        assert {r.generation_id for r in results} == {generation + 1}
        assert env.state() == "CompletingRebalance"
    run(body)


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        rejoin = env.join(leader)  # the leader forces a rebalance; the follower never rejoins
        await env.settle()
        for _ in range(3):  # the follower stays alive (heartbeats) but never rejoins
            await env.advance((REBALANCE_MS - 1) // 3)
            assert await env.gc.heartbeat(G, generation, follower) is Errors.REBALANCE_IN_PROGRESS
        await env.advance((REBALANCE_MS - 1) % 3)
        assert not rejoin.done()
        await env.advance(1)
        result = rejoin.result()
        assert result.generation_id == generation + 1 and [m.member_id for m in result.members] == [leader]
        assert await env.gc.heartbeat(G, generation + 1, follower) is Errors.UNKNOWN_MEMBER_ID
    run(body)


def test_session_timeout_removes_a_silent_member_and_the_group_rebalances():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        await env.advance(SESSION_MS - 1)
        assert await env.gc.heartbeat(G, generation, leader) is Errors.NONE
        await env.advance(1)  # the follower's session ends
        assert env.state() == "PreparingRebalance"
        assert await env.gc.heartbeat(G, generation, follower) is Errors.UNKNOWN_MEMBER_ID
        assert await env.gc.heartbeat(G, generation, leader) is Errors.REBALANCE_IN_PROGRESS
    run(body)


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout():
    async def body(env):
        long_ms = REBALANCE_MS + 10_000  # sessions outlive the rebalance timeout: only SyncGroup is late
        leader, follower = await env.joined_pair(session_ms=long_ms)
        leader_sync = env.sync(leader, 1, {leader: b"L", follower: b"F"})
        await env.settle()
        assert leader_sync.result().error is Errors.NONE and env.state() == "Stable"
        await env.advance(REBALANCE_MS - 1)
        assert env.state() == "Stable"
        await env.advance(1)  # the follower's SyncGroup is overdue
        assert env.state() == "PreparingRebalance"
        described = env.gc.describe_groups([G])[0]
        assert [m.member_id for m in described.members] == [leader]
    run(body)


def test_the_last_member_leaving_empties_the_group_with_a_new_generation():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        left = await env.gc.leave_group(G, [(leader, None), (follower, None), ("ghost", None)])
        assert [(r.member_id, r.error) for r in left] == [
            (leader, Errors.NONE), (follower, Errors.NONE), ("ghost", Errors.UNKNOWN_MEMBER_ID)]
        assert env.state() == "Empty"
        record = env.sink.read_all()[-1]
        assert record.key == GroupMetadataKey(G) and record.value.generation == generation + 1
        assert record.value.members == () and record.value.protocol is None
        assert await env.gc.leave_group("missing", [("x", None)]) == [
            type(left[0])("x", None, Errors.UNKNOWN_MEMBER_ID)]
        env.gc._check(replay=True)
    run(body)


def test_a_leaving_member_answers_its_parked_join_and_the_phase_completes_without_it():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        leader_join = env.join(leader)
        await env.settle()
        await env.gc.leave_group(G, [(follower, None)])
        await env.settle()
        result = leader_join.result()
        assert result.generation_id == generation + 1 and [m.member_id for m in result.members] == [leader]
    run(body)


def test_join_refusals():
    async def body(env):
        assert (await env.join_now("", session_ms=5_999)).error is Errors.INVALID_SESSION_TIMEOUT
        assert (await env.join_now("", session_ms=1_800_001)).error is Errors.INVALID_SESSION_TIMEOUT
        assert (await env.join_now("made-up", group="nowhere")).error is Errors.UNKNOWN_MEMBER_ID
        assert (await env.join_now("", protocol_type="")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join_now("", protos=[])).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        generation, members = await env.stable_group(2)
        assert (await env.join_now("", protocol_type="connect")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        other = protocols(names=("roundrobin",))
        assert (await env.join_now("", protos=other)).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join_now("stranger")).error is Errors.UNKNOWN_MEMBER_ID
        assert env.state() == "Stable"  # no refusal moved the group
        with pytest.raises(ShareError) as info:
            await env.gc.join_group("", "", "consumer", protocols(), SESSION_MS)
        assert info.value.error is Errors.INVALID_GROUP_ID
    run(body)


def test_group_max_size_refuses_newcomers_but_not_members():
    async def main():
        env = await ClassicEnv(max_size=2).start()
        generation, (leader, follower) = await env.stable_group(2)
        refused = await env.join_now("")
        assert refused.error is Errors.GROUP_MAX_SIZE_REACHED
        assert (await env.join_now(follower)).generation_id == generation  # a member may rejoin
        env.gc._check()
    asyncio.run(main())


def test_protocol_selection_takes_the_common_protocol_most_members_prefer():
    async def body(env):
        a = await env.new_member()
        b = await env.new_member()
        c = await env.new_member()
        tasks = [env.join(a, protos=protocols(names=("range", "roundrobin"))),
                 env.join(b, protos=protocols(names=("roundrobin", "range"))),
                 env.join(c, protos=protocols(names=("roundrobin", "sticky", "range")))]
        await env.finish_join(*tasks)
        assert {t.result().protocol_name for t in tasks} == {"roundrobin"}
    run(body)


def test_known_follower_rejoin_in_stable_gets_the_current_generation_without_a_rebalance():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        result = await env.join_now(follower)
        assert (result.error, result.generation_id, result.members) == (Errors.NONE, generation, ())
        assert env.state() == "Stable"
    run(body)


def test_describe_groups_shows_state_protocol_and_members():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        described, missing = env.gc.describe_groups([G, "missing"])
        assert (described.error, described.state, described.protocol_type, described.protocol_data) == (
            Errors.NONE, "Stable", "consumer", "range")
        assert {m.member_id: m.assignment for m in described.members} == {
            leader: leader.encode(), follower: follower.encode()}
        assert all(m.client_id == "client" and m.metadata == protocols()[0][1] for m in described.members)
        assert (missing.error, missing.state) == (Errors.GROUP_ID_NOT_FOUND, "Dead")
        env.join(leader)
        await env.settle()
        preparing = env.gc.describe_groups([G])[0]
        assert (preparing.state, preparing.protocol_data) == ("PreparingRebalance", "")
        assert all(m.metadata == b"" and m.assignment == b"" for m in preparing.members)
    run(body)


def test_list_groups_lists_classic_and_share_groups_with_types_and_states():
    async def body(env):
        await env.stable_group(2)
        await env.gc.share_group_heartbeat("sg", "m" * 22, 0, ["t"])
        listed = env.gc.list_groups()
        assert [(g.group_id, g.group_type, g.protocol_type, g.state) for g in listed] == [
            (G, "classic", "consumer", "Stable"), ("sg", "share", "share", "Stable")]
        assert [g.group_id for g in env.gc.list_groups(types=["Classic"])] == [G]
        assert [g.group_id for g in env.gc.list_groups(states=["stable"], types=["share"])] == ["sg"]
        assert env.gc.list_groups(types=["consumer"]) == []
    run(body)


def test_group_types_clash_as_in_kafka():
    async def body(env):
        await env.gc.share_group_heartbeat("sg", "m" * 22, 0, ["t"])
        assert (await env.join_now("", group="sg")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        clash = await env.join_now("m" * 22, group="sg")  # Kafka answers the unknown member id ""
        assert (clash.error, clash.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")
        assert (await env.sync_now("m" * 22, 1, group="sg")).error is Errors.UNKNOWN_MEMBER_ID
        assert await env.gc.heartbeat("sg", 1, "m" * 22) is Errors.UNKNOWN_MEMBER_ID
        await env.stable_group(1)
        with pytest.raises(ShareError) as info:
            await env.gc.share_group_heartbeat(G, "", 0, ["t"])
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND and "not a share group" in info.value.message
        with pytest.raises(ShareError) as info:
            env.gc.describe_group(G)
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND and "not a share group" in info.value.message
        with pytest.raises(ShareError) as info:
            await env.gc.alter_offsets(G, {})
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND and env.gc.group_type(G) == "classic"
        assert env.gc.describe_groups(["sg"])[0].error is Errors.GROUP_ID_NOT_FOUND
    run(body)


def test_delete_group_needs_an_empty_group_and_removes_it():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        with pytest.raises(ShareError) as info:
            await env.gc.delete_group(G)
        assert info.value.error is Errors.GROUP_NOT_EMPTY
        await env.gc.leave_group(G, [(leader, None), (follower, None)])
        await env.gc.delete_group(G)
        assert env.gc.list_groups() == [] and env.gc.group_type(G) is None
        with pytest.raises(ShareError) as info:
            await env.gc.delete_group(G)
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
        env.gc._check(replay=True)
    run(body)


def test_a_failed_assignment_store_makes_the_members_rejoin():
    async def body(env):
        leader, follower = await env.joined_pair()
        follower_sync = env.sync(follower, 1)
        await env.settle()
        env.sink.fail_next_appends(1)
        leader_sync = env.sync(leader, 1, {leader: b"L", follower: b"F"})
        await env.settle()
        assert leader_sync.result().error is Errors.NOT_COORDINATOR
        assert follower_sync.result().error is Errors.NOT_COORDINATOR
        assert env.state() == "PreparingRebalance"
        assert not any(isinstance(r.key, GroupMetadataKey) for r in env.sink.read_all())
    run(body)


def test_a_restart_loads_a_stable_group_whose_members_keep_their_generation():
    async def main():
        env = await ClassicEnv().start()
        generation, (leader, follower) = await env.stable_group(2)
        restarted = await ClassicEnv(sink=env.sink, clock=env.clock).start()
        assert restarted.state() == "Stable"
        assert await restarted.gc.heartbeat(G, generation, follower) is Errors.NONE
        assert (await restarted.sync_now(follower, generation)).assignment == follower.encode()
        restarted.gc._check(replay=True)
        # The leader never heartbeats after the restart: its fresh session ends and the group rebalances.
        await restarted.advance(SESSION_MS - 1)
        assert await restarted.gc.heartbeat(G, generation, follower) is Errors.NONE
        await restarted.advance(1)
        assert restarted.state() == "PreparingRebalance"
    asyncio.run(main())


def test_a_pending_member_that_never_rejoins_expires():
    async def body(env):
        member_id = await env.new_member()
        await env.advance(SESSION_MS)
        assert (await env.join_now(member_id)).error is Errors.UNKNOWN_MEMBER_ID
    run(body)


def test_refusals_leave_a_memory_sink_untouched():
    async def main():
        sink = MemoryRecordSink()
        env = await ClassicEnv(sink=sink).start()
        await env.join_now("", session_ms=1)
        await env.join_now("ghost")
        assert len(sink) == 0
    asyncio.run(main())


def test_group_max_size_reached_answers_the_unknown_member_id():
    # Kafka answers GROUP_MAX_SIZE_REACHED with member id "" whatever member id the JoinGroup carried.
    async def main():
        env = await ClassicEnv(max_size=2).start()
        generation, members = await env.stable_group(2)
        refused = await env.join_now("ghost-1")
        assert (refused.error, refused.member_id) == (Errors.GROUP_MAX_SIZE_REACHED, "")
        assert env.state() == "Stable" and sorted(m.member_id for m in env.gc.describe_groups([G])[0].members) \
            == sorted(members)
        env.gc._check()
    asyncio.run(main())
