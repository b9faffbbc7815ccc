"""The transaction coordinator's state machine (layer 3), on a ManualClock with an in-memory sink, a
marker writer that records what it writes, and a group coordinator stand-in: Kafka's transitions and
error codes, fencing, timeouts, expiry and recovery from the records."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup.clock import ManualClock
from sharegroup.coordinator import MemoryRecordSink
from sharegroup.coordinator.transactions import (
    OFFSETS_TOPIC,
    PendingOffset,
    TransactionCoordinator,
    TxnState,
    offsets_partition_for,
)
from sharegroup.errors import Errors, ShareError


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[str, int, int, int, bool]] = []
        self.fail: Errors | None = None

    async def write_marker(self, topic, partition, producer_id, producer_epoch, commit):
        if self.fail is not None:
            raise ShareError(self.fail, "injected marker failure")
        self.written.append((topic, partition, producer_id, producer_epoch, commit))


class Offsets:
    def __init__(self) -> None:
        self.committed: dict[tuple[str, str, int], int] = {}

    async def validate_transactional_offsets(self, group_id, member_id, group_instance_id, generation_id, partitions):
        if generation_id > 5:
            raise ShareError(Errors.ILLEGAL_GENERATION, "stale")
        return {(t, p): Errors.NONE for t, p, _m in partitions}

    async def commit_transactional_offsets(self, group_id, offsets):
        for o in offsets:
            self.committed[(group_id, o.topic, o.partition)] = o.offset


class Env:
    def __init__(self, sink: MemoryRecordSink | None = None, **kwargs) -> None:
        self.clock = ManualClock(1_000_000)
        self.sink = sink if sink is not None else MemoryRecordSink()
        self.markers = Markers()
        self.offsets = Offsets()
        self.next_pid = 1000

        def new_pid() -> int:
            self.next_pid += 1
            return self.next_pid

        self.coordinator = TransactionCoordinator(self.sink, self.markers, new_pid, self.clock, offsets=self.offsets,
                                                  **kwargs)
        run(self.coordinator.load())


def run(coro):
    return asyncio.run(coro)


def code_of(coro) -> Errors:
    with pytest.raises(ShareError) as info:
        run(coro)
    return info.value.error


@pytest.fixture
def env() -> Env:
    return Env()


def test_first_init_gives_a_fresh_producer_id_at_epoch_0_and_a_second_bumps_the_epoch(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    assert epoch == 0 and pid == 1001
    assert run(c.init_producer_id("tx", 60_000)) == (pid, 1)
    assert c.get("tx").state is TxnState.EMPTY


def test_timeout_above_the_maximum_is_invalid_transaction_timeout_and_creates_nothing(env):
    assert code_of(env.coordinator.init_producer_id("tx", 900_001)) == Errors.INVALID_TRANSACTION_TIMEOUT
    assert code_of(env.coordinator.init_producer_id("tx", 0)) == Errors.INVALID_TRANSACTION_TIMEOUT
    assert env.coordinator.get("tx") is None and len(env.sink) == 0


def test_commit_writes_prepare_then_markers_then_complete(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    run(c.add_partitions("tx", pid, epoch, [("a", 0), ("b", 1)]))
    assert c.get("tx").state is TxnState.ONGOING and c.get("tx").start_ms == env.clock.now_ms()
    run(c.end_transaction("tx", pid, epoch, commit=True))
    assert sorted(env.markers.written) == [("a", 0, pid, epoch, True), ("b", 1, pid, epoch, True)]
    states = [TxnState(r.value.state) for r in env.sink.read_all()]
    assert states == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert c.get("tx").partitions == frozenset()
    run(c.end_transaction("tx", pid, epoch, commit=True))  # a retried commit of a completed one: NONE
    assert code_of(c.end_transaction("tx", pid, epoch, commit=False)) == Errors.INVALID_TXN_STATE


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_without_a_transaction_is_invalid_txn_state(env, commit):
    pid, epoch = run(env.coordinator.init_producer_id("tx", 60_000))
    assert code_of(env.coordinator.end_transaction("tx", pid, epoch, commit)) == Errors.INVALID_TXN_STATE


def test_wrong_producer_id_or_epoch_or_unknown_id(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    assert code_of(c.add_partitions("nope", pid, epoch, [("a", 0)])) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert code_of(c.add_partitions("tx", pid + 7, epoch, [("a", 0)])) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert code_of(c.add_partitions("tx", pid, epoch + 1, [("a", 0)])) == Errors.PRODUCER_FENCED
    assert code_of(c.end_transaction("tx", pid, epoch - 1, True)) == Errors.PRODUCER_FENCED
    assert code_of(c.end_transaction("tx", pid + 7, epoch, True)) == Errors.INVALID_PRODUCER_ID_MAPPING


def test_a_new_instance_fences_the_old_and_aborts_its_open_transaction(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    run(c.add_partitions("tx", pid, epoch, [("a", 0)]))
    pid2, epoch2 = run(c.init_producer_id("tx", 60_000))
    assert pid2 == pid and epoch2 == epoch + 2  # the abort at epoch + 1, then the bump for the caller
    assert env.markers.written == [("a", 0, pid, epoch + 1, False)]  # the marker fences the partition too
    assert c.get("tx").state is TxnState.EMPTY
    assert code_of(c.add_partitions("tx", pid, epoch, [("a", 0)])) == Errors.PRODUCER_FENCED
    assert code_of(c.end_transaction("tx", pid, epoch, True)) == Errors.PRODUCER_FENCED
    # KIP-360 from the zombie (its own id and old epoch) is fenced as well
    assert code_of(c.init_producer_id("tx", 60_000, pid, epoch)) == Errors.PRODUCER_FENCED


def test_kip_360_bump_with_the_current_epoch_and_its_retry(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    assert run(c.init_producer_id("tx", 60_000, pid, epoch)) == (pid, epoch + 1)
    assert run(c.init_producer_id("tx", 60_000, pid, epoch)) == (pid, epoch + 1)  # the retry: no second bump
    assert code_of(c.init_producer_id("tx", 60_000, pid + 5, epoch + 1)) == Errors.PRODUCER_FENCED
    assert code_of(c.init_producer_id("tx", 60_000, pid, -1)) == Errors.INVALID_REQUEST


def test_exhausted_epoch_rotates_the_producer_id(env):
    c = env.coordinator
    pid, _ = run(c.init_producer_id("tx", 60_000))
    import dataclasses
    c._txns["tx"] = dataclasses.replace(c.get("tx"), producer_epoch=32766)
    pid2, epoch2 = run(c.init_producer_id("tx", 60_000))
    assert pid2 != pid and epoch2 == 0 and c.get("tx").previous_producer_id == pid


def test_prepared_states_answer_concurrent_transactions_or_invalid_txn_state(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    run(c.add_partitions("tx", pid, epoch, [("a", 0)]))
    env.markers.fail = Errors.KAFKA_STORAGE_ERROR
    run(c.end_transaction("tx", pid, epoch, commit=True))  # the decision is durable; markers retried later
    assert c.get("tx").state is TxnState.PREPARE_COMMIT
    assert code_of(c.end_transaction("tx", pid, epoch, True)) == Errors.CONCURRENT_TRANSACTIONS
    assert code_of(c.end_transaction("tx", pid, epoch, False)) == Errors.INVALID_TXN_STATE
    assert code_of(c.add_partitions("tx", pid, epoch, [("a", 0)])) == Errors.CONCURRENT_TRANSACTIONS
    assert code_of(c.init_producer_id("tx", 60_000)) == Errors.CONCURRENT_TRANSACTIONS
    env.markers.fail = None
    assert run(c.abort_timed_out()) == []  # the periodic job completes it
    assert c.get("tx").state is TxnState.COMPLETE_COMMIT and env.markers.written == [("a", 0, pid, epoch, True)]


def test_a_transition_in_flight_makes_others_concurrent_transactions(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))

    class SlowSink(MemoryRecordSink):
        async def append(self, records):
            await asyncio.sleep(0.01)
            await super().append(records)

    c._sink = SlowSink()

    async def both():
        first = asyncio.ensure_future(c.add_partitions("tx", pid, epoch, [("a", 0)]))
        await asyncio.sleep(0)
        with pytest.raises(ShareError) as info:
            await c.add_partitions("tx", pid, epoch, [("b", 0)])
        await first
        return info.value.error

    assert run(both()) == Errors.CONCURRENT_TRANSACTIONS
    assert c.get("tx").partitions == {("a", 0)}


def test_add_offsets_and_txn_offset_commit_apply_only_at_commit(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    offset = PendingOffset("g", "in", 0, 42, -1, "m")
    assert code_of(c.txn_offset_commit("tx", pid, epoch, "g", [offset])) == Errors.INVALID_TXN_STATE
    assert code_of(c.txn_offset_commit("tx", pid, epoch, "g", [offset], abortable=True)) == Errors.TRANSACTION_ABORTABLE
    run(c.add_offsets("tx", pid, epoch, "g"))
    assert (OFFSETS_TOPIC, offsets_partition_for("g", 50)) in c.get("tx").partitions
    assert run(c.txn_offset_commit("tx", pid, epoch, "g", [offset])) == {("in", 0): Errors.NONE}
    assert c.unstable_offsets("g") == {("in", 0)} and env.offsets.committed == {}
    run(c.end_transaction("tx", pid, epoch, commit=True))
    assert env.offsets.committed == {("g", "in", 0): 42} and c.unstable_offsets("g") == set()
    assert env.markers.written == []  # the offsets partition gets no marker: the offsets are applied instead


def test_aborted_offsets_are_dropped(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    run(c.add_offsets("tx", pid, epoch, "g"))
    run(c.txn_offset_commit("tx", pid, epoch, "g", [PendingOffset("g", "in", 0, 42, -1, "")]))
    assert code_of(c.txn_offset_commit("tx", pid, epoch, "g", [PendingOffset("g", "in", 0, 43, -1, "")],
                                       generation_id=9)) == Errors.ILLEGAL_GENERATION
    run(c.end_transaction("tx", pid, epoch, commit=False))
    assert env.offsets.committed == {} and c.unstable_offsets("g") == set()


def test_the_periodic_job_aborts_transactions_past_their_timeout_from_the_first_add(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 10_000))
    run(c.add_partitions("tx", pid, epoch, [("a", 0)]))
    env.clock.advance(6_000)
    run(c.add_partitions("tx", pid, epoch, [("b", 0)]))  # a later add does not restart the clock
    env.clock.advance(4_000)
    assert run(c.abort_timed_out()) == []
    env.clock.advance(1)
    assert run(c.abort_timed_out()) == ["tx"]
    assert c.get("tx").state is TxnState.COMPLETE_ABORT and c.get("tx").producer_epoch == epoch + 1
    assert sorted(env.markers.written) == [("a", 0, pid, epoch + 1, False), ("b", 0, pid, epoch + 1, False)]
    assert code_of(c.end_transaction("tx", pid, epoch, True)) == Errors.PRODUCER_FENCED


def test_idle_transactional_ids_expire_with_a_tombstone(env):
    c = Env(id_expiration_ms=1000).coordinator
    sink = c._sink
    pid, epoch = run(c.init_producer_id("idle", 60_000))
    pid2, epoch2 = run(c.init_producer_id("busy", 60_000))
    run(c.add_partitions("busy", pid2, epoch2, [("a", 0)]))
    c._clock.advance(1000)
    assert run(c.expire_transactional_ids()) == ["idle"]  # an Ongoing id never expires
    assert c.get("idle") is None and sink.read_all()[-1].value is None
    pid3, _ = run(c.init_producer_id("idle", 60_000))
    assert pid3 != pid  # a new producer id after expiry


def test_load_completes_prepared_transactions_and_keeps_ongoing_ones(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("prepared", 60_000))
    run(c.add_partitions("prepared", pid, epoch, [("a", 0)]))
    run(c.add_offsets("prepared", pid, epoch, "g"))
    run(c.txn_offset_commit("prepared", pid, epoch, "g", [PendingOffset("g", "in", 3, 7, -1, None)]))
    env.markers.fail = Errors.KAFKA_STORAGE_ERROR
    run(c.end_transaction("prepared", pid, epoch, commit=True))
    pid2, epoch2 = run(c.init_producer_id("open", 60_000))
    run(c.add_partitions("open", pid2, epoch2, [("b", 0)]))
    restarted = Env(sink=env.sink)  # a restart replays the same records
    r = restarted.coordinator
    assert r.get("prepared").state is TxnState.COMPLETE_COMMIT
    assert restarted.markers.written == [("a", 0, pid, epoch, True)]
    assert restarted.offsets.committed == {("g", "in", 3): 7}
    assert r.get("open").state is TxnState.ONGOING and r.get("open").partitions == {("b", 0)}
    assert r.get("open").start_ms == c.get("open").start_ms


def test_a_failed_state_write_changes_nothing(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    env.sink.fail_next_appends(1)
    assert code_of(c.add_partitions("tx", pid, epoch, [("a", 0)])) == Errors.NOT_COORDINATOR
    assert c.get("tx").state is TxnState.EMPTY
    run(c.add_partitions("tx", pid, epoch, [("a", 0)]))
    assert c.get("tx").state is TxnState.ONGOING


def test_verification_answers(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx", 60_000))
    assert c.verify_partition("tx", pid, epoch, "a", 0) == Errors.TRANSACTION_ABORTABLE
    run(c.add_partitions("tx", pid, epoch, [("a", 0)]))
    assert c.verify_partition("tx", pid, epoch, "a", 0) == Errors.NONE
    assert c.verify_partition("tx", pid, epoch, "a", 1) == Errors.TRANSACTION_ABORTABLE
    assert c.verify_partition("tx", pid, epoch - 1, "a", 0) == Errors.INVALID_PRODUCER_EPOCH
    assert c.verify_partition("tx", pid + 1, epoch, "a", 0) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert c.verify_partition("other", pid, epoch, "a", 0) == Errors.INVALID_PRODUCER_ID_MAPPING


def test_list_transactions_filters(env):
    c = env.coordinator
    pid, epoch = run(c.init_producer_id("tx-a", 60_000))
    run(c.init_producer_id("tx-b", 60_000))
    run(c.add_partitions("tx-a", pid, epoch, [("a", 0)]))
    env.clock.advance(500)
    names = lambda found: sorted(m.transactional_id for m in found[0])  # noqa: E731
    assert names(c.list_transactions()) == ["tx-a", "tx-b"]
    assert names(c.list_transactions(states=["Ongoing"])) == ["tx-a"]
    assert c.list_transactions(states=["Bogus"]) == ([], ["Bogus"])
    assert names(c.list_transactions(producer_ids=[pid])) == ["tx-a"]
    assert names(c.list_transactions(duration_ms=499)) == ["tx-a"]
    assert names(c.list_transactions(duration_ms=500)) == []
    assert names(c.list_transactions(pattern="tx-b")) == ["tx-b"]
    assert code_of(_async(c.list_transactions, pattern="(")) == Errors.INVALID_REGULAR_EXPRESSION


async def _async(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def test_offsets_partition_is_javas_hash_modulo():
    assert offsets_partition_for("test", 50) == 3556498 % 50
    assert offsets_partition_for("", 50) == 0


def test_the_durable_state_stays_bounded_by_the_live_transactional_ids(tmp_path):
    from sharegroup.server.group_records import FileRecordSink

    sink = FileRecordSink.open(tmp_path, fsync=False, min_compaction_bytes=8192)
    try:
        env = Env(sink=sink, id_expiration_ms=1000)  # type: ignore[arg-type]
        c = env.coordinator
        for i in range(300):  # many transactions of a few ids, then ids that come and go
            tid = f"tx-{i % 3}"
            pid, epoch = run(c.init_producer_id(tid, 60_000))
            run(c.add_partitions(tid, pid, epoch, [("a", i % 4)]))
            run(c.end_transaction(tid, pid, epoch, commit=i % 2 == 0))
            assert sink.file_bytes <= max(8192, 2 * sink.live_bytes) + 512
        for i in range(100):
            run(c.init_producer_id(f"short-{i}", 60_000))
        env.clock.advance(1000)
        assert len(run(c.expire_transactional_ids())) == 103
        assert len(sink) == 0 and len(c) == 0
    finally:
        sink.close()
    again = FileRecordSink.open(tmp_path, fsync=False)
    try:
        assert Env(sink=again).coordinator.transactions() == []  # type: ignore[arg-type]
    finally:
        again.close()


def test_an_init_while_its_id_expires_waits_for_the_tombstone():
    env = Env(id_expiration_ms=1000)
    c = env.coordinator
    run(c.init_producer_id("tx", 60_000))
    env.clock.advance(1000)

    class SlowSink(MemoryRecordSink):
        async def append(self, records):
            await asyncio.sleep(0.01)
            await super().append(records)

    c._sink = SlowSink()

    async def both():
        expiry = asyncio.ensure_future(c.expire_transactional_ids())
        await asyncio.sleep(0)
        with pytest.raises(ShareError) as info:
            await c.init_producer_id("tx", 60_000)
        assert await expiry == ["tx"]
        return info.value.error

    assert run(both()) == Errors.CONCURRENT_TRANSACTIONS
    assert c.get("tx") is None
    assert run(c.init_producer_id("tx", 60_000))[1] == 0  # a new id after the retry
