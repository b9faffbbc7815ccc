"""Random join / leave / heartbeat / timeout / subscription / topic-change / failure / restart sequences
against the GroupCoordinator and a model of its clients (hypothesis state machine, derandomized).

After every step: `_check()` (every invariant, including: assignments hold only subscribed, initialized
partitions; a current target covers every assignable partition; homogeneous groups spread partitions
so that every partition has a member and every member has partitions); epochs never go backwards; the
coordinator's members are exactly the model's live members; and every client's view of its assignment
(built only from the responses it got) equals the coordinator's.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock, ShareError
from sharegroup.coordinator import GroupConfig, GroupCoordinator, InMemoryTopics, MemoryRecordSink

G = "g"
MEMBERS = [f"m{i}" for i in range(6)]
NAMES = ["a", "b", "c"]
SESSION_MS = 45_000
CONFIG = GroupConfig(max_size=5, session_timeout_ms=SESSION_MS, assignment_interval_ms=1_000)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(1_000)
        self.topics = InMemoryTopics()
        self.topic_serial = 0
        self.topics.create_topic("a", 3, self._next_topic_id())
        self.topics.create_topic("b", 1, self._next_topic_id())
        self.persister = InMemoryPersister(clock=self.clock)
        self.sink = MemoryRecordSink()
        self.gc = self._new_coordinator()
        # The clients, as the model knows them: member -> (epoch to send, last heartbeat ms, subscription,
        # assignment as last received).
        self.epoch: dict[str, int] = {}
        self.last_heartbeat_ms: dict[str, int] = {}
        self.subscription: dict[str, tuple[str, ...]] = {}
        self.assignment: dict[str, dict] = {}
        self.group_epoch_seen = 0
        self.assignment_epoch_seen = 0
        self.member_epoch_seen: dict[str, int] = {}

    def _next_topic_id(self) -> uuid.UUID:
        self.topic_serial += 1
        return uuid.UUID(int=self.topic_serial)

    def _new_coordinator(self) -> GroupCoordinator:
        gc = GroupCoordinator(
            persister=self.persister, topics=self.topics, clock=self.clock, config=CONFIG, record_sink=self.sink
        )
        self.run(gc.load())
        return gc

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.loop.close()

    # -- the model ---------------------------------------------------------------------------------

    def _lapse(self) -> list[str]:
        """Members whose session ran out by now: any operation on the group removes them first."""
        now = self.clock.now_ms()
        gone = [m for m, t in self.last_heartbeat_ms.items() if now - t >= SESSION_MS]
        for m in gone:
            self._forget(m)
        return gone

    def _forget(self, member_id: str) -> None:
        for table in (self.epoch, self.last_heartbeat_ms, self.subscription, self.assignment, self.member_epoch_seen):
            table.pop(member_id, None)

    def _group_exists(self) -> bool:
        return G in self.gc.group_ids

    def _accept(self, member_id: str, result, subscription: tuple[str, ...]) -> None:
        self.epoch[member_id] = result.member_epoch
        self.last_heartbeat_ms[member_id] = self.clock.now_ms()
        self.subscription[member_id] = subscription
        if result.assignment is not None:
            self.assignment[member_id] = result.assignment

    # -- rules -------------------------------------------------------------------------------------

    @rule(member_id=st.sampled_from(MEMBERS), names=st.sets(st.sampled_from(NAMES), min_size=1, max_size=3))
    def join(self, member_id, names):
        self._lapse()
        names = tuple(sorted(names))
        full = len(self.epoch) >= CONFIG.max_size and member_id not in self.epoch
        try:
            result = self.run(self.gc.share_group_heartbeat(G, member_id, 0, list(names)))
        except ShareError as exc:
            assert full and exc.error is Errors.GROUP_MAX_SIZE_REACHED, exc
            return
        assert not full
        assert result.assignment is not None, "a join always carries the assignment"
        self._accept(member_id, result, names)

    @precondition(lambda self: self.epoch)
    @rule(data=st.data(), names=st.one_of(st.none(), st.sets(st.sampled_from(NAMES), max_size=3)))
    def heartbeat(self, data, names):
        member_id = data.draw(st.sampled_from(sorted(self.epoch)))
        epoch = self.epoch[member_id]
        gone = member_id in self._lapse()
        request = None if names is None else sorted(names)
        try:
            result = self.run(self.gc.share_group_heartbeat(G, member_id, epoch, request))
        except ShareError as exc:
            assert gone and exc.error is Errors.UNKNOWN_MEMBER_ID, exc
            return
        assert not gone
        self._accept(member_id, result, tuple(request) if request is not None else self.subscription[member_id])

    @precondition(lambda self: self.epoch)
    @rule(data=st.data(), delta=st.sampled_from([1, 2, -1]))
    def heartbeat_with_a_wrong_epoch(self, data, delta):
        member_id = data.draw(st.sampled_from(sorted(self.epoch)))
        epoch = self.epoch[member_id] + delta
        member = self.gc._store.groups[G].members.get(member_id)
        if epoch < 0 or (member is not None and epoch == member.previous_member_epoch):
            return  # -1 is a leave; the previous epoch is legitimately accepted
        gone = member_id in self._lapse()
        try:
            self.run(self.gc.share_group_heartbeat(G, member_id, epoch))
        except ShareError as exc:
            assert exc.error is (Errors.UNKNOWN_MEMBER_ID if gone else Errors.FENCED_MEMBER_EPOCH), exc
        else:
            raise AssertionError("a wrong epoch must be refused")

    @precondition(lambda self: self.epoch)
    @rule(data=st.data())
    def leave(self, data):
        member_id = data.draw(st.sampled_from(sorted(self.epoch)))
        gone = member_id in self._lapse()
        try:
            result = self.run(self.gc.share_group_heartbeat(G, member_id, -1))
        except ShareError as exc:
            assert gone and exc.error is Errors.UNKNOWN_MEMBER_ID, exc
            return
        assert not gone and result.member_epoch == -1
        self._forget(member_id)

    @rule(ms=st.sampled_from([0, 1, 500, 1_000, 5_000, 20_000, 44_999, 46_000]))
    def advance(self, ms):
        self.clock.advance(ms)

    @rule()
    def expire(self):
        expected = self._lapse()
        assert sorted(self.run(self.gc.expire_members())) == sorted(expected)

    @rule(name=st.sampled_from(NAMES), grow=st.integers(1, 2))
    def add_partitions(self, name, grow):
        info = self.topics.lookup(name)
        if info is None:
            self.topics.create_topic(name, grow, self._next_topic_id())
        elif info.num_partitions + grow <= 6:
            self.topics.set_partitions(name, info.num_partitions + grow)

    @rule(name=st.sampled_from(NAMES))
    def delete_topic(self, name):
        if self.topics.lookup(name) is not None:
            self.topics.delete_topic(name)

    @rule(n=st.integers(1, 3), error=st.sampled_from([Errors.UNKNOWN_SERVER_ERROR, Errors.COORDINATOR_NOT_AVAILABLE]))
    def fail_initializations(self, n, error):
        self.persister.fail_next_initializes(n, error)

    @rule()
    def restart(self):
        self.gc._check(replay=True)
        before = self.gc._dump()
        self.gc = self._new_coordinator()
        assert self.gc._dump() == before
        now = self.clock.now_ms()
        for member_id in self.last_heartbeat_ms:  # sessions start afresh, even overdue ones not yet removed
            if G in self.gc.group_ids and member_id in self.gc._store.groups[G].members:
                self.last_heartbeat_ms[member_id] = now

    @rule(offset=st.integers(0, 100))
    def alter_offsets(self, offset):
        info = self.topics.lookup("a")
        if info is None or info.num_partitions == 0:
            return
        self._lapse()
        try:
            result = self.run(self.gc.alter_offsets(G, {info.topic_id: {0: offset}}))
        except ShareError as exc:
            assert self.epoch and exc.error is Errors.GROUP_NOT_EMPTY, exc
            return
        assert not self.epoch
        assert result[info.topic_id][0] in (Errors.NONE, Errors.UNKNOWN_SERVER_ERROR, Errors.COORDINATOR_NOT_AVAILABLE)

    @rule()
    def delete_group(self):
        self._lapse()
        exists = self._group_exists()
        try:
            self.run(self.gc.delete_group(G))
        except ShareError as exc:
            expected = Errors.GROUP_ID_NOT_FOUND if not exists else Errors.GROUP_NOT_EMPTY
            assert exc.error is expected, exc
            assert exists or not self._group_exists()
            return
        assert exists and not self.epoch and not self._group_exists()
        self.group_epoch_seen = self.assignment_epoch_seen = 0  # a new group of that id starts afresh

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def coordinator_invariants_hold(self):
        self.gc._check()

    @invariant()
    def members_are_the_models(self):
        if not self._group_exists():
            assert not self.epoch
            return
        d = self.gc.describe_group(G)
        now = self.clock.now_ms()
        live = {m for m, t in self.last_heartbeat_ms.items() if now - t < SESSION_MS}
        # Overdue members may linger until the next operation on the group removes them.
        assert live <= {m.member_id for m in d.members} <= set(self.epoch)
        owed = self.gc._store.groups[G].assignment_unsent
        for m in d.members:
            assert m.member_epoch == self.epoch[m.member_id], "the client holds the member's epoch"
            assert tuple(m.subscribed_topic_names) == self.subscription[m.member_id]
            # A clean-up may change a silent member's assignment; its next response must then carry it.
            if m.member_id not in owed:
                assert m.assignment == self.assignment[m.member_id], "the client was told its assignment"

    @invariant()
    def epochs_never_go_backwards(self):
        if not self._group_exists():
            return
        d = self.gc.describe_group(G)
        assert d.group_epoch >= self.group_epoch_seen and d.assignment_epoch >= self.assignment_epoch_seen
        self.group_epoch_seen, self.assignment_epoch_seen = d.group_epoch, d.assignment_epoch
        for m in d.members:
            assert m.member_epoch >= self.member_epoch_seen.get(m.member_id, 0)
            self.member_epoch_seen[m.member_id] = m.member_epoch

    @invariant()
    def homogeneous_groups_spread_partitions(self):
        """Spelled out from the outside (also part of `_check`): with one subscription for all and a
        target at the group epoch, every assignable partition has a member, and every member has
        partitions when there are at least as many partitions as members."""
        group = self.gc._store.groups.get(G)
        if group is None or not group.members or group.assignment_epoch != group.group_epoch:
            return
        subscriptions = {m.subscribed_topic_names for m in group.members.values()}
        if len(subscriptions) != 1:
            return
        (names,) = subscriptions
        pool = {(t, p) for t, e in group.initialized.items() if e.topic_name in names for p in e.partitions}
        held = {(t, p) for a in group.target.values() for t, ps in a.items() for p in ps}
        assert held == pool
        if pool and len(pool) >= len(group.members):
            assert all(group.target.get(m) for m in group.members)


# 300 examples of up to 60 steps: about half the steps run with members in the group, thousands with three
# or more, group epochs into the thirties; about 5 s.
CoordinatorMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SHAREGROUP_COORDINATOR_EXAMPLES", "300")),
    stateful_step_count=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
test_coordinator_state_machine = CoordinatorMachine.TestCase
