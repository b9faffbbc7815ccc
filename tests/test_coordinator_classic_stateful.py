"""Random JoinGroup / SyncGroup / Heartbeat / LeaveGroup / static rejoin / timeout / store-failure /
restart sequences against classic groups (hypothesis state machine, derandomized), with clients that
behave as Kafka consumers do (rejoin when told, the leader assigns every member one share).

After every step: `_check(replay=True)` (every invariant of every group, and what the record sink holds
equals what the coordinator believes it wrote); no request task failed with an exception; generations
never go backwards (except to the last stored one after a restart); no two clients that both believe they are in the current, Stable generation hold
the same partition; and a member the coordinator reports is one some client was told about.
"""

from __future__ import annotations

import asyncio
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from persister import InMemoryPersister
from sharegroup import Errors, ManualClock
from sharegroup.coordinator import GroupCoordinator, InMemoryTopics, MemoryRecordSink
from sharegroup.coordinator.classic.config import ClassicGroupConfig
from sharegroup.coordinator.classic.consumer_protocol import decode_assignment, encode_assignment, encode_subscription

G = "g"
CLIENTS = [f"c{i}" for i in range(5)]
INSTANCES = {"c3": "static-3", "c4": "static-4"}  # two of the clients are static members
PARTITIONS = 6
SESSION_MS, REBALANCE_MS = 10_000, 15_000
CONFIG = ClassicGroupConfig(initial_rebalance_delay_ms=1_000, max_size=4)
PROTOCOLS = [("range", encode_subscription(["t"]))]


