"""A hypothesis state machine over KIP-848 reconciliation: simulated consumers join, leave, heartbeat
(reporting what they own, or nothing), apply the assignments they were sent late, go silent until their
session or rebalance timeout removes them; topics grow. After every step:

- no partition is held by two members in the coordinator (assigned or pending revocation), at any
  epoch (the coordinator's `_check`, which also replays its records and compares);
- no partition is owned by two live consumers, by what the consumers themselves hold, and each one
  holds only what the coordinator has it holding;

and at the end, once every consumer has applied what it was sent and heartbeats truthfully (and members
that left for good have expired), the group converges: Stable, every member at the assignment epoch and holding exactly its target, and every
partition of a subscribed topic held by one member. A consumer that the coordinator removed (session
or rebalance timeout) is taken to have stopped consuming, as a Kafka consumer whose heartbeats fail
does.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sharegroup import Errors, ShareError
from sharegroup.coordinator import ConsumerGroupConfig, ConsumerGroupState
from tests.consumer_group_env import G, ConsumerEnv

SUBSCRIPTIONS = [("t1",), ("t2",), ("t1", "t2")]
MAX_CLIENTS = 5
REBALANCE_TIMEOUT_MS = 20_000
CONFIG = ConsumerGroupConfig()


def run(coro):
    return asyncio.run(coro)


class Client:
    def __init__(self, member_id: str, topics: tuple[str, ...], assignor: str | None,
                 instance_id: str | None = None) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.topics = topics
        self.assignor = assignor
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.pending: dict[uuid.UUID, frozenset[int]] | None = None  # sent, not applied yet
        self.joined = False

    def drop_everything(self) -> None:
        self.owned, self.pending, self.epoch, self.joined = {}, None, 0, False

    def receive(self, assignment) -> None:
        if assignment is not None:
            self.pending = {t: frozenset(ps) for t, ps in assignment.items() if ps}

    def apply(self) -> None:
        if self.pending is not None:
            self.owned, self.pending = self.pending, None

    def report(self) -> dict[uuid.UUID, list[int]]:
        return {t: sorted(ps) for t, ps in self.owned.items()}


class Reconciliation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.env = run(ConsumerEnv(t1=3, t2=2).start())
        self.clients: dict[str, Client] = {}
        self.next_id = 0

    # -- rules ---------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.clients) < MAX_CLIENTS)
    @rule(topics=st.sampled_from(SUBSCRIPTIONS), assignor=st.sampled_from([None, "uniform", "range"]),
          static=st.booleans())
    def new_consumer(self, topics, assignor, static):
        self.next_id += 1
        client = Client(f"c{self.next_id}", topics, assignor, f"i{self.next_id}" if static else None)
        self.clients[client.member_id] = client
        self._join(client)

    @precondition(lambda self: any(c.instance_id and c.joined for c in self.clients.values()))
    @rule(data=st.data(), rejoin=st.booleans())
    def static_restart(self, data, rejoin):
        """A static consumer stops (leave with epoch -2: it keeps its place) and a new process with the
        same instance id and a new member id starts, at once or after a while (or never)."""
        old = data.draw(st.sampled_from(sorted((c for c in self.clients.values() if c.instance_id and c.joined),
                                               key=lambda c: c.member_id)))
        run(self.env.hb(old.member_id, -2, instance_id=old.instance_id))
        old.drop_everything()
        del self.clients[old.member_id]
        self.next_id += 1
        new = Client(f"c{self.next_id}", old.topics, old.assignor, old.instance_id)
        self.clients[new.member_id] = new
        if rejoin:
            self._join(new)

    @precondition(lambda self: any(c.instance_id and c.joined for c in self.clients.values()))
    @rule(data=st.data())
    def second_process_with_a_live_instance_id(self, data):
        live = data.draw(st.sampled_from(sorted((c for c in self.clients.values() if c.instance_id and c.joined),
                                                key=lambda c: c.member_id)))
        with pytest.raises(ShareError) as info:
            run(self.env.join("intruder", topics=live.topics, instance_id=live.instance_id,
                              rebalance_timeout_ms=REBALANCE_TIMEOUT_MS))
        assert info.value.error is Errors.UNRELEASED_INSTANCE_ID

    @precondition(lambda self: self.clients)
    @rule(data=st.data(), truthful=st.booleans())
    def heartbeat(self, data, truthful):
        client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
        self._heartbeat(client, truthful)

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def apply_assignment(self, data):
        client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
        client.apply()

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def revoke_early(self, data):
        """A consumer may always give up partitions it was told to give up, before acknowledging."""
        client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
        if client.pending is not None:
            client.owned = {t: ps & client.pending.get(t, frozenset()) for t, ps in client.owned.items()}
            client.owned = {t: ps for t, ps in client.owned.items() if ps}

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def leave(self, data):
        client = data.draw(st.sampled_from(sorted(self.clients.values(), key=lambda c: c.member_id)))
        if client.joined:
            run(self.env.hb(client.member_id, -1))
        client.drop_everything()
        del self.clients[client.member_id]

    @rule(ms=st.sampled_from([1_000, 10_000, REBALANCE_TIMEOUT_MS, CONFIG.session_timeout_ms]))
    def time_passes(self, ms):
        self.env.clock.advance(ms)
        run(self.env.gc.expire_members())

    @rule(topic=st.sampled_from(["t1", "t2"]), more=st.integers(1, 2))
    def topic_grows(self, topic, more):
        info = self.env.topics.lookup(topic)
        if info.num_partitions + more <= 6:
            self.env.topics.set_partitions(topic, info.num_partitions + more)

    # -- helpers and invariants ------------------------------------------------------------------------

    def _join(self, client: Client) -> None:
        try:
            r = run(self.env.join(client.member_id, topics=client.topics, server_assignor=client.assignor,
                                  rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, instance_id=client.instance_id))
        except ShareError as exc:
            # Only a static consumer whose predecessor has neither left nor expired is refused.
            assert exc.error is Errors.UNRELEASED_INSTANCE_ID and client.instance_id, exc
            return
        client.joined, client.epoch = True, r.member_epoch
        client.receive(r.assignment)

    def _members(self) -> dict:
        if G not in self.env.gc.group_types():
            return {}
        return {m.member_id: m for m in self.env.gc.consumer_group_describe(G).members}

    @invariant()
    def no_partition_has_two_owners(self):
        self.env.gc._check(replay=True)
        members = self._members()
        group = self.env.gc._store.groups.get(G)
        for client in self.clients.values():
            if client.joined and client.member_id not in members:
                client.drop_everything()  # removed by a timeout: it has stopped consuming
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for client in self.clients.values():
            for t, ps in client.owned.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {client.member_id}"
                    seen[(t, p)] = client.member_id
                    assert group.partition_owners.get((t, p)) == client.member_id, (t, p, client.member_id)

    def teardown(self):
        # Everyone applies what it was sent and heartbeats truthfully, 5 s apart (well within the
        # session timeout), so members that left for good (a static member that never came back) expire
        # meanwhile: the group must converge.
        for _round in range(3 * MAX_CLIENTS + 6):
            self.env.clock.advance(5_000)
            for client in sorted(self.clients.values(), key=lambda c: c.member_id):
                client.apply()
                self._heartbeat(client, truthful=True)
                client.apply()
            self.no_partition_has_two_owners()
        if not self.clients:
            return
        description = self.env.gc.consumer_group_describe(G)
        assert description.state is ConsumerGroupState.STABLE, description
        held: set[tuple[uuid.UUID, int]] = set()
        for m in description.members:
            assert m.member_epoch == description.assignment_epoch and m.assignment == m.target_assignment, m
            client = self.clients[m.member_id]
            assert {t: sorted(ps) for t, ps in client.owned.items()} == m.assignment
            held |= {(t, p) for t, ps in m.assignment.items() for p in ps}
        subscribed = {n for c in self.clients.values() for n in c.topics}
        expected = {(self.env.topics.lookup(n).topic_id, p) for n in subscribed
                    for p in range(self.env.topics.lookup(n).num_partitions)}
        assert held == expected

    def _heartbeat(self, client: Client, truthful: bool) -> None:
        """A heartbeat reporting what the consumer owns (or nothing); a consumer that is not a member
        (any more) joins."""
        if not client.joined:
            self._join(client)
            return
        try:
            r = run(self.env.hb(client.member_id, client.epoch,
                                owned_topic_partitions=client.report() if truthful else None))
        except ShareError as exc:
            assert exc.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH), exc
            client.drop_everything()
            return
        client.epoch = r.member_epoch
        client.receive(r.assignment)


Reconciliation.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestReconciliation = Reconciliation.TestCase
