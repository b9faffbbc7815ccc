"""A large valid state log, generated quickly for benchmarks: frames written straight into segments.

`write_synthetic_log(dir, records)` writes what a share coordinator with N deltas between checkpoints
would have written for `keys` busy share-partitions: every key starts with the checkpoint of its
initialization; then, in random interleaving, each write is a delta of one run of offsets (new records
delivered and released, redeliveries, acknowledgements that move the start offset, archives at the
delivery count limit) and every (N + 1)th write of a key is a checkpoint of its combined state. Every
audit invariant holds, so an audit replays the whole log and reports nothing.

    python -m sharegroup.audit.synthetic DIR [RECORDS]
"""

from __future__ import annotations

import os
import random
import sys
import uuid

from persister.state_log_files import segment_file_name
from persister.state_records import ShareCheckpoint, ShareDelta, StateKey, encode_record
from sharegroup.types import RecordState, StateBatch

__all__ = ["write_synthetic_log"]

AVAILABLE = int(RecordState.AVAILABLE)
ACKNOWLEDGED = int(RecordState.ACKNOWLEDGED)
ARCHIVED = int(RecordState.ARCHIVED)
_RUNS_AHEAD_MAX = 6  # in-flight runs per share-partition: a small window, as with prompt consumers


class _Partition:
    """One share-partition's state: start offset and the runs [first, last, state, count] from it."""

    __slots__ = ("key", "start", "runs", "checkpoint_epoch", "deltas", "done")

    def __init__(self, key: StateKey, start: int) -> None:
        self.key = key
        self.start = start
        self.runs: list[list[int]] = []
        self.checkpoint_epoch = 0
        self.deltas = 0
        self.done = 0  # delivery complete count


def _step(p: _Partition, rng: random.Random, limit: int) -> StateBatch | None:
    """One write's change (a run of offsets), applied to `p`; the start offset moves past leading
    terminal runs. Returns the batch to persist (None when the change falls below the new start)."""
    runs = p.runs
    open_runs = [r for r in runs if r[2] == AVAILABLE]
    if not open_runs or (len(runs) < _RUNS_AHEAD_MAX and rng.random() < 0.3):
        first = runs[-1][1] + 1 if runs else p.start
        run = [first, first + rng.randint(0, 7), AVAILABLE, 1]  # new records delivered, then released
        runs.append(run)
        return StateBatch(*run)
    run = open_runs[0] if len(open_runs) == 1 or rng.random() < 0.7 else open_runs[1]
    if run[3] >= limit:
        run[2] = ARCHIVED  # cannot be delivered again
    elif rng.random() < 0.8:
        run[2], run[3] = ACKNOWLEDGED, run[3] + 1
    else:
        run[3] += 1  # redelivered and released again
    changed = StateBatch(*run)
    while runs and runs[0][2] != AVAILABLE:
        finished = runs.pop(0)
        p.start = finished[1] + 1
        p.done += finished[1] - finished[0] + 1
    return changed if changed.last_offset >= p.start else None


def _coalesced(runs: list[list[int]]) -> list[StateBatch]:
    out: list[list[int]] = []
    for first, last, state, count in runs:
        if out and out[-1][1] + 1 == first and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = last
        else:
            out.append([first, last, state, count])
    return [StateBatch(*r) for r in out]


def write_synthetic_log(
    log_dir: str | os.PathLike,
    records: int,
    *,
    keys: int = 1_000,
    records_per_snapshot: int = 100,
    delivery_count_limit: int = 5,
    segment_bytes: int = 8 * 2**20,
    seed: int = 932,
) -> int:
    """Write a valid state log of `records` records into the new directory `log_dir`; return the number
    of segment files. Seeded: the same arguments give the same bytes. O(records)."""
    log_dir = os.fspath(log_dir)
    os.makedirs(log_dir)
    rng = random.Random(seed)
    topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(max(1, keys // 50))]
    partitions = [
        _Partition(StateKey(f"group-{k % 7}", topics[k % len(topics)], k), rng.randint(0, 10_000)) for k in range(keys)
    ]
    now_ms = 1_700_000_000_000
    segments = 0
    base = 0
    parts: list[bytes] = []
    size = 0

    def flush() -> None:
        nonlocal segments, base, parts, size
        with open(os.path.join(log_dir, segment_file_name(base)), "wb") as f:
            f.write(b"".join(parts))
        segments += 1
        base += len(parts)
        parts, size = [], 0

    for i in range(records):
        if i < keys:  # initialize_state: every key's first record is a fresh checkpoint
            p = partitions[i]
            record = ShareCheckpoint(0, 0, 0, p.start, 0, now_ms, now_ms, ())
        else:
            p = partitions[rng.randrange(keys)]
            batch = _step(p, rng, delivery_count_limit)
            if p.deltas >= records_per_snapshot:
                p.checkpoint_epoch += 1
                p.deltas = 0
                stamp = now_ms + i
                record = ShareCheckpoint(
                    p.checkpoint_epoch, 0, 0, p.start, p.done, stamp, stamp, _coalesced(p.runs)
                )
            else:
                p.deltas += 1
                record = ShareDelta(p.checkpoint_epoch, 0, p.start, p.done, () if batch is None else (batch,))
        frame = encode_record(p.key, record)
        if size + len(frame) > segment_bytes and parts:
            flush()
        parts.append(frame)
        size += len(frame)
    if parts or segments == 0:
        flush()
    return segments


if __name__ == "__main__":  # pragma: no cover - a tool
    target = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    print(f"{write_synthetic_log(target, count)} segments written to {target}")