class Client:
    """What a consumer knows: its member id, generation, and the partitions it was given."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.instance = INSTANCES.get(name)
        self.member_id = ""
        self.generation = -1
        self.is_leader = False
        self.members: list[str] = []
        self.partitions: set[int] = set()
        self.join_task: asyncio.Task | None = None
        self.sync_task: asyncio.Task | None = None

    def reset(self) -> None:
        self.member_id, self.generation, self.is_leader, self.members = "", -1, False, []
        self.partitions = set()


class ClassicMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(1_000_000)
        self.sink = MemoryRecordSink()
        self.gc = self._coordinator()
        self.clients = {name: Client(name) for name in CLIENTS}
        self.generation_seen = 0
        self.tasks: list[asyncio.Task] = []

    def _coordinator(self) -> GroupCoordinator:
        topics = InMemoryTopics()
        topics.create_topic("t", PARTITIONS)
        gc = GroupCoordinator(persister=InMemoryPersister(clock=self.clock), topics=topics, clock=self.clock,
                              record_sink=self.sink, classic_config=CONFIG)
        self.loop.run_until_complete(gc.load())
        return gc

    def teardown(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def settle(self) -> None:
        for _ in range(10):
            self.run(asyncio.sleep(0))
        self._collect()

    def spawn(self, coro) -> asyncio.Task:
        task = self.loop.create_task(coro)
        self.tasks.append(task)
        return task

    # -- what clients do with answers ----------------------------------------------------------------

    def _collect(self) -> None:
        for client in self.clients.values():
            if client.join_task is not None and client.join_task.done():
                task, client.join_task = client.join_task, None
                if task.cancelled():
                    continue
                result = task.result()
                if result.error is Errors.MEMBER_ID_REQUIRED:
                    client.member_id = result.member_id
                    client.join_task = self.spawn(self._join(client))
                elif result.error is Errors.NONE:
                    client.member_id, client.generation = result.member_id, result.generation_id
                    client.is_leader = result.leader == result.member_id
                    client.members = [m.member_id for m in result.members]
                    client.partitions = set()  # eager: everything was revoked before rejoining
                    client.sync_task = self.spawn(self._sync(client))
                elif result.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
                    client.reset()
            if client.sync_task is not None and client.sync_task.done():
                task, client.sync_task = client.sync_task, None
                if task.cancelled():
                    continue
                result = task.result()
                if result.error is Errors.NONE:
                    client.partitions = set(decode_assignment(result.assignment).get("t", []))
                elif result.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID, Errors.ILLEGAL_GENERATION):
                    client.reset()
                else:
                    client.partitions = set()

    async def _join(self, client: Client):
        return await self.gc.join_group(G, client.member_id, "consumer", PROTOCOLS, SESSION_MS, REBALANCE_MS,
                                        group_instance_id=client.instance, client_id=client.name)

    async def _sync(self, client: Client):
        assignments = {}
        if client.is_leader:
            members = sorted(client.members)
            assignments = {m: encode_assignment({"t": [p for p in range(PARTITIONS) if p % len(members) == i]})
                           for i, m in enumerate(members)}
        return await self.gc.sync_group(G, client.generation, client.member_id, assignments,
                                        group_instance_id=client.instance)

    # -- rules ---------------------------------------------------------------------------------------

    @rule(name=st.sampled_from(CLIENTS))
    def join(self, name: str) -> None:
        client = self.clients[name]
        if client.join_task is None:
            client.join_task = self.spawn(self._join(client))
        self.settle()

    @rule(name=st.sampled_from(CLIENTS))
    def heartbeat(self, name: str) -> None:
        client = self.clients[name]
        if not client.member_id or client.join_task is not None:
            return
        error = self.run(self.gc.heartbeat(G, client.generation, client.member_id, client.instance))
        if error is Errors.REBALANCE_IN_PROGRESS:
            client.partitions = set()
            client.join_task = self.spawn(self._join(client))
        elif error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID, Errors.ILLEGAL_GENERATION):
            client.reset()
        self.settle()

    @rule(name=st.sampled_from(CLIENTS))
    def leave(self, name: str) -> None:
        client = self.clients[name]
        if not client.member_id:
            return
        self.run(self.gc.leave_group(G, [(client.member_id, client.instance)]))
        client.reset()
        self.settle()

    @rule(name=st.sampled_from(sorted(INSTANCES)))
    def static_restart(self, name: str) -> None:
        """A static member's process restarts: it forgets its member id and joins again."""
        client = self.clients[name]
        if client.join_task is not None:
            client.join_task.cancel()
        client.reset()
        client.join_task = self.spawn(self._join(client))
        self.settle()

    @rule(ms=st.sampled_from([100, 1_000, 3_000, 10_000, 15_000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.run(self.gc.run_timers())
        self.settle()

    @rule()
    def fail_next_store(self) -> None:
        self.sink.fail_next_appends(1)

    @rule()
    def restart(self) -> None:
        """The broker restarts: parked requests are lost (the clients will time out and rejoin)."""
        for client in self.clients.values():
            for task in (client.join_task, client.sync_task):
                if task is not None:
                    task.cancel()
            client.join_task = client.sync_task = None
        self.settle()
        self.sink.fail_next_appends(0)
        self.gc = self._coordinator()
        # Only stored generations survive: one that never got its assignment stored is redone (it gave
        # no partitions out, so repeating its number cannot make two owners).
        group = self.gc._store.classic_groups.get(G)
        self.generation_seen = 0 if group is None else group.generation_id
        self.settle()

    # -- invariants ----------------------------------------------------------------------------------

    @invariant()
    def coordinator_invariants_hold(self) -> None:
        self.gc._check(replay=True)

    @invariant()
    def no_request_failed(self) -> None:
        for task in self.tasks:
            if task.done() and not task.cancelled():
                assert task.exception() is None, task.exception()
        self.tasks = [t for t in self.tasks if not t.done()]

    @invariant()
    def generations_never_go_back(self) -> None:
        described = self.gc.describe_groups([G])[0]
        if described.error is Errors.NONE:
            generation = self.gc._store.classic_groups[G].generation_id
            assert generation >= self.generation_seen or generation == 0
            self.generation_seen = max(self.generation_seen, generation)

    @invariant()
    def no_partition_is_owned_twice_in_the_current_generation(self) -> None:
        group = self.gc._store.classic_groups.get(G)
        if group is None or str(group.state) != "Stable":
            return
        owners: dict[int, str] = {}
        for client in self.clients.values():
            if client.generation != group.generation_id or client.member_id not in group.members:
                continue
            for p in client.partitions:
                assert p not in owners, f"partition {p}: {owners[p]} and {client.name}"
                owners[p] = client.name


# 150 examples of up to 50 steps; a few seconds.
ClassicMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SHAREGROUP_CLASSIC_EXAMPLES", "150")),
    stateful_step_count=50,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
test_classic_state_machine = ClassicMachine.TestCase
