"""Several members' ShareFetch / ShareAcknowledge / leave sequences through the SharePartitionManager,
checked against a per-offset model after every step (hypothesis; runs on the twin of the pass).

The model does not predict *which* records a fetch acquires (batching, rotation and poison-record
isolation decide that); it checks every answer and the leader's state:
- an acquired offset was AVAILABLE and is now held by the fetching member only (never two owners);
- its delivery count is exactly one more than before (delivery counts only grow);
- every acquired offset is inside a shipped log batch, and every shipped batch holds an acquired offset;
- acknowledgements of records a member holds succeed and move them as Kafka does (RELEASE, leave and
  lock expiry make them AVAILABLE, or ARCHIVED at the delivery count limit);
- after every step each share-partition's record states, delivery counts and owners equal the model's;
- at the end, after everyone left and every lock expired, every record is ACKNOWLEDGED, ARCHIVED or
  AVAILABLE and nothing is acquired.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharegroup import Errors, RecordState

from .manager_harness import (
    ACCEPT,
    GROUP,
    LOCK_MS,
    REJECT,
    RELEASE,
    T1,
    Harness,
    ack_request,
    fetch_request,
)

MEMBERS = ("m1", "m2", "m3")
PARTITIONS = (0, 1)
LIMIT = 3  # the harness's delivery count limit

member = st.sampled_from(MEMBERS)
ack_type = st.sampled_from((ACCEPT, RELEASE, REJECT))
ops = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(PARTITIONS), st.integers(1, 4)),
    st.tuples(st.just("fetch"), member, st.integers(1, 8), st.lists(ack_type, max_size=6)),
    st.tuples(st.just("ack"), member, st.lists(ack_type, min_size=1, max_size=6)),
    st.tuples(st.just("leave"), member),
    st.tuples(st.just("advance"), st.sampled_from((1_000, LOCK_MS // 2, LOCK_MS))),
)


class Model:
    """Per (partition, offset): [state, delivery count, owner, lock deadline]."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], list] = {}
        self.epochs: dict[str, int] = {}

    def add(self, partition: int, first: int, count: int) -> None:
        for offset in range(first, first + count):
            self.records[(partition, offset)] = [RecordState.AVAILABLE, 0, "", -1]

    def held_by(self, member_id: str) -> list[tuple[int, int]]:
        return sorted(k for k, r in self.records.items() if r[0] is RecordState.ACQUIRED and r[2] == member_id)

    def give_back(self, key: tuple[int, int]) -> None:
        record = self.records[key]
        record[0] = RecordState.ARCHIVED if record[1] >= LIMIT else RecordState.AVAILABLE
        record[2], record[3] = "", -1

    def acknowledge(self, key: tuple[int, int], ack: int) -> None:
        record = self.records[key]
        if ack == ACCEPT:
            record[0], record[2], record[3] = RecordState.ACKNOWLEDGED, "", -1
        elif ack == REJECT:
            record[0], record[2], record[3] = RecordState.ARCHIVED, "", -1
        else:
            self.give_back(key)

    def expire(self, now_ms: int) -> None:
        for key, record in self.records.items():
            if record[0] is RecordState.ACQUIRED and record[3] <= now_ms:
                self.give_back(key)


