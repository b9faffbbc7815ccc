"""The consumer-group assignors: `uniform` (balanced, sticky, one member per partition) and `range`
(contiguous ranges per topic); plus the `group.consumer.*` settings."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharegroup.coordinator import ConsumerGroupConfig, range_assign, uniform_assign

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def flat(result):
    return sorted((t, p, m) for m, topics in result.items() for t, ps in topics.items() for p in ps)


def test_uniform_homogeneous_is_balanced():
    result = uniform_assign({"m1": {A}, "m2": {A}, "m3": {A}}, {A: 7})
    assert sorted(len(r.get(A, [])) for r in result.values()) == [2, 2, 3]
    assert sorted(p for r in result.values() for p in r.get(A, [])) == list(range(7))


def test_uniform_is_sticky_when_a_member_joins():
    before = uniform_assign({"m1": {A}, "m2": {A}}, {A: 6})
    after = uniform_assign({"m1": {A}, "m2": {A}, "m3": {A}}, {A: 6}, current=before)
    for m in ("m1", "m2"):
        assert set(after[m][A]) <= set(before[m][A]) and len(after[m][A]) == 2
    assert len(after["m3"][A]) == 2


def test_uniform_more_members_than_partitions_leaves_some_empty():
    result = uniform_assign({"m1": {A}, "m2": {A}, "m3": {A}}, {A: 2})
    assert sorted(len(r.get(A, [])) for r in result.values()) == [0, 1, 1]


def test_uniform_heterogeneous_gives_only_subscribed_topics_and_balances_totals():
    result = uniform_assign({"m1": {A}, "m2": {A, B}, "m3": {B}}, {A: 4, B: 5})
    assert set(result["m1"]) <= {A} and set(result["m3"]) <= {B}
    totals = sorted(sum(map(len, r.values())) for r in result.values())
    assert totals == [3, 3, 3]


def test_range_gives_contiguous_ranges_by_member_id():
    result = range_assign({"b": {A, B}, "a": {A, B}}, {A: 3, B: 5})
    assert result == {"a": {A: [0, 1], B: [0, 1, 2]}, "b": {A: [2], B: [3, 4]}}


@settings(max_examples=80, deadline=None)
@given(
    subs=st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
                         st.sets(st.sampled_from([A, B, C]), min_size=1), min_size=1),
    counts=st.tuples(*[st.integers(0, 7)] * 3),
    assignor=st.sampled_from([uniform_assign, range_assign]),
    sticky=st.booleans(),
)
def test_every_partition_goes_to_exactly_one_subscriber(subs, counts, assignor, sticky):
    topics = dict(zip([A, B, C], counts))
    current = uniform_assign(subs, {t: max(0, n - 1) for t, n in topics.items()}) if sticky else None
    result = assignor(subs, topics, current)
    assert set(result) == set(subs)
    pairs = flat(result)
    assert [(t, p) for t, p, _ in pairs] == sorted({(t, p) for t in topics for p in range(topics[t])
                                                    if any(t in s for s in subs.values())})
    for t, _p, m in pairs:
        assert t in subs[m]


def test_consumer_config_defaults_and_bounds():
    c = ConsumerGroupConfig()
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_size, c.assignors) == (
        45_000, 5_000, 2**31 - 1, ("uniform", "range"))
    assert c.default_assignor == "uniform"
    for kw, key in ((dict(session_timeout_ms=44_999), "group.consumer.session.timeout.ms"),
                    (dict(heartbeat_interval_ms=16_000), "group.consumer.heartbeat.interval.ms"),
                    (dict(max_size=0), "group.consumer.max.size"),
                    (dict(assignors=("sticky",)), "group.consumer.assignors"),
                    (dict(assignors=()), "group.consumer.assignors")):
        with pytest.raises(ValueError, match=key):
            ConsumerGroupConfig(**kw)
