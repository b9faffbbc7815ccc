"""State logs for the audit tests: valid histories written through LocalPersister, hand-built logs
written frame by frame (for fault injection), and the table of faults, each breaking one invariant.

Every fault starts from the same valid base log (written by the coordinator itself, so it is valid by
construction), edits or appends one thing, and says which (key, log offset, rule) the audit must report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import random
import shutil
import tempfile
import uuid
from typing import Callable

import crc32c
import msgpack

from persister import (
    LocalPersister,
    ShareCheckpoint,
    ShareCoordinator,
    ShareDelta,
    StateKey,
    combine,
    encode_record,
    read_log,
)
from persister.state_log import START_OFFSET_FILE, segment_file_name
from sharegroup import AcknowledgementBatch, FetchedBatch, ShareGroupConfig
from sharegroup.audit import FinalState, Rule
from sharegroup.clock import ManualClock
from sharegroup.errors import ShareError
from sharegroup.types import StateBatch

G = "audit-group"
T = uuid.UUID("00000000-0000-0000-0000-00000000a0d1")
K1 = StateKey(G, T, 0)
K2 = StateKey(G, T, 1)
K3 = StateKey("other-group", T, 7)
FAULT_N = 3  # snapshot_update_records_per_snapshot of the base log
FAULT_LIMIT = 5  # delivery count limit the fault logs are audited with
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0


# -- hand-built logs ---------------------------------------------------------------------------------


class HandLog:
    """Frames appended to segment files by hand: `append` returns the record's log offset, `roll` starts a
    new segment, `write(dir)` writes the files (named by base offset, as SegmentLog names them)."""

    def __init__(self, base_offset: int = 0) -> None:
        self.segments: list[list] = [[base_offset, []]]  # [base_offset, [frame bytes]]
        self.next_offset = base_offset
        self.start_offset: int | None = None  # written to log-start-offset when set

    def append(self, key: StateKey, record, *, frame: bytes | None = None) -> int:
        self.segments[-1][1].append(encode_record(key, record) if frame is None else frame)
        self.next_offset += 1
        return self.next_offset - 1

    def roll(self) -> None:
        if self.segments[-1][1]:
            self.segments.append([self.next_offset, []])

    def locate(self, offset: int) -> tuple[int, int]:
        """(segment index, frame index) of a log offset."""
        for i, (base, frames) in enumerate(self.segments):
            if base <= offset < base + len(frames):
                return i, offset - base
        raise KeyError(offset)

    def replace_frame(self, offset: int, frame: bytes) -> None:
        i, j = self.locate(offset)
        self.segments[i][1][j] = frame

    def write(self, log_dir: str) -> str:
        os.makedirs(log_dir, exist_ok=True)
        for base, frames in self.segments:
            with open(os.path.join(log_dir, segment_file_name(base)), "wb") as f:
                f.write(b"".join(frames))
        if self.start_offset is not None:
            digits = str(self.start_offset).encode()
            with open(os.path.join(log_dir, START_OFFSET_FILE), "wb") as f:
                f.write(b"sharegroup-log-start 1 %s %08x\n" % (digits, crc32c.crc32c(digits)))
        return log_dir


def raw_frame(record_type: int, payload, version: int = 0) -> bytes:
    """A frame with a correct length and CRC around any payload (to build undecodable records)."""
    body = bytes((record_type, version)) + msgpack.packb(payload, use_bin_type=True)
    length = len(body).to_bytes(4, "big")
    return length + crc32c.crc32c(body, crc32c.crc32c(length)).to_bytes(4, "big") + body


def hand_log_from(records: list, per_segment: int = 6) -> HandLog:
    """A HandLog of `records` [(key, record)], rolling a new segment every `per_segment` records."""
    log = HandLog()
    for i, (key, record) in enumerate(records):
        if i and i % per_segment == 0:
            log.roll()
        log.append(key, record)
    return log


# -- the valid base log of the fault cases ----------------------------------------------------------


async def _write_base(log_dir: str) -> None:
    """Two share-partitions with acknowledgements, releases, archives, a leader epoch raised by a read,
    N = 3 deltas between checkpoints, through the real coordinator."""
    p = await LocalPersister.open(
        log_dir,
        fsync=False,
        segment_bytes=1 << 20,
        snapshot_update_records_per_snapshot=FAULT_N,
        clock=ManualClock(1_000),
    )
    B = StateBatch

    async def w(key, start, batches, le=0, se=0):
        await p.write_state(*key, state_epoch=se, leader_epoch=le, start_offset=start, state_batches=batches,
                            delivery_complete_count=0)

    await p.initialize_state(*K1, state_epoch=0, start_offset=0)
    await p.initialize_state(*K2, state_epoch=1, start_offset=100)
    await w(K1, 0, [B(0, 4, AVAILABLE, 1)])
    await w(K2, 100, [B(100, 104, ACKNOWLEDGED, 1)], se=1)
    await w(K1, 0, [B(0, 2, ACKNOWLEDGED, 2)])
    await w(K1, 3, [B(3, 4, ARCHIVED, 2), B(5, 9, ACKNOWLEDGED, 1)])
    await p.read_state(*K1, leader_epoch=2)  # a checkpoint: K1 had N deltas
    await w(K2, 105, [B(105, 109, ACKNOWLEDGED, 1), B(110, 112, AVAILABLE, 1)], se=1)
    await w(K1, 10, [B(10, 14, ACKNOWLEDGED, 1)], le=2)
    await w(K2, 105, [B(110, 112, ACKNOWLEDGED, 2)], se=1)
    await w(K1, 10, [B(15, 19, AVAILABLE, 1)], le=2)
    await w(K2, 113, [B(113, 115, ACKNOWLEDGED, 1)], se=1)  # a checkpoint
    await w(K1, 10, [B(15, 17, ACKNOWLEDGED, 2)], le=2)
    await w(K1, 18, [B(18, 19, ACKNOWLEDGED, 2), B(20, 22, ACKNOWLEDGED, 1)], le=2)  # a checkpoint
    await w(K2, 116, [B(116, 120, ACKNOWLEDGED, 1)], se=1)
    await w(K1, 23, [B(23, 25, ACKNOWLEDGED, 1), B(26, 30, AVAILABLE, 1)], le=2)
    await w(K2, 116, [B(121, 121, ARCHIVED, 5)], se=1)
    await w(K1, 23, [B(26, 27, AVAILABLE, 2)], le=2)
    await w(K2, 116, [B(122, 125, AVAILABLE, 1)], se=1)
    await w(K1, 23, [B(28, 30, ACKNOWLEDGED, 2)], le=2)  # a checkpoint
    await w(K2, 116, [B(122, 123, ACKNOWLEDGED, 2)], se=1)
    await w(K1, 23, [B(31, 33, ACKNOWLEDGED, 1)], le=2)
    await w(K2, 116, [B(124, 125, AVAILABLE, 2)], se=1)  # a checkpoint
    await w(K1, 23, [B(34, 36, AVAILABLE, 1)], le=2)
    await p.close()


@functools.lru_cache(maxsize=1)
def base_records() -> tuple:
    """The base log's records [(key, record)], written once per test session."""
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = os.path.join(tmp, "base")
        asyncio.run(_write_base(log_dir))
        return tuple((entry.key, entry.record) for entry in read_log(log_dir))


