"""The invariants of the coordinator's replayed state, one `KeyState` per live key, as assertions.

`ShareCoordinator._check` runs them (tests call it after each step); they hold after every replay, so
a rule that ever leaves the state inconsistent fails at the step that broke it.
"""

from __future__ import annotations

from typing import Mapping

from sharegroup.types import DELIVERY_COUNT_MAX, RECORD_STATE_IDS, StateBatch

from .combiner import is_canonical
from .state_records import ShareCheckpoint, StateKey
from .state_replay import KeyState

__all__ = ["check_key_states"]


def check_key_states(states: Mapping[StateKey, KeyState], log_start: int, log_end: int) -> None:
    """Assert every invariant of `states`, replayed from a log whose offsets are [log_start, log_end)."""
    for key, key_state in states.items():
        assert type(key) is StateKey and key.partition >= 0, key
        current = key_state.state
        assert type(current) is ShareCheckpoint, current
        assert current.checkpoint_epoch >= 0 and current.state_epoch >= 0 and current.leader_epoch >= 0, current
        assert key_state.leader_epoch_max >= current.leader_epoch, key_state
        assert key_state.state_epoch_max >= current.state_epoch, key_state
        assert key_state.deltas_since_checkpoint >= 0, key_state
        assert log_start <= key_state.checkpoint_offset < log_end, (key_state, log_start, log_end)
        assert log_start <= key_state.pin_offset <= key_state.checkpoint_offset, key_state
        assert key_state.leader_fence_offset < log_end and key_state.state_fence_offset < log_end, key_state
        assert current.start_offset >= -1 and current.delivery_complete_count >= -1, current
        previous = None
        for batch in current.state_batches:
            first, last, state, count = batch
            assert type(batch) is StateBatch and 0 <= first <= last, batch
            assert current.start_offset == -1 or first >= current.start_offset, (batch, current.start_offset)
            assert state in RECORD_STATE_IDS and 0 <= count <= DELIVERY_COUNT_MAX, batch
            if previous is not None:
                assert previous.last_offset < first, "batches must be sorted and disjoint"
                assert not (
                    previous.last_offset + 1 == first
                    and previous.delivery_state == state
                    and previous.delivery_count == count
                ), "touching batches with equal state and count must be coalesced"
            previous = batch
        assert not key_state.canonical or is_canonical(current.state_batches), ("not canonical", key_state)
