"""The simple assignor: sharing when members outnumber partitions, balance, stickiness, heterogeneous
subscriptions, and properties over random inputs (KIP-932)."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharegroup.coordinator import simple_assign

A = uuid.UUID(int=0xA)
B = uuid.UUID(int=0xB)
C = uuid.UUID(int=0xC)


def members(n, topics=(A,)):
    return {f"m{i:03d}": set(topics) for i in range(n)}


def holders(result, topic=A):
    out: dict[int, set[str]] = {}
    for member_id, assignment in result.items():
        for p in assignment.get(topic, []):
            out.setdefault(p, set()).add(member_id)
    return out


def counts(result):
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def test_no_members_no_topics():
    assert simple_assign({}, {A: 3}) == {}
    assert simple_assign(members(2), {}) == {"m000": {}, "m001": {}}
    assert simple_assign(members(2), {A: 0}) == {"m000": {}, "m001": {}}


def test_one_member_gets_everything():
    assert simple_assign({"m": {A, B}}, {A: 2, B: 1}) == {"m": {A: [0, 1], B: [0]}}


@pytest.mark.parametrize(
    "n_members, n_partitions, per_partition",
    [(3, 1, 3), (101, 24, 5), (2, 4, 1), (5, 5, 1), (7, 3, 3), (200, 1000, 1)],
)
def test_members_per_partition_is_ceil_m_over_p(n_members, n_partitions, per_partition):
    result = simple_assign(members(n_members), {A: n_partitions})
    h = holders(result)
    assert sorted(h) == list(range(n_partitions))
    assert {len(owners) for owners in h.values()} == {per_partition}
    assert all(result[m] for m in result), "every member has a partition"


def test_balanced_when_partitions_outnumber_members():
    result = simple_assign(members(3), {A: 10})
    assert counts(result) == [3, 3, 4]
    result = simple_assign(members(200), {A: 1000})
    assert counts(result) == [5] * 200


def test_homogeneous_pool_spans_topics():
    """Same subscription: one pool over all topics' partitions, not topic by topic."""
    result = simple_assign(members(3, (A, B, C)), {A: 1, B: 1, C: 1})
    assert counts(result) == [1, 1, 1]
    assert sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps) == sorted(
        [(A, 0), (B, 0), (C, 0)]
    )


def test_heterogeneous_balances_each_topic_among_its_subscribers():
    subs = {"m1": {A}, "m2": {A, B}, "m3": {B}}
    result = simple_assign(subs, {A: 4, B: 2})
    assert set(result["m1"]) == {A} and set(result["m3"]) == {B}
    assert sorted(result["m1"][A] + result["m2"][A]) == [0, 1, 2, 3]
    assert len(result["m1"][A]) == len(result["m2"][A]) == 2
    assert sorted(result["m2"][B] + result["m3"][B]) == [0, 1]


def test_topics_not_offered_are_ignored():
    """A subscribed topic without assignable partitions (unknown, uninitialized) is skipped."""
    result = simple_assign({"m1": {A, B}, "m2": {A}}, {A: 2})
    assert counts(result) == [1, 1]


def test_explicit_partition_collections():
    result = simple_assign(members(2), {A: frozenset({1, 5, 7})})
    assert sorted(p for a in result.values() for p in a[A]) == [1, 5, 7]


def test_sticky_when_a_member_leaves():
    before = simple_assign(members(10), {A: 100})
    gone = "m004"
    subs = members(10)
    del subs[gone]
    after = simple_assign(subs, {A: 100}, current=before)
    for member_id in subs:
        assert set(before[member_id][A]) <= set(after[member_id][A]), "nobody loses a partition"
    moved = set(before[gone][A])
    gained = set().union(*(set(after[m][A]) - set(before[m][A]) for m in subs))
    assert gained == moved


def test_sticky_when_a_member_joins():
    before = simple_assign(members(4), {A: 12})
    subs = members(5)
    after = simple_assign(subs, {A: 12}, current=before)
    lost = sum(len(set(before[m][A]) - set(after[m][A])) for m in before)
    assert len(after["m004"][A]) == 2
    assert lost == 2, "only what the new member needs moves"