def final_states_by_coordinator(log_dir: str, n: int = 500) -> tuple[dict, dict]:
    """({key: FinalState}, coordinator._dump()) of a ShareCoordinator opened on a copy of `log_dir` (the
    coordinator truncates torn tails and deletes pruned segments; the audited directory stays as it is)."""

    async def main():
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "copy")
            shutil.copytree(log_dir, copy, ignore=shutil.ignore_patterns(".lock"))
            coord = await ShareCoordinator.open(copy, snapshot_update_records_per_snapshot=n, fsync=False)
            try:
                states = {key: FinalState.from_checkpoint(coord.state(key)) for key in coord.keys()}
                return states, coord._dump()
            finally:
                await coord.close()

    return asyncio.run(main())


# -- faults --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Fault:
    """A log that breaks one invariant: what to build and what the audit must find."""

    name: str
    build: Callable[[str], list]  # writes the log into the directory; returns [(key, log_offset, rule)]
    required: bool = False  # one of the named fault-injection cases


def _records() -> list:
    return list(base_records())


def _index_where(records, predicate, start: int = 0) -> int:
    for i in range(start, len(records)):
        if predicate(*records[i]):
            return i
    raise LookupError("no such record in the base log")


def _is_delta(key):
    return lambda k, r: k == key and type(r) is ShareDelta


