"""SIGKILL durability of the group record file, compaction included: a child process appends group
records (offset commits over a few keys, tombstones, group records; frequent compactions) one at a time
and prints each append it starts and each acknowledged one; the parent kills it, reopens the file and
checks that it opens cleanly and holds exactly the acknowledged records (plus the append in flight when
it was already durable), as the latest record of each key in their order.

Most rounds stop the child inside its first compaction at a chosen step (half the new file written; new
file written, not fsync'd; fsync'd, not renamed; renamed, directory not fsync'd; all done, the old file
not closed) and kill it there; the others kill it after a seeded number of acknowledgements. Run as a
script, `python tests/test_group_records_crash.py DIR FIRST STOP_AT` is the child.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOPS = ("write", "fsync", "rename", "dirsync", "after")
CHILD_TIMEOUT_S = 60.0


def records_of(i: int) -> list:
    """The records of append `i` (the same in child and parent)."""
    from sharegroup.coordinator.classic.records import (
        GroupMetadataKey,
        GroupMetadataValue,
        OffsetCommitKey,
        OffsetCommitValue,
    )
    from sharegroup.coordinator.records import Record

    group = f"g{i % 3}"
    records = [Record(OffsetCommitKey(group, "t", i % 7), OffsetCommitValue(i, 0, "x" * (i % 13), 1000 + i, -1))]
    if i % 5 == 4:  # delete an offset written a while ago
        j = i // 5
        records.append(Record(OffsetCommitKey(f"g{j % 3}", "t", j % 7), None))
    if i % 9 == 0:
        records.append(Record(GroupMetadataKey(group), GroupMetadataValue("consumer", i, "range", None, i, ())))
    if i % 23 == 22:
        records.append(Record(GroupMetadataKey(group), None))
    return records


# -- the child -------------------------------------------------------------------------------------


def _stop_inside_compaction(sink, stop_at: str) -> None:
    """Make the child's first compaction print `AT <stop_at>` at that step and wait there to be killed."""
    from sharegroup.server import group_records as gr

    def stop() -> None:
        sys.stdout.write(f"AT {stop_at}\n")
        sys.stdout.flush()
        time.sleep(CHILD_TIMEOUT_S)

    real_write, real_fsync, real_replace, real_fsync_dir = gr._write_at, gr._fsync, os.replace, gr._fsync_dir

    def write_at(fd, data, position):
        if stop_at == "write" and fd != sink._fd:  # the new file: write half of it, then stop
            real_write(fd, data[:len(data) // 2], position)
            stop()
        real_write(fd, data, position)

    def fsync(fd):
        if stop_at == "fsync" and fd != sink._fd:
            stop()
        real_fsync(fd)

    def replace(src, dst, *args, **kw):
        if stop_at == "rename":
            stop()
        real_replace(src, dst, *args, **kw)

    def fsync_dir(directory):
        if stop_at == "dirsync":
            stop()
        real_fsync_dir(directory)
        if stop_at == "after":
            stop()

    gr._write_at, gr._fsync, gr._fsync_dir = write_at, fsync, fsync_dir
    os.replace = replace


async def child_main(directory: str, first: int, stop_at: str) -> None:
    from sharegroup.server.group_records import FileRecordSink

    sink = FileRecordSink.open(directory, min_compaction_bytes=4096)
    if stop_at in STOPS:
        _stop_inside_compaction(sink, stop_at)
    out = sys.stdout
    out.write("READY\n")
    out.flush()
    i = first
    while True:
        # Flushed before the append is awaited: a kill right after the append became durable must still
        # leave the parent knowing what was in flight.
        out.write(f"WRITE {i}\n")
        out.flush()
        await sink.append(records_of(i))
        out.write(f"ACK {i} {sink.compactions}\n")
        out.flush()
        i += 1


# -- the parent ------------------------------------------------------------------------------------


def _model(appends: list[int]) -> list[tuple]:
    """The latest (key, value) of every key after `appends`, tombstones dropping keys, in order."""
    latest: dict = {}
    for i in appends:
        for key, value in records_of(i):
            latest.pop(key, None)
            if value is not None:
                latest[key] = value
    return list(latest.items())


def _run_child(directory: str, first: int, stop_at: str, acks_before_kill: int) -> tuple[list[int], int | None, bool, int]:
    """Run one child until it stops at `stop_at` (or acknowledged `acks_before_kill` appends), SIGKILL
    it; returns (acknowledged appends, the append in flight, whether it stopped inside a compaction,
    compactions it made)."""
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), directory, str(first), stop_at],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    watchdog = threading.Timer(CHILD_TIMEOUT_S, child.kill)
    watchdog.start()
    acked: list[int] = []
    in_flight = None
    stopped = False
    compactions = 0
    try:
        line = child.stdout.readline()
        assert line == "READY\n", (line, child.stderr.read()[-2000:] if child.poll() is not None else "")
        while True:
            line = child.stdout.readline()
            assert line, ("the child ended", child.wait(), child.stderr.read()[-2000:])
            if line.startswith("WRITE "):
                in_flight = int(line.split()[1])
            elif line.startswith("ACK "):
                _, i, compactions_so_far = line.split()
                assert int(i) == in_flight
                acked.append(in_flight)
                in_flight, compactions = None, int(compactions_so_far)
                if stop_at not in STOPS and len(acked) >= acks_before_kill:
                    break
            elif line == f"AT {stop_at}\n":
                stopped = True
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        for line in child.stdout:  # an acknowledgement printed before the kill landed counts too
            if line.startswith("ACK ") and line.endswith("\n"):
                acked.append(int(line.split()[1]))
                in_flight = None
            elif line.startswith("WRITE ") and line.endswith("\n"):
                in_flight = int(line.split()[1])
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL, child.returncode
    return acked, in_flight, stopped, compactions


def test_sigkill_at_every_step_of_a_compaction_keeps_exactly_the_acknowledged_records(tmp_path):
    from sharegroup.server.group_records import COMPACTING_FILE_NAME, FileRecordSink

    rng = random.Random(932)
    directory = str(tmp_path)
    durable: list[int] = []  # the appends the file must hold, in order
    completed_compactions = 0
    for stop_at in (*STOPS, "random", "random", "random"):
        first = durable[-1] + 1 if durable else 0
        acked, in_flight, stopped, made = _run_child(directory, first, stop_at, rng.randint(1, 150))
        assert stopped or stop_at == "random", f"the child never reached {stop_at}"
        completed_compactions += made
        assert acked == list(range(first, first + len(acked)))
        sink = FileRecordSink.open(directory)  # opens cleanly: no CorruptLogError
        try:
            held = [(r.key, r.value) for r in sink.read_all()]
        finally:
            sink.close()
        assert not os.path.exists(os.path.join(directory, COMPACTING_FILE_NAME))
        durable += acked
        if held != _model(durable):  # then the append in flight was durable, and must be there whole
            assert in_flight is not None, f"round {stop_at}: acknowledged records lost or changed"
            durable.append(in_flight)
            assert held == _model(durable), f"round {stop_at}: the file holds neither outcome"
    assert completed_compactions > 0  # the kills after random acknowledgements also met compacted files


if __name__ == "__main__":
    sys.path.insert(0, REPO_ROOT)
    asyncio.run(child_main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
