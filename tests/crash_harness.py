"""Crash harness: a child process writes share-partition state through a LocalPersister in a loop and
prints every write it starts and every write once it is acknowledged; the parent SIGKILLs it at random
(seeded) moments, reopens the state log and checks that the log opens cleanly, that every acknowledged
write is there and that each share-partition's state batches equal what its writes make of them.

Used by tests/test_crash_safety.py (twenty kills) and bench/crash_stress.py (hundreds). Run as a
script, `python tests/crash_harness.py child LOG_DIR SEED PARTITIONS` is the child.

Each partition's writes carry an increasing sequence number as their start offset and delivery
complete count, and the start offset never moves backwards, so "write s of partition p is present"
means the recovered start offset of p is at least s. A partition has one write in flight at a time,
so the recovered value is the last acknowledged one or the one after it (durable, not yet printed).
The parent keeps its own model of each partition's state batches (`PartitionModel`: per offset the
highest (delivery count, state) written at or above the start offset), fed by the acknowledged
writes, plus the one in flight when recovery shows it durable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field

GROUP = "crash-group"
TOPIC = uuid.UUID("00000000-0000-0000-0000-00000000dead")
SEGMENT_BYTES = 4096  # small, so that kills also land while segments roll and get deleted
RECORDS_PER_SNAPSHOT = 5
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the child -------------------------------------------------------------------------------------


async def child_main(log_dir: str, seed: int, partitions: int) -> None:
    from persister import LocalPersister
    from sharegroup.types import StateBatch

    rng = random.Random(seed)
    out = sys.stdout
    out.write("OPENING\n")
    out.flush()
    p = await LocalPersister.open(
        log_dir,
        fsync=True,
        segment_bytes=SEGMENT_BYTES,
        snapshot_update_records_per_snapshot=RECORDS_PER_SNAPSHOT,
        cold_checkpoint_interval_ms=1,
    )
    next_seq = {}
    for part in range(partitions):
        state = p.state_of(GROUP, TOPIC, part)
        if state is None:
            await p.initialize_state(GROUP, TOPIC, part, state_epoch=0, start_offset=0)
            next_seq[part] = 1
        else:
            next_seq[part] = state.start_offset + 1
    out.write("READY\n")
    out.flush()

    async def writer(part: int) -> None:
        seq = next_seq[part]
        while True:
            batch = StateBatch(seq, seq + rng.randint(0, 3), rng.choice((0, 1, 2, 4)), rng.randint(1, 5))
            batches = [batch]
            # Flushed before the write is awaited: a kill right after the write became durable must still
            # leave the parent knowing what was in flight (an unflushed WRITE line would be lost with it).
            out.write(f"WRITE {part} {seq} {' '.join(map(str, batch))}\n")
            out.flush()
            await p.write_state(
                GROUP,
                TOPIC,
                part,
                state_epoch=0,
                leader_epoch=0,
                start_offset=seq,
                state_batches=batches,
                delivery_complete_count=seq,
            )
            out.write(f"ACK {part} {seq}\n")
            out.flush()
            seq += 1
            if part == 0 and seq % 40 == 0:  # maintenance, so kills also hit pruning
                await p.checkpoint_idle_keys()
                await p.prune()

    await asyncio.gather(*(writer(part) for part in range(partitions)))


# -- the parent ------------------------------------------------------------------------------------


class PartitionModel:
    """What one partition's durable state must be after its writes: the start offset (the last write's
    sequence number) and, per offset at or above it, the highest (delivery count, state) written, as
    the share coordinator combines them. Independent of the persister's combiner on purpose."""

    def __init__(self) -> None:
        self.start_offset = 0
        self.offsets: dict[int, tuple[int, int]] = {}  # offset -> (delivery count, delivery state)

    def apply(self, seq: int, batch: tuple[int, int, int, int]) -> None:
        first, last, state, count = batch
        self.start_offset = seq
        self.offsets = {o: v for o, v in self.offsets.items() if o >= seq}
        for offset in range(max(first, seq), last + 1):
            if (count, state) > self.offsets.get(offset, (-1, -1)):
                self.offsets[offset] = (count, state)

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The offsets as coalesced (first, last, state, count) runs, as the coordinator stores them."""
        runs: list[list[int]] = []
        for offset in sorted(self.offsets):
            count, state = self.offsets[offset]
            if runs and runs[-1][1] + 1 == offset and runs[-1][2] == state and runs[-1][3] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, count])
        return [tuple(run) for run in runs]


@dataclass
class CrashReport:
    kills: int = 0
    acknowledged: int = 0  # acknowledged writes seen in total
    killed_while_opening: int = 0
    torn_tails_truncated: int = 0
    unacknowledged_but_durable: int = 0  # writes found durable whose acknowledgement was never printed
    states_verified: int = 0  # partition states compared with their model after a reopen
    last_acked: dict[int, int] = field(default_factory=dict)
    models: dict[int, PartitionModel] = field(default_factory=dict)
    in_flight: dict[int, tuple[int, tuple[int, int, int, int]]] = field(default_factory=dict)


class _Watchdog:
    """Kill a child that stalls (so a hung child fails the run instead of hanging it)."""

    def __init__(self, proc: subprocess.Popen, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._fire, args=(proc,))
        self.fired = False
        self._timer.start()

    def _fire(self, proc: subprocess.Popen) -> None:
        self.fired = True
        proc.kill()

    def cancel(self) -> None:
        self._timer.cancel()


def _spawn_child(log_dir: str, seed: int, partitions: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "child", log_dir, str(seed), str(partitions)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO_ROOT,
        env=env,
        text=True,
    )


def _parse_line(line: str, report: CrashReport) -> None:
    """Take in one line of the child: a write it starts (`WRITE part seq first last state count`) or
    one acknowledged (`ACK part seq`), which moves the partition's model."""
    if not line.endswith("\n"):
        return  # cut off by the kill: never complete, so never an acknowledgement
    if line.startswith("WRITE "):
        part, seq, *batch = map(int, line.split()[1:])
        report.in_flight[part] = (seq, tuple(batch))
    elif line.startswith("ACK "):
        _, part, seq = line.split()
        part, seq = int(part), int(seq)
        previous = report.last_acked.get(part, 0)
        assert seq == previous + 1, f"partition {part} jumped from {previous} to {seq}"
        written_seq, batch = report.in_flight.pop(part)
        assert written_seq == seq, (part, written_seq, seq)
        report.models.setdefault(part, PartitionModel()).apply(seq, batch)
        report.last_acked[part] = seq
        report.acknowledged += 1