def _replayed(records, upto: int, key) -> dict:
    """The coordinator's view of `key` after records[:upto] (checkpoint epoch, start, batches, ...)."""
    state = None
    deltas = 0
    for k, r in records[:upto]:
        if k != key:
            continue
        if type(r) is ShareCheckpoint:
            state = dataclasses.asdict(r) | {"state_batches": list(r.state_batches)}
            deltas = 0
        elif type(r) is ShareDelta:
            start = state["start_offset"] if r.start_offset == -1 else r.start_offset
            state["state_batches"] = combine(state["state_batches"], r.state_batches, start)
            state["start_offset"] = start
            if r.leader_epoch != -1:
                state["leader_epoch"] = r.leader_epoch
            deltas += 1
    return dict(state, deltas=deltas)


def fault_crc_in_the_middle(log_dir):
    records = _records()
    i = _index_where(records, _is_delta(K2), 4)
    log = hand_log_from(records)
    frame = bytearray(log.segments[log.locate(i)[0]][1][log.locate(i)[1]])
    frame[-1] ^= 0x5A  # a flipped bit in the payload: the CRC no longer matches
    log.replace_frame(i, bytes(frame))
    assert log.locate(i)[0] < len(log.segments) - 1, "the corrupt frame must not be in the last segment"
    log.write(log_dir)
    return [(None, i, Rule.FRAME)]


def fault_stale_delta_epoch(log_dir):
    records = _records()
    i = _index_where(records, lambda k, r: k == K1 and type(r) is ShareDelta and r.checkpoint_epoch >= 1)
    key, r = records[i]
    records[i] = (key, dataclasses.replace(r, checkpoint_epoch=r.checkpoint_epoch - 1))
    hand_log_from(records).write(log_dir)
    return [(K1, i, Rule.DELTA_EPOCH)]


def fault_start_offset_regresses(log_dir):
    records = _records()
    i = _index_where(records, lambda k, r: k == K1 and type(r) is ShareDelta and r.start_offset >= 10)
    key, r = records[i]
    current = _replayed(records, i, K1)["start_offset"]
    records[i] = (key, dataclasses.replace(r, start_offset=current - 3))
    hand_log_from(records).write(log_dir)
    return [(K1, i, Rule.START_OFFSET)]


def fault_terminal_becomes_available(log_dir):
    records = _records()
    state = _replayed(records, len(records), K1)
    acked = next(b for b in state["state_batches"] if b.delivery_state == ACKNOWLEDGED)
    delta = ShareDelta(
        state["checkpoint_epoch"],
        state["leader_epoch"],
        state["start_offset"],
        0,
        [StateBatch(acked.first_offset, acked.first_offset, AVAILABLE, acked.delivery_count + 1)],
    )
    log = hand_log_from(records)
    offset = log.append(K1, delta)
    log.write(log_dir)
    return [(K1, offset, Rule.TERMINAL)]


def fault_too_many_deltas(log_dir):
    records = _records()
    state = _replayed(records, len(records), K2)
    log = hand_log_from(records)
    offsets = []
    for _ in range(FAULT_N + 1 - state["deltas"]):
        delta = ShareDelta(state["checkpoint_epoch"], state["leader_epoch"], state["start_offset"], 0, ())
        offsets.append(log.append(K2, delta))
    log.write(log_dir)
    return [(K2, offsets[-1], Rule.DELTAS_BETWEEN_CHECKPOINTS)]


def fault_overlapping_batches(log_dir):
    records = _records()
    i = _index_where(
        records, lambda k, r: k == K2 and type(r) is ShareDelta and r.state_batches[0].delivery_state == ACKNOWLEDGED, 3
    )
    key, r = records[i]
    b = r.state_batches[0]
    overlapping = (b, StateBatch(b.last_offset, b.last_offset + 1, ACKNOWLEDGED, b.delivery_count))
    records[i] = (key, dataclasses.replace(r, state_batches=overlapping))
    hand_log_from(records).write(log_dir)
    return [(K2, i, Rule.BATCHES)]


def fault_delivery_count_above_limit(log_dir):
    records = _records()
    i = _index_where(
        records, lambda k, r: k == K1 and type(r) is ShareDelta and r.state_batches[0].delivery_state == ACKNOWLEDGED, 3
    )
    key, r = records[i]
    b = r.state_batches[0]
    batches = (b._replace(delivery_count=FAULT_LIMIT + 1),) + tuple(r.state_batches[1:])
    records[i] = (key, dataclasses.replace(r, state_batches=batches))
    hand_log_from(records).write(log_dir)
    return [(K1, i, Rule.DELIVERY_COUNT)]


