"""Crash safety: a child process writes through a LocalPersister (fsync on, small segments, pruning)
and prints each write it starts and each it sees acknowledged; the parent SIGKILLs it at seeded random
moments, twenty times, and after every kill reopens the log: it must open cleanly, hold every
acknowledged write, and each share-partition's state batches must equal the parent's own model of what
the writes make of them (tests/crash_harness.py). bench/crash_stress.py runs the same harness with many
more kills (and any seed)."""

from __future__ import annotations

import asyncio

from persister import LocalPersister

from .crash_harness import GROUP, RECORDS_PER_SNAPSHOT, SEGMENT_BYTES, TOPIC, run_crash_cycles

KILLS = 20
PARTITIONS = 8
SEED = 20261122


def test_sigkill_at_random_moments_loses_no_acknowledged_write(tmp_path):
    log_dir = str(tmp_path / "state-log")
    # Every reopen inside the run asserts the outcomes (acknowledged writes present, batches equal to
    # the model); here the last state is checked once more, from the outside, after the final kill.
    report = run_crash_cycles(log_dir, kills=KILLS, seed=SEED, partitions=PARTITIONS, kill_while_opening=0.2)
    assert report.acknowledged > KILLS  # the children did real work between kills

    async def recovered():
        p = await LocalPersister.open(
            log_dir, fsync=False, segment_bytes=SEGMENT_BYTES, snapshot_update_records_per_snapshot=RECORDS_PER_SNAPSHOT
        )
        try:
            return {part: p.state_of(GROUP, TOPIC, part) for part in range(PARTITIONS)}
        finally:
            await p.close()

    states = asyncio.run(recovered())
    for part in range(PARTITIONS):
        state = states[part]
        assert state.start_offset == report.last_acked[part] >= 1, (part, state, report.last_acked)
        model = report.models[part]
        assert state.start_offset == model.start_offset
        assert [tuple(b) for b in state.state_batches] == model.state_batches(), part
