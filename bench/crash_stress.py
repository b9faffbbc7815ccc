"""Crash stress: the crash-safety test with many more kills (no pytest-benchmark needed).

    .venv/bin/python bench/crash_stress.py --kills 300 --seed 7 [--partitions 16] [--dir DIR]

A child process writes share-partition state through a LocalPersister (fsync on, 4 KiB segments,
pruning) and prints each acknowledged write; it is SIGKILLed at seeded random moments (after a random
number of acknowledgements, or while it opens and recovers the log), and after every kill the log is
reopened: it must open cleanly and hold every acknowledged write. Exits non-zero on the first failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.crash_harness import run_crash_cycles  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--max-acks", type=int, default=1000, help="most acknowledgements before a kill")
    parser.add_argument("--dir", help="state log directory (default: a fresh temporary one)")
    args = parser.parse_args(argv)
    log_dir = args.dir or os.path.join(tempfile.mkdtemp(prefix="sharegroup-crash-"), "state-log")
    started = time.perf_counter()

    def progress(cycle, report):
        if (cycle + 1) % 25 == 0 or cycle + 1 == args.kills:
            print(
                f"{cycle + 1:5d} kills  {report.acknowledged:8d} acknowledged writes  "
                f"{report.killed_while_opening:4d} killed while opening  "
                f"{report.unacknowledged_but_durable:4d} durable-but-unacknowledged  "
                f"{report.states_verified:6d} states verified  "
                f"{time.perf_counter() - started:7.1f} s",
                flush=True,
            )

    report = run_crash_cycles(
        log_dir,
        kills=args.kills,
        seed=args.seed,
        partitions=args.partitions,
        max_acks_before_kill=args.max_acks,
        progress=progress,
    )
    print(f"OK: {report.kills} kills, no acknowledged write lost, every state equal to its model, log at {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
