"""Pruning decisions of the share coordinator: which log offsets are redundant, which keys are cold.

The state log is not key-compacted: Kafka's share coordinator deletes the log below the lowest offset
any live key still needs on replay, and re-checkpoints keys that stay idle so that they stop pinning old
segments. These functions decide; the coordinator appends the checkpoints and asks its log to
delete (a log deletes whole segments only, so it may keep more than asked).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from .state_records import ShareCheckpoint, StateKey
from .state_replay import KeyState

__all__ = [
    "lowest_live_checkpoint_offset",
    "last_redundant_offset",
    "all_cold_and_unchanged",
    "cold_keys",
    "cold_checkpoint",
]


def lowest_live_checkpoint_offset(key_states: Iterable[KeyState]) -> int | None:
    """The lowest log offset of any live key's latest checkpoint, or None when no key is live.

    Tombstoned keys are gone from the map, so they never pin it (KAFKA-19695). A key whose epoch fence
    is above what its checkpoint carries (only after a re-initialize, until the next read) counts at the
    record that set the fence instead (`KeyState.pin_offset`), so pruning never forgets a fence. O(keys).
    """
    return min((key_state.pin_offset for key_state in key_states), default=None)


def last_redundant_offset(key_states: Iterable[KeyState], log_end_offset: int, lowest_append_floor: int | None) -> int:
    """Exclusive bound below which every record is redundant: each live key has its full state in a
    checkpoint at or above it. Appends still in flight hold it at the log end they started from."""
    bound = lowest_live_checkpoint_offset(key_states)
    if bound is None:
        bound = log_end_offset
    if lowest_append_floor is not None:
        bound = min(bound, lowest_append_floor)
    return bound


def all_cold_and_unchanged(key_states: Iterable[KeyState]) -> bool:
    """Whether every key's latest checkpoint is an idle (cold) one with no delta after it: then an idle
    round has nothing to do, so an idle coordinator does not rewrite itself forever. A cold checkpoint
    is told by its write time differing from its create time (`cold_checkpoint` keeps the create time)."""
    return all(
        key_state.deltas_since_checkpoint == 0
        and key_state.state.create_timestamp_ms != key_state.state.write_timestamp_ms
        for key_state in key_states
    )


def cold_keys(states: Mapping[StateKey, KeyState], now_ms: int, interval_ms: int) -> list[StateKey]:
    """The keys whose latest checkpoint was written `interval_ms` ago or longer.

    "Last write" is the checkpoint's write timestamp, as in Kafka: deltas carry no time, and a key that
    only receives deltas pins the log just as much as an idle one."""
    return [key for key, key_state in states.items() if now_ms - key_state.state.write_timestamp_ms >= interval_ms]


def cold_checkpoint(key_state: KeyState | None, now_ms: int, interval_ms: int) -> ShareCheckpoint | None:
    """The fresh checkpoint of a key that is (still) cold: the same content, the next checkpoint epoch,
    the same create time and write time now; None when the key is gone or no longer cold."""
    if key_state is None or now_ms - key_state.state.write_timestamp_ms < interval_ms:
        return None
    current = key_state.state
    return dataclasses.replace(current, checkpoint_epoch=current.checkpoint_epoch + 1, write_timestamp_ms=now_ms)