def fault_checkpoint_epoch_decreases(log_dir):
    records = _records()
    last = max(i for i, (k, r) in enumerate(records) if k == K1 and type(r) is ShareCheckpoint)
    epoch = records[last][1].checkpoint_epoch
    assert epoch >= 2
    for i in range(last, len(records)):  # the checkpoint and its deltas, consistently one epoch lower
        k, r = records[i]
        if k == K1:
            records[i] = (k, dataclasses.replace(r, checkpoint_epoch=epoch - 2))
    hand_log_from(records).write(log_dir)
    return [(K1, last, Rule.CHECKPOINT_EPOCH)]


def fault_state_epoch_decreases(log_dir):
    records = _records()
    i = _index_where(records, lambda k, r: k == K2 and type(r) is ShareCheckpoint and r.state_batches)
    key, r = records[i]
    records[i] = (key, dataclasses.replace(r, state_epoch=r.state_epoch - 1))
    hand_log_from(records).write(log_dir)
    return [(K2, i, Rule.STATE_EPOCH)]


def fault_leader_epoch_decreases(log_dir):
    records = _records()
    i = _index_where(records, lambda k, r: k == K1 and type(r) is ShareDelta and r.leader_epoch == 2)
    key, r = records[i]
    records[i] = (key, dataclasses.replace(r, leader_epoch=1))
    hand_log_from(records).write(log_dir)
    return [(K1, i, Rule.LEADER_EPOCH)]


def fault_delivery_state_is_no_record_state(log_dir):
    records = _records()
    i = _index_where(records, lambda k, r: k == K2 and type(r) is ShareDelta and r.state_batches, 3)
    key, r = records[i]
    b = r.state_batches[0]
    records[i] = (key, dataclasses.replace(r, state_batches=(b._replace(delivery_state=5),) + r.state_batches[1:]))
    hand_log_from(records).write(log_dir)
    return [(K2, i, Rule.BATCHES)]


def fault_segment_gap(log_dir):
    log = hand_log_from(_records())
    middle = len(log.segments) // 2
    expected = log.segments[middle][0]
    for segment in log.segments[middle:]:  # one offset goes missing between two segments
        segment[0] += 1
    log.write(log_dir)
    return [(None, expected, Rule.SEGMENTS)]


def fault_undecodable_record(log_dir):
    records = _records()
    i = _index_where(records, _is_delta(K2), 4)
    log = hand_log_from(records)
    log.replace_frame(i, raw_frame(1, [[G, T.bytes, 1], [0, 0, 0, 0]]))  # a delta with 4 fields: framed fine
    log.write(log_dir)
    return [(K2, i, Rule.RECORD)]


def fault_record_without_a_key(log_dir):
    records = _records()
    i = _index_where(records, _is_delta(K1), 4)
    log = hand_log_from(records)
    log.replace_frame(i, raw_frame(1, [[G, b"short", 0], [0, 0, 0, 0, []]]))  # a topic id of 5 bytes
    log.write(log_dir)
    return [(None, i, Rule.RECORD)]


