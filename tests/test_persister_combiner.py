"""The state-batch combiner against a brute-force per-offset model (higher delivery count wins, then
higher state)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persister import combine
from persister.combiner import is_canonical, merge_canonical
from sharegroup.types import StateBatch

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def model(batches_so_far, new_batches, start_offset):
    """Per offset, the highest (count, state) of the batches covering it, then maximal equal runs."""
    best: dict[int, tuple[int, int]] = {}
    for first, last, state, count in list(batches_so_far or []) + list(new_batches or []):
        for offset in range(first, last + 1):
            if start_offset != -1 and offset < start_offset:
                continue
            priority = (count, state)
            if offset not in best or priority > best[offset]:
                best[offset] = priority
    runs: list[list[int]] = []
    for offset in sorted(best):
        count, state = best[offset]
        if runs and runs[-1][1] + 1 == offset and runs[-1][2] == state and runs[-1][3] == count:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, state, count])
    return [StateBatch(*run) for run in runs]


def assert_minimal(batches):
    for batch in batches:
        assert type(batch) is StateBatch and batch.first_offset <= batch.last_offset
    for a, b in zip(batches, batches[1:]):
        assert a.last_offset < b.first_offset, "sorted and disjoint"
        touching = a.last_offset + 1 == b.first_offset
        assert not (touching and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count))


# -- examples -----------------------------------------------------------------------------------


def test_priority_not_recency_available_loses_to_archived_at_equal_count():
    assert combine([(0, 9, ARCHIVED, 1)], [(5, 14, AVAILABLE, 1)], -1) == [
        StateBatch(0, 9, ARCHIVED, 1),
        StateBatch(10, 14, AVAILABLE, 1),
    ]


def test_higher_count_beats_terminal_state():
    assert combine([(0, 9, ACKNOWLEDGED, 1)], [(0, 9, AVAILABLE, 2)], -1) == [StateBatch(0, 9, AVAILABLE, 2)]


def test_later_lower_priority_write_loses_on_the_overlap():
    so_far = [(0, 9, AVAILABLE, 3)]
    assert combine(so_far, [(3, 5, ACKNOWLEDGED, 2)], -1) == [StateBatch(0, 9, AVAILABLE, 3)]


def test_prune_drops_below_and_clips_straddling():
    so_far = [(0, 4, ARCHIVED, 1), (5, 9, AVAILABLE, 1)]
    new = [(8, 12, ACKNOWLEDGED, 1)]
    assert combine(so_far, new, 7) == [StateBatch(7, 7, AVAILABLE, 1), StateBatch(8, 12, ACKNOWLEDGED, 1)]


def test_start_offset_minus_one_means_no_pruning():
    assert combine([(0, 4, ARCHIVED, 1)], [], -1) == [StateBatch(0, 4, ARCHIVED, 1)]


def test_start_offset_past_everything_leaves_nothing():
    assert combine([(0, 4, ARCHIVED, 1)], [(2, 9, AVAILABLE, 1)], 10) == []


def test_gaps_are_preserved_and_equal_touching_runs_coalesce():
    got = combine([(0, 4, AVAILABLE, 1), (5, 9, AVAILABLE, 1), (20, 25, ACKNOWLEDGED, 1)], None, -1)
    assert got == [StateBatch(0, 9, AVAILABLE, 1), StateBatch(20, 25, ACKNOWLEDGED, 1)]


def test_touching_runs_with_different_state_stay_apart():
    got = combine([(0, 4, AVAILABLE, 1)], [(5, 9, ARCHIVED, 1)], -1)
    assert got == [StateBatch(0, 4, AVAILABLE, 1), StateBatch(5, 9, ARCHIVED, 1)]


def test_inner_winner_splits_an_outer_batch():
    got = combine([(0, 20, AVAILABLE, 1)], [(5, 9, ARCHIVED, 2)], -1)
    assert got == [StateBatch(0, 4, AVAILABLE, 1), StateBatch(5, 9, ARCHIVED, 2), StateBatch(10, 20, AVAILABLE, 1)]


def test_none_inputs_and_single_batch_come_back_as_state_batches():
    assert combine(None, None, -1) == []
    assert combine(None, [(3, 3, AVAILABLE, 0)], 0) == [StateBatch(3, 3, AVAILABLE, 0)]
    assert type(combine([[1, 2, 0, 1]], None, -1)[0]) is StateBatch


def test_unsorted_overlapping_new_batches_are_resolved_among_themselves():
    new = [(10, 19, AVAILABLE, 1), (0, 14, ACKNOWLEDGED, 1), (12, 12, AVAILABLE, 5)]
    assert combine([], new, -1) == model([], new, -1)


def test_first_after_last_is_refused():
    with pytest.raises(ValueError):
        combine([(5, 4, AVAILABLE, 1)], [(0, 9, AVAILABLE, 1)], -1)


def test_large_inputs_stay_fast_and_correct():
    so_far = [(i * 10, i * 10 + 9, (i % 3) * 2, i % 4) for i in range(20_000)]
    new = [(i * 10 + 5, i * 10 + 14, 2, 2) for i in range(0, 20_000, 2)]
    got = combine(so_far, new, 1_000)
    assert_minimal(got)
    assert got[0].first_offset == 1_000


# -- properties against the model ----------------------------------------------------------------

batch = st.builds(
    lambda first, length, state, count: (first, first + length, state, count),
    st.integers(0, 40),
    st.integers(0, 12),
    st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
    st.integers(0, 4),
)
batches = st.lists(batch, max_size=12)
start_offsets = st.one_of(st.just(-1), st.integers(0, 55))


@settings(max_examples=400, deadline=None)
@given(batches, batches, start_offsets)
def test_matches_per_offset_model(so_far, new, start_offset):
    got = combine(so_far, new, start_offset)
    assert got == model(so_far, new, start_offset)
    assert_minimal(got)
    if start_offset != -1:
        assert all(b.first_offset >= start_offset for b in got)


@settings(max_examples=200, deadline=None)
@given(batches, batches, start_offsets)
def test_order_of_the_lists_does_not_matter(so_far, new, start_offset):
    assert combine(so_far, new, start_offset) == combine(new, so_far, start_offset)


@settings(max_examples=200, deadline=None)
@given(batches, batches, start_offsets)
def test_idempotent_and_incremental(so_far, new, start_offset):
    once = combine(so_far, new, start_offset)
    assert combine(once, [], start_offset) == once
    assert combine(combine(so_far, [], start_offset), new, start_offset) == once


# -- the fast paths for canonical state ------------------------------------------------------------

# Runs that often touch, abut or overlap a canonical state, as writes do.
near_batches = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 6), st.sampled_from([0, 2, 4]), st.integers(0, 3)).map(
        lambda t: StateBatch(t[0], t[0] + t[1], t[2], t[3])
    ),
    max_size=6,
)


@settings(max_examples=600, deadline=None)
@given(near_batches, near_batches, st.one_of(st.just(-1), st.integers(0, 70)), st.booleans())
def test_merge_canonical_is_combine_for_a_canonical_state(state, new, start_offset, canonical_new):
    state = tuple(combine((), state, -1))  # any canonical state (its own start does not matter)
    if canonical_new:
        new = combine((), new, start_offset)  # what a coordinator's delta holds: the fast path
    merged = merge_canonical(state, new, start_offset)
    assert type(merged) is tuple and all(type(b) is StateBatch for b in merged)
    assert list(merged) == combine(state, new, start_offset) == model(state, new, start_offset)


@settings(max_examples=400, deadline=None)
@given(near_batches, st.one_of(st.just(-1), st.integers(0, 70)))
def test_is_canonical_means_combine_would_change_nothing(batches, start_offset):
    assert is_canonical(batches, start_offset) == (combine((), batches, start_offset) == list(batches))
    assert is_canonical(combine((), batches, start_offset), start_offset)
    assert is_canonical(combine((), batches, -1))


def test_is_canonical_wants_state_batches_of_plain_ints():
    assert is_canonical([StateBatch(0, 1, 2, 1)])
    assert not is_canonical([(0, 1, 2, 1)])  # a plain tuple: combine would return a StateBatch
    assert not is_canonical([StateBatch(0, 1, True, 1)])
    assert not is_canonical([StateBatch(0, 1, 2, 1), StateBatch(2, 3, 2, 1)])  # touching, equal: coalesce
    assert is_canonical([StateBatch(0, 1, 2, 1), StateBatch(2, 3, 2, 2)])
    assert not is_canonical([StateBatch(5, 6, 2, 1)], 6)  # below the start offset: prune