def _ack_batches(model: Model, member_id: str, types: list[int]) -> dict[int, list[tuple[int, int, int]]]:
    """Acknowledge the first len(types) records the member holds, one offset per batch."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for (partition, offset), ack in zip(model.held_by(member_id), types):
        out.setdefault(partition, []).append((offset, offset, ack))
    return out


async def _scenario(steps) -> None:
    h = Harness()
    for p in PARTITIONS:
        h.partition(T1, p)
    mgr = h.mgr  # not started: the test runs the lock timer's pass itself, so every step is deterministic
    model = Model()
    for op in steps:
        kind = op[0]
        if kind == "append":
            _k, p, n = op
            first = h.logs.log_end_offset(T1, p)
            h.append(T1, p, n)
            model.add(p, first, n)
        elif kind == "advance":
            h.clock.advance(op[1])
            await mgr.expire_due_locks()
            model.expire(h.clock.now_ms())
        elif kind == "leave":
            _k, m = op
            await mgr.on_member_left(GROUP, m)
            for key in model.held_by(m):
                model.give_back(key)
            model.epochs.pop(m, None)
        elif kind == "ack":
            _k, m, types = op
            epoch = model.epochs.get(m)
            if epoch is None:
                continue
            acks = _ack_batches(model, m, types)
            r = await mgr.share_acknowledge(ack_request(m, epoch, [(T1, p, a) for p, a in acks.items()]))
            model.epochs[m] = epoch + 1
            assert r.error_code is Errors.NONE
            for p, batches in acks.items():
                assert r.partition(T1, p).error_code is Errors.NONE
                for offset, _o, ack in batches:
                    model.acknowledge((p, offset), ack)
        else:
            _k, m, max_records, types = op
            epoch = model.epochs.get(m, 0)
            acks = _ack_batches(model, m, types) if epoch else {}
            parts = [(T1, p, acks.get(p, [])) for p in PARTITIONS] if epoch == 0 else \
                [(T1, p, a) for p, a in acks.items()]
            r = await mgr.share_fetch(fetch_request(m, epoch, parts, max_records=max_records))
            model.epochs[m] = epoch + 1
            assert r.error_code is Errors.NONE
            for p, batches in acks.items():
                assert r.partition(T1, p).acknowledge_error_code is Errors.NONE
                for offset, _o, ack in batches:
                    model.acknowledge((p, offset), ack)
            deadline = h.clock.now_ms() + LOCK_MS
            for topic_id, data in r.partitions():
                p = data.partition_index
                assert data.error_code is Errors.NONE
                offsets = [o for first, last, _dc in data.acquired_records for o in range(first, last + 1)]
                for first, last, dc in data.acquired_records:
                    for offset in range(first, last + 1):
                        record = model.records[(p, offset)]
                        assert record[0] is RecordState.AVAILABLE, (p, offset, record, m)  # never two owners
                        assert dc == record[1] + 1, (p, offset, dc, record)  # counts only grow, by one
                        record[:] = [RecordState.ACQUIRED, dc, m, deadline]
                for batch in data.records:  # shipped batches hold acquired offsets, and cover all of them
                    assert any(batch.base_offset <= o <= batch.last_offset for o in offsets)
                assert all(any(b.base_offset <= o <= b.last_offset for b in data.records) for o in offsets)
        _compare(mgr, model)
        mgr._check()
    for m in MEMBERS:
        await mgr.on_member_left(GROUP, m)
        for key in model.held_by(m):
            model.give_back(key)
    h.clock.advance(LOCK_MS)
    await mgr.expire_due_locks()
    _compare(mgr, model)
    for key, record in model.records.items():
        assert record[0] in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.AVAILABLE), (key, record)
    await mgr.close()


def _compare(mgr, model: Model) -> None:
    for p in PARTITIONS:
        sp = mgr.share_partition(GROUP, T1, p)
        keys = sorted(k for k in model.records if k[0] == p)
        if sp is None:
            assert all(model.records[k][1] == 0 for k in keys)  # never fetched: never delivered
            continue
        for key in keys:
            view = sp.record_state(key[1])
            state, count, owner, _deadline = model.records[key]
            if view is None:  # below the share-partition start offset, or not yet in the window
                assert state.terminal or (key[1] >= sp.end_offset and count == 0), (key, model.records[key])
                continue
            assert (view.state, view.delivery_count, view.member_id) == (state, count, owner), (key, view)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=40))
def test_members_fetching_acknowledging_and_leaving_match_the_model(steps):
    asyncio.run(_scenario(steps))