def fault_torn_frame_in_a_middle_segment(log_dir):
    log = hand_log_from(_records())
    base, frames = log.segments[2]
    assert len(log.segments) > 3 and type(_records()[base + len(frames) - 1][1]) is ShareDelta
    frames[-1] = frames[-1][: len(frames[-1]) // 2]  # cut in half: a torn frame, but not at the log's end
    log.write(log_dir)
    return [(None, base + len(frames) - 1, Rule.FRAME)]


def fault_delta_after_tombstone(log_dir):
    records = _records()
    state = _replayed(records, len(records), K2)
    log = hand_log_from(records)
    log.append(K2, None)
    offset = log.append(K2, ShareDelta(state["checkpoint_epoch"], state["leader_epoch"], state["start_offset"], 0, ()))
    log.write(log_dir)
    return [(K2, offset, Rule.DELTA_EPOCH)]


def fault_delta_before_first_checkpoint(log_dir):
    log = hand_log_from(_records())
    offset = log.append(K3, ShareDelta(0, 0, 0, 0, (StateBatch(0, 3, ACKNOWLEDGED, 1),)))
    log.write(log_dir)
    return [(K3, offset, Rule.DELTA_EPOCH)]


def fault_unreadable_start_offset_file(log_dir):
    hand_log_from(_records()).write(log_dir)
    with open(os.path.join(log_dir, START_OFFSET_FILE), "wb") as f:
        f.write(b"sharegroup-log-start 1 12 deadbeef\n")  # wrong checksum
    return [(None, None, Rule.SEGMENTS)]


FAULTS = [
    Fault("crc-in-the-middle", fault_crc_in_the_middle, required=True),
    Fault("stale-delta-epoch", fault_stale_delta_epoch, required=True),
    Fault("start-offset-regresses", fault_start_offset_regresses, required=True),
    Fault("terminal-becomes-available", fault_terminal_becomes_available, required=True),
    Fault("too-many-deltas", fault_too_many_deltas, required=True),
    Fault("overlapping-batches", fault_overlapping_batches, required=True),
    Fault("delivery-count-above-limit", fault_delivery_count_above_limit, required=True),
    Fault("checkpoint-epoch-decreases", fault_checkpoint_epoch_decreases),
    Fault("state-epoch-decreases", fault_state_epoch_decreases),
    Fault("leader-epoch-decreases", fault_leader_epoch_decreases),
    Fault("delivery-state-is-no-record-state", fault_delivery_state_is_no_record_state),
    Fault("segment-gap", fault_segment_gap),
    Fault("undecodable-record", fault_undecodable_record),
    Fault("record-without-a-key", fault_record_without_a_key),
    Fault("torn-frame-in-a-middle-segment", fault_torn_frame_in_a_middle_segment),
    Fault("delta-after-tombstone", fault_delta_after_tombstone),
    Fault("delta-before-first-checkpoint", fault_delta_before_first_checkpoint),
    Fault("unreadable-start-offset-file", fault_unreadable_start_offset_file),
]

FAULT_OPTIONS = dict(delivery_count_limit=FAULT_LIMIT, snapshot_update_records_per_snapshot=FAULT_N)


def found(result) -> list:
    """The (key, log_offset, rule) triples of an AuditResult, for comparing with a Fault's expectation."""
    return [(v.key, v.log_offset, v.rule) for v in result.violations]


# -- valid histories ------------------------------------------------------------------------------------


@dataclasses.dataclass
class _KeyModel:
    start: int
    offsets: dict  # offset -> (delivery_state, delivery_count), offsets >= start only
    state_epoch: int
    leader_epoch: int  # the highest leader epoch used (the coordinator's fence)


def _runs(offsets: dict, chosen: list[int]) -> list[StateBatch]:
    """Coalesced runs of (state, count) over the sorted `chosen` offsets."""
    runs: list[list[int]] = []
    for o in sorted(chosen):
        state, count = offsets[o]
        if runs and runs[-1][1] + 1 == o and runs[-1][2] == state and runs[-1][3] == count:
            runs[-1][1] = o
        else:
            runs.append([o, o, state, count])
    return [StateBatch(*r) for r in runs]


async def leader_history(
    log_dir: str,
    seed: int,
    *,
    keys: int = 4,
    steps: int = 150,
    records_per_snapshot: int = 3,
    delivery_count_limit: int = 5,
    segment_bytes: int = 1024,
) -> None:
    """A random history that a correct share-partition leader could produce, written through a
    LocalPersister: acknowledgements, releases (counts grow up to the limit, then archive), leader epochs
    raised by reads, re-initializations (alter offsets), deletions, idle checkpoints and pruning. Every
    audit invariant holds over the resulting log."""
    rng = random.Random(seed)
    clock = ManualClock(1_000)
    p = await LocalPersister.open(
        log_dir,
        fsync=False,
        segment_bytes=segment_bytes,
        snapshot_update_records_per_snapshot=records_per_snapshot,
        cold_checkpoint_interval_ms=50_000,
        clock=clock,
    )
    topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(2)]
    all_keys = [StateKey(rng.choice(["orders", "payments"]), rng.choice(topics), part) for part in range(keys)]
    models: dict[StateKey, _KeyModel | None] = {}
    try:
        for _ in range(steps):
            key = rng.choice(all_keys)
            m = models.get(key)
            op = rng.random()
            if m is None or op < 0.04:
                state_epoch = 0 if m is None else m.state_epoch + rng.choice([0, 1])
                start = rng.randint(0, 40) if m is None else max(0, m.start + rng.randint(-10, 20))
                await p.initialize_state(*key, state_epoch=state_epoch, start_offset=start)
                models[key] = _KeyModel(start, {}, state_epoch, 0 if m is None else m.leader_epoch)
            elif op < 0.78:
                first = m.start + rng.randint(0, 12)
                candidates = range(first, first + rng.randint(1, 4))
                chosen = [o for o in candidates if m.offsets.get(o, (AVAILABLE, 0))[0] == AVAILABLE]
                if not chosen:
                    continue
                action = rng.random()
                for o in chosen:
                    count = m.offsets.get(o, (AVAILABLE, 0))[1]
                    if count + 1 > delivery_count_limit:
                        m.offsets[o] = (ARCHIVED, count)  # cannot be delivered again
                    elif action < 0.6:
                        m.offsets[o] = (ACKNOWLEDGED, count + 1)
                    elif action < 0.7:
                        m.offsets[o] = (ARCHIVED, count + 1)  # rejected
                    else:
                        m.offsets[o] = (AVAILABLE, count + 1)  # released or its lock expired
                new_start = m.start
                while m.offsets.get(new_start, (AVAILABLE,))[0] in (ACKNOWLEDGED, ARCHIVED):
                    new_start += 1
                batches = [b for b in _runs(m.offsets, chosen) if b.last_offset >= new_start]
                batches = [b._replace(first_offset=max(b.first_offset, new_start)) for b in batches]
                await p.write_state(
                    *key,
                    state_epoch=m.state_epoch,
                    leader_epoch=m.leader_epoch,
                    start_offset=new_start,
                    state_batches=batches,
                    delivery_complete_count=sum(1 for s, _ in m.offsets.values() if s != AVAILABLE),
                )
                m.start = new_start
                m.offsets = {o: v for o, v in m.offsets.items() if o >= new_start}
            elif op < 0.86:
                m.leader_epoch += rng.choice([0, 1])
                await p.read_state(*key, leader_epoch=m.leader_epoch)
            elif op < 0.89:
                await p.delete_state(*key)
                models[key] = None
            elif op < 0.95:
                clock.advance(rng.randint(0, 80_000))
                await p.checkpoint_idle_keys()
            elif op < 0.97:
                await p.prune()
            else:
                await p.read_state(*key, leader_epoch=m.leader_epoch)  # nothing written: same epoch
    finally:
        await p.close()


