"""Replay: the one implementation of how a durable record changes a key's state (Kafka's replay).

The share coordinator changes its in-memory state only by replaying the records it appended, and
rebuilds it on open by replaying the whole log; the audit (`sharegroup.audit`) replays each key's
record stream with the same functions and checks its invariants around them. So there is one set of
replay rules, here:

- `KeyState`: what is known of one live key after replay (its state in checkpoint form, the epoch
  fences and the log offsets of the records that set them, deltas since the latest checkpoint);
- `apply_record(key_state, offset, record)`: one record applied to one key's state (a checkpoint
  replaces the state but not the fences, a delta is combined into it, a tombstone forgets the key);
- `replay_record(states, offset, key, record)`: the same on a map of keys (the coordinator's);
- `replay_log(log)`: a whole RecordLog replayed into a new map of keys, in bulk when the log offers
  decoded rows, with the same result as replaying it record by record.
"""

from __future__ import annotations

import dataclasses

from .combiner import combine, is_canonical, merge_canonical
from .frame_rows import KIND_CHECKPOINT, KIND_DELTA, KeyTable
from .state_log_api import BulkRecordLog, RecordLog
from .state_records import ShareCheckpoint, ShareDelta, ShareRecord, StateKey, new_checkpoint, unflatten_batches

__all__ = ["KeyState", "apply_record", "replay_record", "replay_log", "replay_rows"]


class KeyState:
    """What the coordinator knows of one live key; every field but the caches is derived by replay alone.

    `state`: the merged current state, in checkpoint form (Kafka's ShareGroupOffset).
    `leader_epoch_max` / `state_epoch_max`: the highest epochs replayed (Kafka's leaderEpochMap and
    stateEpochMap): the fences. `deltas_since_checkpoint`: deltas replayed since the latest checkpoint
    (snapshotUpdateCount). `checkpoint_offset`: log offset of the latest checkpoint.
    `leader_fence_offset` / `state_fence_offset`: log offsets of the latest records carrying the fences.
    Caches (not part of `dump`): `canonical`, whether `state.state_batches` is in the combiner's output
    form (a checkpoint read from a log need not be), and `encoded_key`, the key's msgpack bytes.
    """

    __slots__ = (
        "state",
        "leader_epoch_max",
        "state_epoch_max",
        "deltas_since_checkpoint",
        "checkpoint_offset",
        "leader_fence_offset",
        "state_fence_offset",
        "canonical",
        "encoded_key",
    )

    def __init__(
        self,
        state: ShareCheckpoint,
        leader_epoch_max: int,
        state_epoch_max: int,
        deltas_since_checkpoint: int,
        checkpoint_offset: int,
        leader_fence_offset: int,
        state_fence_offset: int,
        canonical: bool,
    ) -> None:
        self.state = state
        self.leader_epoch_max = leader_epoch_max
        self.state_epoch_max = state_epoch_max
        self.deltas_since_checkpoint = deltas_since_checkpoint
        self.checkpoint_offset = checkpoint_offset
        self.leader_fence_offset = leader_fence_offset
        self.state_fence_offset = state_fence_offset
        self.canonical = canonical
        self.encoded_key: bytes | None = None

    @property
    def pin_offset(self) -> int:
        """The lowest log offset this key still needs on replay: its latest checkpoint, or an older
        record that set a fence the state no longer carries (a re-initialize resets the leader epoch to
        0 but keeps the fence, which must survive pruning)."""
        pin = self.checkpoint_offset
        if self.leader_epoch_max > self.state.leader_epoch:
            pin = min(pin, self.leader_fence_offset)
        if self.state_epoch_max > self.state.state_epoch:
            pin = min(pin, self.state_fence_offset)
        return pin

    def dump(self) -> tuple:
        """The replayed fields as one comparable tuple (the state as `dataclasses.astuple` gives it)."""
        return (
            dataclasses.astuple(self.state),
            self.leader_epoch_max,
            self.state_epoch_max,
            self.deltas_since_checkpoint,
            self.checkpoint_offset,
            self.leader_fence_offset,
            self.state_fence_offset,
        )

    def __repr__(self) -> str:
        return f"KeyState{self.dump()!r}"



