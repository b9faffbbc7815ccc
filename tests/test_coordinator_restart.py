"""Restart: a coordinator rebuilt from the record sink has the same groups, members, epochs, target
assignments and share-partition metadata; members get fresh sessions and carry on with their epochs."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError
from sharegroup.coordinator import GroupConfig, GroupCoordinator, InMemoryTopics, MemoryRecordSink, Record
from sharegroup.coordinator.share.records import ShareGroupMetadataKey, ShareGroupMetadataValue

A = uuid.UUID(int=0xA1)
B = uuid.UUID(int=0xB2)


def run(coro):
    return asyncio.run(coro)


def world():
    clock = ManualClock(5_000)
    topics = InMemoryTopics()
    topics.create_topic("a", 3, A)
    topics.create_topic("b", 2, B)
    return clock, topics, InMemoryPersister(clock=clock), MemoryRecordSink()


async def busy_coordinator(clock, topics, persister, sink):
    """Several groups in every lifecycle stage: members, leaves, an expiry, a resize, altered and
    deleted offsets, a deleted group."""
    gc = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink, config=GroupConfig())
    await gc.load()
    hb = gc.share_group_heartbeat
    r1 = await hb("orders", "m1", 0, ["a"], client_id="c1", client_host="/h1", rack_id="r1")
    r2 = await hb("orders", "m2", 0, ["a", "b"])
    await hb("orders", "m3", 0, ["b"])
    clock.advance(1_000)
    r1 = await hb("orders", "m1", r1.member_epoch)
    r2 = await hb("orders", "m2", r2.member_epoch)
    topics.set_partitions("a", 4)
    clock.advance(1_000)
    r1 = await hb("orders", "m1", r1.member_epoch)
    await hb("orders", "m3", -1)
    # "audit" goes quiet: its member expires; then offsets are altered and one topic deleted.
    await hb("audit", "x1", 0, ["a", "b"])
    clock.advance(30_000)
    r1 = await hb("orders", "m1", r1.member_epoch)
    r2 = await hb("orders", "m2", r2.member_epoch)
    clock.advance(15_000)
    assert await gc.expire_members() == ["x1"]
    assert await gc.alter_offsets("audit", {A: {0: 11}}) == {A: {0: Errors.NONE}}
    assert await gc.delete_offsets("audit", [B]) == {B: Errors.NONE}
    await hb("gone", "y1", 0, ["a"])
    await hb("gone", "y1", -1)
    await gc.delete_group("gone")
    gc._check(replay=True)
    return gc, {"m1": r1.member_epoch, "m2": r2.member_epoch}


def test_restart_rebuilds_the_same_groups_members_and_partition_metadata():
    async def main():
        clock, topics, persister, sink = world()
        gc, epochs = await busy_coordinator(clock, topics, persister, sink)
        clock.advance(100)
        restarted = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        await restarted.load()
        assert restarted._dump() == gc._dump()
        assert restarted.group_ids == ["audit", "orders"]
        for group_id in restarted.group_ids:
            assert restarted.describe_group(group_id) == gc.describe_group(group_id)
        assert await restarted.describe_offsets("audit") == await gc.describe_offsets("audit")
        restarted._check(replay=True)
        # Members carry on with the epochs they had; the first response after a restart carries the
        # assignment again (the coordinator cannot know what the member last received).
        r = await restarted.share_group_heartbeat("orders", "m1", epochs["m1"])
        assert r.member_epoch == epochs["m1"] and r.assignment == gc.describe_group("orders").members[0].assignment
        assert (await restarted.share_group_heartbeat("orders", "m1", epochs["m1"])).assignment is None

    run(main())


def test_sessions_restart_from_the_load():
    async def main():
        clock, topics, persister, sink = world()
        gc, epochs = await busy_coordinator(clock, topics, persister, sink)
        clock.advance(44_000)  # close to timing out before the restart
        restarted = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        await restarted.load()
        clock.advance(44_999)
        assert await restarted.expire_members() == []
        clock.advance(1)
        assert sorted(await restarted.expire_members()) == ["m1", "m2"]
        restarted._check(replay=True)

    run(main())


def test_a_restarted_coordinator_keeps_working_and_restarts_again():
    async def main():
        clock, topics, persister, sink = world()
        gc, epochs = await busy_coordinator(clock, topics, persister, sink)
        second = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        await second.load()
        r = await second.share_group_heartbeat("orders", "m4", 0, ["b"])
        clock.advance(1_000)
        await second.share_group_heartbeat("orders", "m4", r.member_epoch)
        await second.share_group_heartbeat("audit", "x2", 0, ["a"])
        third = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        await third.load()
        assert third._dump() == second._dump()
        await second.load()  # loading again rebuilds from scratch
        assert second._dump() == third._dump()

    run(main())


def test_load_refuses_records_that_do_not_fit():
    async def main():
        clock, topics, persister, sink = world()
        await sink.append([Record(ShareGroupMetadataKey("g"), ShareGroupMetadataValue(1, 0))])
        await sink.append([Record("not a key", None)])
        gc = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        with pytest.raises(ValueError, match="#1"):
            await gc.load()
        with pytest.raises(ShareError) as info:
            gc.describe_group("g")
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS, "a failed load serves nothing"

    run(main())


def test_load_refuses_a_value_of_the_wrong_kind():
    async def main():
        clock, topics, persister, sink = world()
        await sink.append([Record(ShareGroupMetadataKey("g"), ("epoch", 1))])
        gc = GroupCoordinator(persister=persister, topics=topics, clock=clock, record_sink=sink)
        with pytest.raises(ValueError):
            await gc.load()

    run(main())
