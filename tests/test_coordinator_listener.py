"""The GroupListener of the group coordinator: every membership and share-partition state event reaches
it with exact arguments, after the coordinator's own state changed and outside the group lock; a
listener that raises is logged and leaves the coordinator intact."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError
from sharegroup.coordinator import GroupConfig, GroupCoordinator, GroupListener, InMemoryTopics

A = uuid.UUID(int=0xA1)
B = uuid.UUID(int=0xB2)
UNKNOWN = uuid.UUID(int=0xFF)
G, H = "group-1", "group-2"
M1, M2 = "member-1", "member-2"
SESSION_MS = 45_000


def run(coro):
    return asyncio.run(coro)


class Recorder:
    """A listener that records its calls and, when told, checks the coordinator state at call time."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.seen_groups: list[list[str]] = []
        self.gc: GroupCoordinator | None = None
        self.fail = False

    async def _record(self, *call) -> None:
        self.calls.append(call)
        if self.gc is not None:
            self.seen_groups.append(self.gc.group_ids)
        if self.fail:
            raise RuntimeError("listener broke")

    async def on_member_left(self, group_id, member_id):
        await self._record("on_member_left", group_id, member_id)

    async def on_group_deleted(self, group_id):
        await self._record("on_group_deleted", group_id)

    async def on_offsets_deleted(self, group_id, topic_ids):
        await self._record("on_offsets_deleted", group_id, topic_ids)


class Env:
    def __init__(self, listener) -> None:
        self.clock = ManualClock(10_000)
        self.topics = InMemoryTopics()
        self.topics.create_topic("a", 2, A)
        self.topics.create_topic("b", 1, B)
        self.persister = InMemoryPersister(clock=self.clock)
        self.listener = listener
        self.gc = GroupCoordinator(
            persister=self.persister,
            topics=self.topics,
            clock=self.clock,
            config=GroupConfig(assignment_interval_ms=0, session_timeout_ms=SESSION_MS),
            listener=listener,
        )

    async def hb(self, member_id, epoch, topics=None, group=G):
        return await self.gc.share_group_heartbeat(group, member_id, epoch, topics)


def test_the_listener_protocol_has_the_names_the_manager_codes_against():
    assert isinstance(Recorder(), GroupListener)
    with pytest.raises(TypeError):
        GroupCoordinator(persister=InMemoryPersister(), topics=InMemoryTopics(), listener=object())


def test_leave_calls_on_member_left_after_the_member_is_gone():
    async def main():
        rec = Recorder()
        e = Env(rec)
        rec.gc = e.gc
        await e.hb(M1, 0, ["a"])
        await e.hb(M2, 0, ["a"])
        assert rec.calls == []
        result = await e.hb(M1, -1)
        assert result.member_epoch == -1
        assert rec.calls == [("on_member_left", G, M1)]
        assert [m.member_id for m in e.gc.describe_group(G).members] == [M2]
        e.gc._check(replay=True)

    run(main())


def test_expire_members_calls_on_member_left_for_each_expired_member():
    async def main():
        rec = Recorder()
        e = Env(rec)
        await e.hb(M1, 0, ["a"])
        await e.hb(M2, 0, ["a"], group=H)
        e.clock.advance(SESSION_MS - 1)
        assert await e.gc.expire_members() == [] and rec.calls == []
        e.clock.advance(1)
        assert await e.gc.expire_members() == [M1, M2]
        assert rec.calls == [("on_member_left", G, M1), ("on_member_left", H, M2)]

    run(main())


def test_a_session_expiry_found_by_another_call_is_reported_even_when_that_call_fails():
    async def main():
        rec = Recorder()
        e = Env(rec)
        r1 = await e.hb(M1, 0, ["a"])
        e.clock.advance(SESSION_MS)
        with pytest.raises(ShareError) as info:
            await e.hb(M1, r1.member_epoch)  # expired first, then unknown
        assert info.value.error is Errors.UNKNOWN_MEMBER_ID
        assert rec.calls == [("on_member_left", G, M1)]

    run(main())


def test_delete_group_calls_on_group_deleted_once_the_group_is_gone():
    async def main():
        rec = Recorder()
        e = Env(rec)
        rec.gc = e.gc
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        await e.gc.delete_group(G)
        assert rec.calls == [("on_member_left", G, M1), ("on_group_deleted", G)]
        assert rec.seen_groups[-1] == []  # the group was already gone when the listener heard of it
        assert e.persister.state_of(G, A, 0) is None

    run(main())