def apply_record(
    key_state: KeyState | None, offset: int, record: ShareRecord, *, canonical_delta: bool = False
) -> KeyState | None:
    """Apply one durable record at log `offset` to a key's state (None: the key has none); return the
    key's state after it: `key_state` itself, changed in place, or a new KeyState for a key that starts
    here, or None after a tombstone (as Kafka's share coordinator shard replays its records).

    A checkpoint replaces the state as written but keeps the fences (maxima over every record since the
    key was created); a delta is combined into the state (priority by delivery count, then state; its
    start offset and leader epoch -1 mean unchanged); a delta that starts a key (only in a log pruned
    by someone else) builds the state from itself, with state epoch and timestamps 0, as Kafka does.
    `canonical_delta=True` says the delta's batches are already in the combiner's output form, not below
    its start offset (the coordinator's own deltas are built so), which spares checking them again.
    """
    if record is None:
        return None
    if type(record) is ShareDelta or isinstance(record, ShareDelta):
        if key_state is None:
            # It pins pruning here until a checkpoint.
            leader_epoch = max(record.leader_epoch, 0)
            state = ShareCheckpoint(
                record.checkpoint_epoch,
                0,
                leader_epoch,
                record.start_offset,
                record.delivery_complete_count,
                0,
                0,
                combine((), record.state_batches, record.start_offset),
            )
            return KeyState(state, leader_epoch, 0, 1, offset, offset, offset, True)
        old = key_state.state
        start_offset = old.start_offset if record.start_offset == -1 else record.start_offset
        leader_epoch = old.leader_epoch if record.leader_epoch == -1 else record.leader_epoch
        if key_state.canonical:
            batches = merge_canonical(old.state_batches, record.state_batches, start_offset, canonical_delta)
        else:
            batches = tuple(combine(old.state_batches, record.state_batches, start_offset))
            key_state.canonical = True
        key_state.state = new_checkpoint(
            old.checkpoint_epoch,
            old.state_epoch,
            leader_epoch,
            start_offset,
            record.delivery_complete_count,
            old.create_timestamp_ms,
            old.write_timestamp_ms,
            batches,
        )
        if record.leader_epoch >= key_state.leader_epoch_max:
            key_state.leader_epoch_max = record.leader_epoch
            key_state.leader_fence_offset = offset
        key_state.deltas_since_checkpoint += 1
        return key_state
    if isinstance(record, ShareCheckpoint):
        canonical = is_canonical(record.state_batches)
        if key_state is None:
            return KeyState(record, record.leader_epoch, record.state_epoch, 0, offset, offset, offset, canonical)
        # ">=": the latest record carrying a fence is the one replay must keep, and it only moves
        # forward, so a key's pin never drops below a bound already pruned to.
        if record.leader_epoch >= key_state.leader_epoch_max:
            key_state.leader_epoch_max = record.leader_epoch
            key_state.leader_fence_offset = offset
        if record.state_epoch >= key_state.state_epoch_max:
            key_state.state_epoch_max = record.state_epoch
            key_state.state_fence_offset = offset
        key_state.state = record
        key_state.canonical = canonical
        key_state.deltas_since_checkpoint = 0
        key_state.checkpoint_offset = offset
        return key_state
    raise TypeError(f"cannot replay a {type(record).__name__}")


def replay_record(
    states: dict[StateKey, KeyState], offset: int, key: StateKey, record: ShareRecord
) -> ShareCheckpoint | None:
    """`apply_record` on the key's entry of `states` (added, changed or removed); return the key's
    state after the record (None after a tombstone)."""
    key_state = states.get(key)
    after = apply_record(key_state, offset, record)
    if after is None:
        states.pop(key, None)
        return None
    if after is not key_state:
        states[key] = after
    return after.state


def replay_log(log: RecordLog) -> dict[StateKey, KeyState]:
    """Every key's state after replaying every record of `log`, in the order the keys were created;
    the same result as `replay_record` on each record in turn (a test holds the two equal on random
    histories). A `BulkRecordLog` is replayed in bulk from decoded rows (`replay_rows`)."""
    if isinstance(log, BulkRecordLog):
        return replay_rows(log.read_rows)
    states: dict[StateKey, KeyState] = {}
    for entry in log.read_all():
        replay_record(states, entry.offset, entry.key, entry.record)
    return states


