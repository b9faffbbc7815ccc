"""Restart integration: the KIP-932 worked example (as in tests/test_partition.py) on a LocalPersister
in a directory; then the coordinator is closed, the log is reopened from disk in a new process (which
prints the durable state as JSON), and a SharePartition is re-initialized over a reopened LocalPersister:
what it sees equals the durable state before the restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from persister import LocalPersister
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import AcquiredRecords as Acq
from sharegroup import ManualClock, PartitionState, RecordState, RecordView, ShareGroupConfig
from sharegroup import FetchedBatch as FB
from sharegroup import StateBatch as SB
from sharegroup.manager.share_partition import SharePartition, SharePartitionStatus

from .conftest import run

GROUP = "g1"
TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000a1")
ACCEPT, RELEASE = 1, 2
LOCK_MS = 30_000
LOG = [FB(100, 109), FB(110, 112), FB(113, 118), FB(119, 119), FB(120, 120)]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in a fresh interpreter: open the state log from disk and print every key's durable state (and
# the coordinator's whole replayed state, as repr strings) as JSON.
DUMP_SCRIPT = r"""
import asyncio, json, sys
from persister import ShareCoordinator

async def main(log_dir):
    coord = await ShareCoordinator.open(log_dir)
    states = {}
    for key in coord.keys():
        s = coord.state(key)
        states[f"{key.group_id}:{key.topic_id}:{key.partition}"] = {
            "state_epoch": s.state_epoch,
            "leader_epoch": s.leader_epoch,
            "start_offset": s.start_offset,
            "delivery_complete_count": s.delivery_complete_count,
            "state_batches": [list(b) for b in s.state_batches],
        }
    dump = {repr(k): repr(v) for k, v in coord._dump().items()}
    log_end = coord.log.end_offset
    await coord.close()
    print(json.dumps({"states": states, "dump": dump, "log_end": log_end}))

