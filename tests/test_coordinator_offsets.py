"""Committed offsets in the coordinator: OffsetCommit member checks per group type, simple groups,
OffsetFetch, OffsetDelete, retention, and durability through the record sink."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup import Errors, ShareError
from sharegroup.coordinator.classic.records import OffsetCommitKey, OffsetCommitValue
from sharegroup.coordinator.classic.responses import CommittedOffset
from sharegroup.coordinator.offsets import CommitRequest, OffsetHooks
from tests.classic_env import SESSION_MS, G, ClassicEnv, protocols

T = "t"


def run(coro_fn, **config):
    async def main():
        env = await ClassicEnv(**config).start()
        await coro_fn(env)
        env.gc._check(replay=True)
    asyncio.run(main())


def commits(*offsets: int, metadata: str = "m") -> list[CommitRequest]:
    return [CommitRequest(T, p, offset, 7, metadata) for p, offset in enumerate(offsets)]


def test_a_simple_commit_creates_a_simple_group_and_fetch_returns_it():
    async def body(env):
        results = await env.gc.offset_commit("simple", -1, "", commits(10, 20))
        assert results == {(T, 0): Errors.NONE, (T, 1): Errors.NONE}
        assert env.gc.group_type("simple") == "classic"
        assert [(g.group_id, g.protocol_type, g.state) for g in env.gc.list_groups()] == [("simple", "", "Empty")]
        fetched = await env.gc.offset_fetch("simple", [(T, 0), (T, 1), (T, 2), ("other", 0)])
        assert fetched == {(T, 0): CommittedOffset(10, 7, "m"), (T, 1): CommittedOffset(20, 7, "m"),
                           (T, 2): CommittedOffset(-1, -1, ""), ("other", 0): CommittedOffset(-1, -1, "")}
        assert list(await env.gc.offset_fetch("simple")) == [(T, 0), (T, 1)]
        record = env.sink.read_all()[-1]
        assert record == (OffsetCommitKey("simple", T, 1), OffsetCommitValue(20, 7, "m", env.clock.now_ms(), -1))
    run(body)


def test_commits_to_a_missing_group_with_a_generation_are_refused_by_version():
    async def body(env):
        for version, error in ((9, Errors.GROUP_ID_NOT_FOUND), (8, Errors.ILLEGAL_GENERATION)):
            with pytest.raises(ShareError) as info:
                await env.gc.offset_commit("nope", 3, "member", commits(1), api_version=version)
            assert info.value.error is error
        assert env.gc.group_type("nope") is None and len(env.sink) == 0
        fetched = await env.gc.offset_fetch("nope", [(T, 0)])
        assert fetched == {(T, 0): CommittedOffset(-1, -1, "")}
        assert await env.gc.offset_fetch("nope") == {}
    run(body)


def test_members_of_a_stable_group_commit_with_their_generation():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        assert await env.gc.offset_commit(G, generation, follower, commits(5)) == {(T, 0): Errors.NONE}
        cases = [
            (generation + 1, follower, None, Errors.ILLEGAL_GENERATION),
            (generation, "stranger", None, Errors.UNKNOWN_MEMBER_ID),
            (-1, "", None, Errors.UNKNOWN_MEMBER_ID),  # a simple commit to a group with members
        ]
        for gen, member, instance, error in cases:
            with pytest.raises(ShareError) as info:
                await env.gc.offset_commit(G, gen, member, commits(99), group_instance_id=instance)
            assert info.value.error is error, (gen, member)
        assert (await env.gc.offset_fetch(G, [(T, 0)]))[(T, 0)].offset == 5
    run(body)


def test_commits_during_a_rebalance():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        env.join(leader)
        await env.settle()
        # PreparingRebalance: the current generation may still commit (Kafka lets it).
        assert await env.gc.offset_commit(G, generation, follower, commits(6)) == {(T, 0): Errors.NONE}
        env.join(follower)
        await env.settle()
        assert env.state() == "CompletingRebalance"
        with pytest.raises(ShareError) as info:
            await env.gc.offset_commit(G, generation + 1, follower, commits(7))
        assert info.value.error is Errors.REBALANCE_IN_PROGRESS
    run(body)


def test_a_fenced_static_member_cannot_commit():
    async def body(env):
        generation, _ = await env.stable_group(2, instances=["i-a", "i-b"])
        old = {m.group_instance_id: m.member_id for m in env.gc.describe_groups([G])[0].members}["i-b"]
        await env.join_now("", instance="i-b")
        with pytest.raises(ShareError) as info:
            await env.gc.offset_commit(G, generation, old, commits(1), group_instance_id="i-b")
        assert info.value.error is Errors.FENCED_INSTANCE_ID
    run(body)


def test_metadata_longer_than_the_limit_is_refused_per_partition():
    async def body(env):
        results = await env.gc.offset_commit("g2", -1, "", [CommitRequest(T, 0, 1, -1, "x" * 11),
                                                            CommitRequest(T, 1, 2, -1, "x" * 10)])
        assert results == {(T, 0): Errors.OFFSET_METADATA_TOO_LARGE, (T, 1): Errors.NONE}
        assert await env.gc.offset_fetch("g2") == {(T, 1): CommittedOffset(2, -1, "x" * 10)}
    run(body, offset_metadata_max_bytes=10)


def test_offsets_of_share_groups_are_refused():
    async def body(env):
        await env.gc.share_group_heartbeat("sg", "m" * 22, 0, [T])
        with pytest.raises(ShareError) as info:
            await env.gc.offset_commit("sg", -1, "", commits(1))
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
        assert await env.gc.offset_fetch("sg", [(T, 0)]) == {(T, 0): CommittedOffset(-1, -1, "")}
    run(body)


def test_offset_delete_refuses_subscribed_topics_and_non_empty_other_protocols():
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        await env.gc.offset_commit(G, generation, leader, [CommitRequest(T, 0, 1), CommitRequest("old", 0, 2)])
        results = await env.gc.offset_delete(G, [(T, 0), ("old", 0), ("never", 3)])
        assert results == {(T, 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): Errors.NONE, ("never", 3): Errors.NONE}
        assert await env.gc.offset_fetch(G) == {(T, 0): CommittedOffset(1, -1, "")}
        with pytest.raises(ShareError) as info:
            await env.gc.offset_delete("missing", [(T, 0)])
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
    run(body)


def test_offset_delete_of_a_non_consumer_group_with_members_is_group_not_empty():
    async def body(env):
        task = env.join("", group="cg2", protocol_type="connect", require_known=False)
        await env.finish_join(task)
        with pytest.raises(ShareError) as info:
            await env.gc.offset_delete("cg2", [(T, 0)])
        assert info.value.error is Errors.GROUP_NOT_EMPTY
    run(body)


def test_offsets_survive_a_restart_and_deleting_the_group_deletes_them():
    async def main():
        env = await ClassicEnv().start()
        await env.gc.offset_commit("simple", -1, "", commits(10, 20))
        await env.gc.offset_delete("simple", [(T, 1)])
        restarted = await ClassicEnv(sink=env.sink, clock=env.clock).start()
        assert await restarted.gc.offset_fetch("simple") == {(T, 0): CommittedOffset(10, 7, "m")}
        assert restarted.gc.group_type("simple") == "classic"
        await restarted.gc.delete_group("simple")
        assert await restarted.gc.offset_fetch("simple") == {}
        again = await ClassicEnv(sink=env.sink, clock=env.clock).start()
        assert again.gc.list_groups() == [] and again.gc._store.offsets == {}
        again.gc._check(replay=True)
    asyncio.run(main())


def test_retention_expires_offsets_of_simple_and_empty_groups_and_deletes_the_groups():
    async def body(env):
        retention_ms = 60_000
        await env.gc.offset_commit("simple", -1, "", commits(1))
        generation, (leader,) = await env.stable_group(1)
        await env.gc.offset_commit(G, generation, leader, commits(5))
        env.clock.advance(retention_ms)  # (timers are not run: the member's session does not end)
        assert await env.gc.expire_offsets() == 1  # the simple group's; G is Stable and subscribed to t
        assert env.gc.group_type("simple") is None
        await env.gc.leave_group(G, [(leader, None)])
        assert env.state() == "Empty"
        env.clock.advance(retention_ms - 1)
        assert await env.gc.expire_offsets() == 0
        env.clock.advance(1)
        assert await env.gc.expire_offsets() == 1
        assert env.gc.group_type(G) is None
    run(body, offsets_retention_minutes=1)


def test_an_explicit_retention_time_of_old_commit_versions_wins():
    async def body(env):
        await env.gc.offset_commit("simple", -1, "", commits(1), api_version=2, retention_ms=1_000)
        env.clock.advance(1_000)
        assert await env.gc.expire_offsets() == 1
    run(body)


def test_other_group_types_register_their_own_commit_checks():
    async def body(env):
        checked = []

        def validate_commit(group_id, member_id, instance_id, epoch, version):
            checked.append((group_id, member_id, epoch))
            if epoch != 4:
                raise ShareError(Errors.STALE_MEMBER_EPOCH, "stale")

        env.gc.offsets.register("share", OffsetHooks(
            validate_commit=validate_commit, validate_fetch=lambda *a: None, validate_delete=lambda g: None,
            subscribed_topics=lambda g: set(), expiration_base=lambda g: None, is_empty=lambda g: False))
        await env.gc.share_group_heartbeat("sg", "m" * 22, 0, [T])
        with pytest.raises(ShareError) as info:
            await env.gc.offset_commit("sg", 3, "m" * 22, commits(1))
        assert info.value.error is Errors.STALE_MEMBER_EPOCH
        assert await env.gc.offset_commit("sg", 4, "m" * 22, commits(8)) == {(T, 0): Errors.NONE}
        assert checked == [("sg", "m" * 22, 3), ("sg", "m" * 22, 4)]
        assert (await env.gc.offset_fetch("sg", [(T, 0)]))[(T, 0)].offset == 8
    run(body)


def test_malformed_offset_requests_are_invalid_request():
    async def body(env):
        for bad in ([("t", 0, 1)], [CommitRequest(T, "0", 1)], [CommitRequest(T, 0, 1, -1, 5)]):
            with pytest.raises(ShareError) as info:
                await env.gc.offset_commit("g", -1, "", bad)
            assert info.value.error is Errors.INVALID_REQUEST
        with pytest.raises(ShareError) as info:
            await env.gc.offset_commit("", -1, "", commits(1))
        assert info.value.error is Errors.INVALID_GROUP_ID
        for call in (env.gc.offset_fetch("g", [("t", "0")]), env.gc.offset_delete("g", [("t",)])):
            with pytest.raises(ShareError) as info:
                await call
            assert info.value.error is Errors.INVALID_REQUEST
        assert len(env.sink) == 0
    run(body)


def test_deleting_a_topic_deletes_its_committed_offsets_in_every_group():
    async def body(env):
        await env.gc.offset_commit("a", -1, "", commits(1, 2))
        await env.gc.offset_commit("b", -1, "", [CommitRequest(T, 0, 3), CommitRequest("keep", 0, 4)])
        assert await env.gc.delete_topic_offsets(T) == 3
        assert await env.gc.offset_fetch("a") == {}
        assert await env.gc.offset_fetch("b") == {("keep", 0): CommittedOffset(4, -1, "")}
    run(body)


def test_metadata_length_counts_utf16_code_units_as_kafka_does():
    # Kafka compares Java's String.length() (UTF-16 code units) with offset.metadata.max.bytes, not the
    # UTF-8 size: ten "é" (20 UTF-8 bytes) fit a limit of 10, five emoji (surrogate pairs) too, six do not.
    async def body(env):
        results = await env.gc.offset_commit("g2", -1, "", [CommitRequest(T, 0, 1, -1, "é" * 10),
                                                            CommitRequest(T, 1, 2, -1, "\U0001F600" * 5),
                                                            CommitRequest(T, 2, 3, -1, "\U0001F600" * 6),
                                                            CommitRequest(T, 3, 4, -1, "é" * 11)])
        assert results == {(T, 0): Errors.NONE, (T, 1): Errors.NONE,
                           (T, 2): Errors.OFFSET_METADATA_TOO_LARGE, (T, 3): Errors.OFFSET_METADATA_TOO_LARGE}
        assert await env.gc.offset_fetch("g2") == {(T, 0): CommittedOffset(1, -1, "é" * 10),
                                                   (T, 1): CommittedOffset(2, -1, "\U0001F600" * 5)}
    run(body, offset_metadata_max_bytes=10)


def test_a_commit_with_generation_minus_one_creates_a_simple_group_whatever_the_member_id():
    # Kafka creates the simple group for any negative generation; the Empty group then accepts the commit.
    async def body(env):
        assert await env.gc.offset_commit("s1", -1, "consumer-1", commits(3)) == {(T, 0): Errors.NONE}
        assert await env.gc.offset_commit("s2", -1, "", commits(4), group_instance_id="i-1",
                                          api_version=8) == {(T, 0): Errors.NONE}
        assert (env.gc.group_type("s1"), env.gc.group_type("s2")) == ("classic", "classic")
        assert (await env.gc.offset_fetch("s1", [(T, 0)]))[(T, 0)].offset == 3
        assert (await env.gc.offset_fetch("s2", [(T, 0)]))[(T, 0)].offset == 4
    run(body)


def test_an_offset_commit_keeps_a_classic_members_session_alive():
    # Kafka reschedules the member's session on a commit while the group is Stable or PreparingRebalance.
    async def body(env):
        generation, (leader, follower) = await env.stable_group(2)
        await env.advance(SESSION_MS - 1)
        assert await env.gc.heartbeat(G, generation, leader) is Errors.NONE
        assert await env.gc.offset_commit(G, generation, follower, commits(5)) == {(T, 0): Errors.NONE}
        await env.advance(1)  # the follower's session would end here without the commit
        assert env.state() == "Stable"
        assert await env.gc.heartbeat(G, generation, follower) is Errors.NONE
    run(body)


def test_list_groups_state_filter_is_trimmed_and_case_insensitive():
    async def body(env):
        await env.gc.offset_commit("simple", -1, "", commits(1))
        assert [g.group_id for g in env.gc.list_groups(states=[" EMPTY "])] == ["simple"]
        assert env.gc.list_groups(states=["stable"]) == []
    run(body)


def test_delete_groups_deletes_a_classic_group_with_a_blank_id():
    # Kafka allows blank group ids for classic groups (only null or "" are INVALID_GROUP_ID there) and
    # DeleteGroups looks up any non-null id: such a group can be deleted like any other.
    async def body(env):
        await env.gc.offset_commit(" ", -1, "", commits(1))
        assert env.gc.group_type(" ") == "classic"
        await env.gc.delete_group(" ")
        assert env.gc.group_type(" ") is None and await env.gc.offset_fetch(" ") == {}
        with pytest.raises(ShareError) as info:
            await env.gc.delete_group(" ")
        assert info.value.error is Errors.GROUP_ID_NOT_FOUND
    run(body)