def replay_rows(read_rows) -> dict[StateKey, KeyState]:
    """The bulk replay: `read_rows(keys)` yields (first offset, rows) batches in log order (see
    `BulkRecordLog.read_rows`); they are folded per key in one pass that keeps, for each live key,
    only what the state after the last record still depends on:

    - a tombstone forgets the key, so nothing before a key's last tombstone matters;
    - a checkpoint replaces the state but not the fences, which are maxima (with the offset of the
      latest record reaching them) over every record since the key was created, so each record still
      updates them, and the latest checkpoint (or the delta that created the key) becomes the base;
      the deltas before it are dropped;
    - the deltas after the base are combined once, at the end: `combine(base, d1 + ... + dm, s_m)`.
      That equals folding them one at a time (`combine(combine(base, d1, s_1), d2, s_2)`, ...) when the
      start offsets s_0 <= s_1 <= ... <= s_m never move backwards (s_0 the base's, s_i the start after
      delta i, a delta's -1 meaning "unchanged" and an unset start -1 being lowest): a batch's offset
      survives the fold iff it is at or above every s_i from the batch's delta on, i.e. at or above
      s_m, and its value is the highest (delivery count, state) of all batches covering it, which does
      not depend on their order (the combiner's priority is not recency). The coordinator never
      writes a start offset that moves backwards; a log that does (written by someone else) gets the
      one-at-a-time fold for that key.

    Runtime complexity: O(records) for the fold, plus one combine per live key over its latest base
    and the deltas after it (at most N + 1 records' batches when the log was written by a coordinator
    with the same N).
    """
    # Per key id, None or the key's fold: [base offset, base row, leader_epoch_max,
    # leader_fence_offset, state_epoch_max, state_fence_offset, rows of the deltas after the base,
    # offset of the record that created the state]. Lists of flat int tuples, not objects: this
    # loop runs once per record of the log.
    folds: list = []
    keys = KeyTable()
    for offset, rows in read_rows(keys):
        if len(folds) < len(keys.keys):
            folds += [None] * (len(keys.keys) - len(folds))
        for row in rows:
            key_id = row[0]
            fold = folds[key_id]
            kind = row[1]
            if kind == KIND_DELTA:  # (key id, kind, checkpoint_epoch, leader_epoch, start_offset, ...)
                if fold is None:  # a delta starts the key (a log pruned by someone else)
                    leader_epoch = row[3] if row[3] > 0 else 0
                    folds[key_id] = [offset, row, leader_epoch, offset, 0, offset, [], offset]
                else:
                    if row[3] >= fold[2]:
                        fold[2] = row[3]
                        fold[3] = offset
                    fold[6].append(row)
            elif kind == KIND_CHECKPOINT:  # (key id, kind, checkpoint_epoch, state_epoch, leader_epoch, ...)
                if fold is None:
                    folds[key_id] = [offset, row, row[4], offset, row[3], offset, [], offset]
                else:
                    if row[4] >= fold[2]:
                        fold[2] = row[4]
                        fold[3] = offset
                    if row[3] >= fold[4]:
                        fold[4] = row[3]
                        fold[5] = offset
                    fold[0] = offset
                    fold[1] = row
                    fold[6].clear()
            else:  # a tombstone forgets the key
                folds[key_id] = None
            offset += 1
    # Insert the keys in the order their states were created, as one-by-one replay does.
    live = sorted((fold[7], key_id) for key_id, fold in enumerate(folds) if fold is not None)
    return {keys.keys[key_id]: _fold_key_state(*folds[key_id][:7]) for _created, key_id in live}


def _fold_key_state(
    base_offset: int,
    base: tuple,
    leader_epoch_max: int,
    leader_fence_offset: int,
    state_epoch_max: int,
    state_fence_offset: int,
    deltas: list,
) -> KeyState:
    """A key's replayed state from its fold (see `replay_rows`): the base row (its
    latest checkpoint, or the delta that created it), then the rows of the deltas after it, combined
    once when their start offsets never move backwards, one at a time otherwise."""
    if base[1] == KIND_CHECKPOINT:
        (_, _, checkpoint_epoch, state_epoch, leader_epoch, start_offset, delivery_complete_count, create_ms,
         write_ms, flat) = base
        batches = unflatten_batches(flat)
        deltas_since_checkpoint = len(deltas)
        canonical = False  # a checkpoint read from a log is taken as it is, as `apply_record` takes it
    else:  # the delta that started the key, replayed as `apply_record` does
        _, _, checkpoint_epoch, leader_epoch, start_offset, delivery_complete_count, flat = base
        state_epoch = create_ms = write_ms = 0
        leader_epoch = leader_epoch if leader_epoch > 0 else 0
        batches = tuple(combine((), unflatten_batches(flat), start_offset))
        deltas_since_checkpoint = 1 + len(deltas)
        canonical = True
    if deltas:
        base_start_offset = start_offset
        monotone = True
        for _, _, _, delta_leader_epoch, delta_start_offset, delta_delivery_complete_count, _ in deltas:
            if delta_start_offset != -1:
                if delta_start_offset < start_offset:
                    monotone = False
                start_offset = delta_start_offset
            if delta_leader_epoch != -1:
                leader_epoch = delta_leader_epoch
            delivery_complete_count = delta_delivery_complete_count
        if monotone:
            flat_all = [x for delta in deltas for x in delta[6]]
            batches = tuple(combine(batches, unflatten_batches(flat_all), start_offset))
        else:
            start = base_start_offset
            for delta in deltas:
                if delta[4] != -1:
                    start = delta[4]
                batches = tuple(combine(batches, unflatten_batches(delta[6]), start))
        canonical = True
    if not canonical:
        canonical = is_canonical(batches)
    state = new_checkpoint(
        checkpoint_epoch, state_epoch, leader_epoch, start_offset, delivery_complete_count, create_ms, write_ms, batches
    )
    return KeyState(
        state,
        leader_epoch_max,
        state_epoch_max,
        deltas_since_checkpoint,
        base_offset,
        leader_fence_offset,
        state_fence_offset,
        canonical,
    )