asyncio.run(main(sys.argv[1]))
"""


def fetch(offset):
    """The topic log read from `offset`, starting at the producer batch holding it."""
    return [b for b in LOG if b.last_offset >= offset]


def make(persister, clock, **kw):
    kw.setdefault("config", ShareGroupConfig(record_lock_duration_ms=LOCK_MS))
    return SharePartition(GROUP, TOPIC, 0, persister=persister, clock=clock, **kw)


async def worked_example(p: LocalPersister, clock: ManualClock, stop_after: int) -> SharePartition:
    """The steps of test_partition.py::test_kip_worked_example_step_by_step, with the durable state
    checked after each, up to step `stop_after`."""

    def durable():
        return p.state_of(GROUP, TOPIC, 0)

    await p.initialize_state(GROUP, TOPIC, 0, state_epoch=0, start_offset=100)
    sp = make(p, clock)
    await sp.initialize()
    assert (sp.start_offset, sp.end_offset, sp.status) == (100, 100, SharePartitionStatus.ACTIVE)

    # 1. fetch 100-109 and accept them: SPSO 110
    assert sp.acquire("A", fetch(100)[:1]) == [Acq(100, 109, 1)]
    await sp.acknowledge("A", [Ack(100, 109, (ACCEPT,))])
    assert (sp.start_offset, sp.end_offset) == (110, 110)
    assert durable() == PartitionState(0, 110, [])
    sp._check()
    if stop_after == 1:
        return sp

    # 2. fetch 110-119, split between three consumers
    clock.advance(0)
    assert sp.acquire("A", fetch(110)[:-1], max_records=3) == [Acq(110, 112, 1)]
    clock.advance(10_000)
    assert sp.acquire("B", fetch(sp.next_fetch_offset())[:-1], max_records=6) == [Acq(113, 118, 1)]
    assert sp.acquire("C", fetch(sp.next_fetch_offset())[:-1]) == [Acq(119, 119, 1)]
    assert (sp.start_offset, sp.end_offset, sp.in_flight_count) == (110, 120, 10)
    assert durable() == PartitionState(0, 110, [])  # acquisition writes nothing

    # 3. release 110
    await sp.acknowledge("A", [Ack(110, 110, (RELEASE,))])
    assert sp.record_state(110) == RecordView(RecordState.AVAILABLE, 1, "")
    assert durable() == PartitionState(0, 110, [SB(110, 110, 0, 1)])

    # 4. accept 119
    await sp.acknowledge("C", [Ack(119, 119, (ACCEPT,))])
    assert durable() == PartitionState(0, 110, [SB(110, 110, 0, 1), SB(119, 119, 2, 1)])

    # 5. fetch 110 and 120: 110 goes out at delivery count 2
    clock.advance(10_000)  # t = 20 s
    assert sp.next_fetch_offset() == 110
    assert sp.acquire("C", fetch(110)) == [Acq(110, 110, 2), Acq(120, 120, 1)]
    assert sp.end_offset == 121
    sp._check()

    # 6. the lock on 111-112 (taken at t = 0) times out at t = 30 s
    clock.advance(10_000)
    assert await sp.expire_locks() == 2
    assert sp.record_state(111) == RecordView(RecordState.AVAILABLE, 1, "")
    assert sp.record_state(113).state == RecordState.ACQUIRED
    assert durable() == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(119, 119, 2, 1)])

    # 7. accept 113-118
    await sp.acknowledge("B", [Ack(113, 118, (ACCEPT,))])
    assert durable() == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(113, 119, 2, 1)])
    if stop_after == 7:
        return sp

    # 8. fetch 111-112 at delivery count 2
    clock.advance(1_000)
    assert sp.next_fetch_offset() == 111
    assert sp.acquire("B", fetch(111)) == [Acq(111, 112, 2)]

    # 9. accept 110: SPSO 111
    await sp.acknowledge("C", [Ack(110, 110, (ACCEPT,))])
    assert sp.start_offset == 111
    assert durable() == PartitionState(0, 111, [SB(111, 112, 0, 1), SB(113, 119, 2, 1)])

    # 10. accept 111-112: everything up to 119 is done; only 120 is in flight
    await sp.acknowledge("B", [Ack(111, 112, (ACCEPT,))])
    assert (sp.start_offset, sp.end_offset, sp.in_flight_count) == (120, 121, 1)
    assert sp.state_batches() == [SB(120, 120, 1, 1)]
    assert durable() == PartitionState(0, 120, [])
    sp._check()
    assert stop_after == 10
    return sp


def dump_in_new_process(log_dir) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", DUMP_SCRIPT, str(log_dir)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# After a restart a new leader (epoch 1) sees exactly the durable state: what was acquired comes back
# AVAILABLE with its last persisted delivery count, so the next acquisition counts one more.
AFTER_RESTART = {
    7: dict(start=110, end=120, batches=[SB(110, 112, 0, 1), SB(113, 119, 2, 1)],
            acquired=[Acq(110, 112, 2), Acq(120, 120, 1)]),
    10: dict(start=120, end=120, batches=[], acquired=[Acq(120, 120, 1)]),
}


@pytest.mark.parametrize("stop_after", [7, 10])
def test_worked_example_survives_a_restart_from_disk(tmp_path, stop_after):
    log_dir = tmp_path / "state-log"
    clock = ManualClock(0)

    async def before_restart():
        p = await LocalPersister.open(log_dir, clock=clock, segment_bytes=1024)
        await worked_example(p, clock, stop_after)
        durable = p.state_of(GROUP, TOPIC, 0)
        summary = p.summary_of(GROUP, TOPIC, 0)
        dump = {repr(k): repr(v) for k, v in p.coordinator._dump().items()}
        end = p.log.end_offset
        await p.close()
        return durable, summary, dump, end

    durable, summary, dump, end = run(before_restart())
    expected = AFTER_RESTART[stop_after]
    assert durable.start_offset == expected["start"] and durable.state_batches == expected["batches"]

    # A new process replays the log from disk and finds the same state.
    replayed = dump_in_new_process(log_dir)
    assert replayed["dump"] == dump and replayed["log_end"] == end
    assert replayed["states"] == {
        f"{GROUP}:{TOPIC}:0": {
            "state_epoch": durable.state_epoch,
            "leader_epoch": summary.leader_epoch,
            "start_offset": durable.start_offset,
            "delivery_complete_count": summary.delivery_complete_count,
            "state_batches": [list(b) for b in durable.state_batches],
        }
    }

    async def after_restart():
        p = await LocalPersister.open(log_dir, clock=clock, segment_bytes=1024)
        assert p.state_of(GROUP, TOPIC, 0) == durable
        sp = make(p, clock, leader_epoch=1)
        await sp.initialize()
        assert sp.status is SharePartitionStatus.ACTIVE
        assert (sp.start_offset, sp.end_offset) == (expected["start"], expected["end"])
        assert sp.state_batches() == expected["batches"] == durable.state_batches
        assert sp.state_epoch == durable.state_epoch
        assert p.state_of(GROUP, TOPIC, 0) == durable  # the leader-epoch bump changed no state
        assert sp.acquire("D", fetch(sp.next_fetch_offset())) == expected["acquired"]
        sp._check()
        await p.close()

    run(after_restart())