class _TornTailCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "truncating" in record.getMessage():
            self.count += 1


def verify(log_dir: str, report: CrashReport, partitions: int) -> None:
    """Reopen the log (it must open cleanly) and check every acknowledged write is present and every
    partition's state batches equal its model."""
    from persister import LocalPersister, read_log

    counter = _TornTailCounter()
    logger = logging.getLogger("persister.log")
    logger.addHandler(counter)
    try:

        async def check() -> None:
            p = await LocalPersister.open(log_dir, fsync=True, segment_bytes=SEGMENT_BYTES,
                                          snapshot_update_records_per_snapshot=RECORDS_PER_SNAPSHOT)
            try:
                p.coordinator._check()
                p.log._check()
                for part in range(partitions):
                    state = p.summary_of(GROUP, TOPIC, part)
                    if state is None:  # killed before the child initialized it: nothing was acknowledged
                        assert part not in report.last_acked, f"partition {part} lost its state"
                        continue
                    acked = report.last_acked.setdefault(part, 0)  # initialized: start offset 0
                    model = report.models.setdefault(part, PartitionModel())
                    assert state.start_offset >= acked, (
                        f"partition {part}: acknowledged write {acked} lost (recovered {state.start_offset})"
                    )
                    assert state.start_offset <= acked + 1, (part, acked, state.start_offset)
                    assert state.delivery_complete_count == state.start_offset
                    in_flight = report.in_flight.pop(part, None)
                    if state.start_offset == acked + 1:  # the write in flight became durable
                        assert in_flight is not None and in_flight[0] == acked + 1, (part, in_flight)
                        model.apply(*in_flight)
                        report.unacknowledged_but_durable += 1
                    batches = [tuple(b) for b in p.state_of(GROUP, TOPIC, part).state_batches]
                    assert batches == model.state_batches(), (part, batches, model.state_batches())
                    report.states_verified += 1
                    # The child resumes from the durable value, which the parent must track from now on.
                    report.last_acked[part] = state.start_offset
                entries = list(read_log(log_dir))
                assert [e.offset for e in entries] == list(range(p.log.start_offset, p.log.end_offset))
            finally:
                await p.close()

        asyncio.run(check())
    finally:
        logger.removeHandler(counter)
    report.torn_tails_truncated += counter.count


def run_crash_cycles(
    log_dir: str,
    *,
    kills: int,
    seed: int,
    partitions: int = 8,
    max_acks_before_kill: int = 300,
    kill_while_opening: float = 0.15,
    child_timeout_s: float = 60.0,
    progress=None,
) -> CrashReport:
    """Run `kills` child processes against `log_dir`, SIGKILL each at a random moment (after a seeded
    number of acknowledgements, or right after it starts opening the log) and verify after each."""
    rng = random.Random(seed)
    report = CrashReport()
    for cycle in range(kills):
        proc = _spawn_child(log_dir, rng.randrange(2**31), partitions)
        watchdog = _Watchdog(proc, child_timeout_s)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "OPENING\n", (line, proc.wait(), proc.stderr.read() if proc.stderr else "")
            if rng.random() < kill_while_opening:
                report.killed_while_opening += 1
            else:
                line = proc.stdout.readline()
                assert line == "READY\n", (line, proc.wait(), proc.stderr.read() if proc.stderr else "")
                acks_before_kill = rng.randint(1, max_acks_before_kill)
                acks = 0
                while acks < acks_before_kill:
                    line = proc.stdout.readline()
                    assert line.startswith(("ACK ", "WRITE ")), (
                        line, proc.wait(), proc.stderr.read() if proc.stderr else ""
                    )
                    _parse_line(line, report)
                    acks += line.startswith("ACK ")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            for line in proc.stdout:  # acknowledgements printed before the kill landed count too
                _parse_line(line, report)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        assert not watchdog.fired, f"child of cycle {cycle} stalled"
        assert proc.returncode == -signal.SIGKILL, proc.returncode
        report.kills += 1
        verify(log_dir, report, partitions)
        if progress is not None:
            progress(cycle, report)
    return report


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "child":
        sys.path.insert(0, REPO_ROOT)
        asyncio.run(child_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    else:
        sys.exit("usage: crash_harness.py child LOG_DIR SEED PARTITIONS")