def test_current_entries_that_are_no_longer_valid_are_dropped():
    current = {"m1": {A: [0, 1, 9], B: [0]}}  # 9 is beyond the topic, B is not subscribed
    result = simple_assign({"m1": {A}}, {A: 3, B: 1}, current=current)
    assert result == {"m1": {A: [0, 1, 2]}}


def test_overshared_partition_sheds_members():
    current = {"m1": {A: [0]}, "m2": {A: [0]}, "m3": {A: [0]}}
    result = simple_assign({"m1": {A}, "m2": {A}, "m3": {A}}, {A: 3}, current=current)
    assert counts(result) == [1, 1, 1]
    assert {len(v) for v in holders(result).values()} == {1}


@pytest.mark.parametrize("topics", [{A: -1}, {A: True}, {A: [-1]}, {A: ["x"]}])
def test_bad_topics_raise_value_error(topics):
    with pytest.raises(ValueError):
        simple_assign(members(1), topics)


TOPIC_IDS = [A, B, C]


@st.composite
def assignment_inputs(draw):
    n_members = draw(st.integers(1, 9))
    sizes = {t: draw(st.integers(0, 8)) for t in TOPIC_IDS[: draw(st.integers(1, 3))]}
    topic_list = list(sizes)
    homogeneous = draw(st.booleans())
    shared = draw(st.sets(st.sampled_from(topic_list), min_size=1))
    subs = {
        f"m{i}": set(shared) if homogeneous else draw(st.sets(st.sampled_from(topic_list), min_size=0))
        for i in range(n_members)
    }
    current = {}
    for member_id in subs:
        if draw(st.booleans()):
            current[member_id] = {
                t: draw(st.lists(st.integers(0, 9), max_size=5, unique=True)) for t in topic_list if draw(st.booleans())
            }
    return subs, sizes, current


def _check_properties(subs, sizes, result):
    assert set(result) == set(subs)
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in subs[member_id], "only subscribed topics"
            assert partitions and partitions == sorted(set(partitions)), "ascending, no duplicates, no empty lists"
            assert all(0 <= p < sizes[topic_id] for p in partitions), "only existing partitions"
    restricted = {m: frozenset(t for t in s if sizes.get(t, 0) > 0) for m, s in subs.items()}
    if len(set(restricted.values())) == 1:
        pool = [(t, p) for t in next(iter(restricted.values())) for p in range(sizes[t])]
        if pool:
            sharing = math.ceil(len(subs) / len(pool))
            per_item: dict = {}
            for member_id, assignment in result.items():
                for t, ps in assignment.items():
                    for p in ps:
                        per_item.setdefault((t, p), set()).add(member_id)
            assert set(per_item) == set(pool), "every partition has a member"
            assert all(len(v) <= sharing for v in per_item.values())
            assert all(result[m] for m in subs), "every member has a partition"
            if len(pool) >= len(subs):
                c = counts(result)
                assert c[-1] - c[0] <= 1, f"balanced {c}"
    else:
        for topic_id, size in sizes.items():
            subscribers = [m for m in subs if topic_id in subs[m]]
            if not subscribers or size == 0:
                continue
            h = holders(result, topic_id)
            assert sorted(h) == list(range(size)), "every partition of a subscribed topic has a member"
            assert all(len(v) <= math.ceil(len(subscribers) / size) for v in h.values())
            assert all(result[m].get(topic_id) for m in subscribers), "every subscriber gets some of each topic"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(assignment_inputs())
def test_properties_over_random_inputs(inputs):
    subs, sizes, current = inputs
    result = simple_assign(subs, sizes, current=current)
    _check_properties(subs, sizes, result)
    assert simple_assign(subs, sizes, current=current) == result, "deterministic"
    again = simple_assign(subs, sizes, current=result)
    _check_properties(subs, sizes, again)
    assert again == result, "stable when nothing changed"