async def share_partition_history(log_dir: str, seed: int, *, partitions: int = 3, rounds: int = 120) -> None:
    """Share consumers driving real SharePartitions over a LocalPersister: accept, release, reject, and
    crash so that locks expire; the state log a broker would write."""
    from sharegroup.manager.share_partition import SharePartition

    rng = random.Random(seed)
    clock = ManualClock(0)
    p = await LocalPersister.open(
        log_dir, fsync=False, segment_bytes=2048, snapshot_update_records_per_snapshot=5, clock=clock
    )
    topic = uuid.UUID(int=rng.getrandbits(128))
    config = ShareGroupConfig(record_lock_duration_ms=1_000, delivery_count_limit=4)
    logs = []
    sps = []
    for part in range(partitions):
        batches, offset = [], 0
        while offset < 400:
            size = rng.randint(1, 6)
            batches.append(FetchedBatch(offset, offset + size - 1))
            offset += size
        logs.append(batches)
        await p.initialize_state("consumers", topic, part, state_epoch=0, start_offset=0)
        sp = SharePartition("consumers", topic, part, persister=p, config=config, clock=clock)
        await sp.initialize()
        sps.append(sp)
    try:
        for _ in range(rounds):
            part = rng.randrange(partitions)
            sp = sps[part]
            member = rng.choice(["consumer-a", "consumer-b", "consumer-c"])
            fetch_offset = sp.next_fetch_offset()
            fetched = [b for b in logs[part] if b.last_offset >= fetch_offset]
            if not fetched:
                continue
            acquired = sp.acquire(member, fetched, max_records=rng.randint(1, 12))
            crash = rng.random() < 0.15
            acks = []
            for a in acquired:
                if crash:
                    break
                kind = rng.choices([1, 2, 3], weights=[75, 18, 7])[0]  # ACCEPT, RELEASE, REJECT
                acks.append(AcknowledgementBatch(a.first_offset, a.last_offset, (kind,)))
            if acks:
                try:
                    await sp.acknowledge(member, acks)
                except ShareError:
                    pass
            if rng.random() < 0.3:
                clock.advance(rng.randint(100, 1_500))
                for other in sps:
                    await other.expire_locks()
            if rng.random() < 0.02:
                await p.prune()
    finally:
        await p.close()


def write_history(kind: str, log_dir: str, seed: int, **kw) -> str:
    """Write a valid history of `kind` ('leader' or 'share-partition') into `log_dir`; return it."""
    if kind == "leader":
        asyncio.run(leader_history(log_dir, seed, **kw))
    else:
        asyncio.run(share_partition_history(log_dir, seed, **kw))
    return log_dir
