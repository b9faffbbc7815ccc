"""Crash safety: a child process writes through a LocalPersister (fsync on, small segments, pruning)
and prints each acknowledged write; the parent SIGKILLs it at seeded random moments, twenty times,
and after every kill reopens the log: it must open cleanly and hold every acknowledged write.
bench/crash_stress.py runs the same harness with many more kills (and any seed)."""

from __future__ import annotations

from .crash_harness import run_crash_cycles

KILLS = 20
SEED = 20261122


def test_sigkill_at_random_moments_loses_no_acknowledged_write(tmp_path):
    report = run_crash_cycles(str(tmp_path / "state-log"), kills=KILLS, seed=SEED, partitions=8,
                              kill_while_opening=0.2)
    assert report.kills == KILLS >= 10
    assert report.acknowledged > 0 and len(report.last_acked) == 8
    assert report.killed_while_opening >= 1  # with this seed some kills land while the log recovers