def test_refused_and_failed_operations_call_nothing():
    async def main():
        rec = Recorder()
        e = Env(rec)
        await e.hb(M1, 0, ["a"])
        for call in (e.gc.delete_group(G), e.gc.delete_offsets(G, [A]), e.gc.alter_offsets(G, {A: {0: 5}})):
            with pytest.raises(ShareError) as info:
                await call
            assert info.value.error is Errors.GROUP_NOT_EMPTY
        await e.hb(M1, -1)
        rec.calls.clear()
        assert await e.gc.delete_offsets(G, [UNKNOWN]) == {UNKNOWN: Errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert await e.gc.alter_offsets(G, {UNKNOWN: {0: 1}}) == {UNKNOWN: {0: Errors.UNKNOWN_TOPIC_OR_PARTITION}}
        assert rec.calls == []

    run(main())


def test_delete_offsets_calls_on_offsets_deleted_with_the_topics_that_held_state():
    async def main():
        rec = Recorder()
        e = Env(rec)
        await e.hb(M1, 0, ["a", "b"])
        await e.hb(M1, -1)
        rec.calls.clear()
        assert await e.gc.delete_offsets(G, [B, UNKNOWN, A]) == {
            B: Errors.NONE, UNKNOWN: Errors.UNKNOWN_TOPIC_OR_PARTITION, A: Errors.NONE}
        assert rec.calls == [("on_offsets_deleted", G, [B, A])]
        assert e.persister.state_of(G, A, 0) is None and e.persister.state_of(G, B, 0) is None

    run(main())


def test_delete_offsets_reports_a_topic_whose_persister_call_failed():
    class FailingDeletes(InMemoryPersister):
        async def delete_state(self, group_id, topic_id, partition):
            if topic_id == A:
                raise ShareError(Errors.INVALID_REQUEST, "refused")
            await super().delete_state(group_id, topic_id, partition)

    async def main():
        rec = Recorder()
        e = Env(rec)
        e.persister = FailingDeletes(clock=e.clock)
        e.gc._lifecycle.persister = e.persister
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        rec.calls.clear()
        assert await e.gc.delete_offsets(G, [A]) == {A: Errors.INVALID_REQUEST}
        assert rec.calls == [("on_offsets_deleted", G, [A])]  # A is no longer initialized: it is deleting

    run(main())


def test_alter_offsets_calls_on_offsets_deleted_with_the_reset_topics():
    async def main():
        rec = Recorder()
        e = Env(rec)
        await e.hb(M1, 0, ["a"])
        await e.hb(M1, -1)
        rec.calls.clear()
        results = await e.gc.alter_offsets(G, {A: {0: 7, 5: 1}, UNKNOWN: {0: 1}, B: {0: 3}})
        assert results == {A: {0: Errors.NONE, 5: Errors.UNKNOWN_TOPIC_OR_PARTITION},
                           UNKNOWN: {0: Errors.UNKNOWN_TOPIC_OR_PARTITION}, B: {0: Errors.NONE}}
        assert rec.calls == [("on_offsets_deleted", G, [A, B])]
        assert e.persister.state_of(G, A, 0).start_offset == 7
        assert e.persister.state_of(G, B, 0).start_offset == 3

    run(main())


def test_a_listener_that_raises_is_logged_and_the_coordinator_stays_intact(caplog):
    async def main():
        rec = Recorder()
        rec.fail = True
        e = Env(rec)
        await e.hb(M1, 0, ["a"])
        r2 = await e.hb(M2, 0, ["a"])
        with caplog.at_level(logging.ERROR, logger="sharegroup.coordinator"):
            assert (await e.hb(M1, -1)).member_epoch == -1
        assert "on_member_left" in caplog.text and "listener broke" in caplog.text
        e.gc._check(replay=True)
        assert [m.member_id for m in e.gc.describe_group(G).members] == [M2]
        # Every later event is still delivered (and fails again, harmlessly).
        e.clock.advance(SESSION_MS)
        assert await e.gc.expire_members() == [M2]
        await e.gc.alter_offsets(G, {A: {0: 4}})
        await e.gc.delete_offsets(G, [A])
        await e.gc.delete_group(G)
        assert rec.calls == [("on_member_left", G, M1), ("on_member_left", G, M2),
                             ("on_offsets_deleted", G, [A]), ("on_offsets_deleted", G, [A]),
                             ("on_group_deleted", G)]
        assert e.gc.group_ids == [] and r2.member_id == M2
        e.gc._check(replay=True)

    run(main())


def test_the_listener_runs_outside_the_group_lock():
    """A listener may call back into the coordinator for the same group without deadlocking."""

    class Rejoining(Recorder):
        async def on_member_left(self, group_id, member_id):
            await super().on_member_left(group_id, member_id)
            self.rejoined = await self.gc.share_group_heartbeat(group_id, member_id, 0, ["a"])

    async def main():
        rec = Rejoining()
        e = Env(rec)
        rec.gc = e.gc
        await e.hb(M1, 0, ["a"])
        await asyncio.wait_for(e.hb(M1, -1), timeout=5)
        assert rec.calls == [("on_member_left", G, M1)]
        assert rec.rejoined.member_id == M1 and [m.member_id for m in e.gc.describe_group(G).members] == [M1]
        e.gc._check(replay=True)

    run(main())
