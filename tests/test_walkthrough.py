"""`sharegroup demo --walkthrough`: the KIP-932 example's exact values, and a narration whose every number
comes from what the engine returned (a line that claimed anything else fails these tests)."""

from __future__ import annotations

import asyncio
import re

import pytest

from persister import InMemoryPersister
from sharegroup import AcquiredRecords as Acq
from sharegroup import ManualClock, PartitionState, RecordState
from sharegroup import StateBatch as SB
from sharegroup.demo import walkthrough as walkthrough_module
from sharegroup.demo.walkthrough import GROUP, TOPIC, run_walkthrough
from sharegroup.manager.share_partition import SharePartition


def narrate(first_offset=100):
    lines: list[str] = []
    clock = ManualClock(0)
    persister = InMemoryPersister(clock=clock)
    steps = asyncio.run(run_walkthrough(persister, clock, lines.append, first_offset=first_offset))
    return steps, lines, persister


def test_the_kip_example_ends_where_kip_932_says():
    steps, lines, persister = narrate()
    assert len(steps) == 11
    acquired = [(s.number, member, got) for s in steps for member, got in s.acquired]
    assert acquired == [
        (1, "A", [Acq(100, 109, 1)]),
        (2, "A", [Acq(110, 112, 1)]), (2, "B", [Acq(113, 118, 1)]), (2, "C", [Acq(119, 119, 1)]),
        (5, "C", [Acq(110, 110, 2), Acq(120, 120, 1)]),
        (8, "B", [Acq(111, 112, 2)]),
    ]
    assert [s.expired for s in steps] == [None] * 6 + [2] + [None] * 4
    assert [(s.start_offset, s.end_offset, s.in_flight_count) for s in steps] == [
        (100, 100, 0), (110, 110, 0), (110, 120, 10), (110, 120, 10), (110, 120, 10), (110, 121, 11),
        (110, 121, 11), (110, 121, 11), (110, 121, 11), (111, 121, 10), (120, 121, 1)]
    assert steps[6].durable == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(119, 119, 2, 1)])
    assert steps[7].durable == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(113, 119, 2, 1)])
    assert steps[-1].durable == PartitionState(0, 120, []) == persister.state_of(GROUP, TOPIC, 0)
    assert steps[-1].window == "." * 20 + "Q" and steps[-1].owners == " " * 20 + "C"
    assert lines[-1].strip() == ("Durable: start_offset=120 batches(first-last:state/count)=none; "
                         "in flight: 120 (acquired by C, delivery count 1).")


class _Spy:
    """Records, in one sequence with the printed lines, every result the walkthrough got."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.partition: SharePartition | None = None

    def partition_class(spy):
        class SpyPartition(SharePartition):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                spy.partition = self

            def acquire(self, member_id, fetched, **kwargs):
                got = super().acquire(member_id, fetched, **kwargs)
                spy.events.append(("acquire", member_id, got))
                return got

            async def acknowledge(self, member_id, batches):
                before = self.start_offset
                await super().acknowledge(member_id, batches)
                views = {o: self.record_state(o) for b in batches for o in range(b.first_offset, b.last_offset + 1)}
                spy.events.append(("acknowledge", member_id, list(batches), before, self.start_offset, views))

            async def expire_locks(self):
                window = range(self.start_offset, self.end_offset)
                before = {o: self.record_state(o) for o in window}
                count = await super().expire_locks()
                changed = {o: self.record_state(o) for o in window if self.record_state(o) != before[o]}
                spy.events.append(("expire", count, before, changed))
                return count

        return SpyPartition

    def persister(spy, inner: InMemoryPersister):
        class RecordingPersister:
            """A Persister that forwards to `inner` and records every read_state answer."""

            async def initialize_state(self, *a, **kw):
                return await inner.initialize_state(*a, **kw)

            async def read_state(self, *a, **kw):
                state = await inner.read_state(*a, **kw)
                sp = spy.partition
                if sp is not None and sp.status.value == "ACTIVE":
                    spy.events.append(("read", state, sp.start_offset, sp.end_offset, sp.in_flight_count))
                return state

            async def write_state(self, *a, **kw):
                return await inner.write_state(*a, **kw)

            async def delete_state(self, *a, **kw):
                return await inner.delete_state(*a, **kw)

            async def read_summary(self, *a, **kw):
                return await inner.read_summary(*a, **kw)

        return RecordingPersister()


def _range(first, last):
    return str(first) if first == last else f"{first}-{last}"


@pytest.mark.parametrize("first_offset", [100, 7000])
def test_every_narrated_number_comes_from_the_engine(monkeypatch, first_offset):
    spy = _Spy()
    monkeypatch.setattr(walkthrough_module, "SharePartition", spy.partition_class())
    clock = ManualClock(0)
    persister = spy.persister(InMemoryPersister(clock=clock))
    asyncio.run(run_walkthrough(persister, clock, lambda line: spy.events.append(("line", line)),
                            first_offset=first_offset))

    narrations = 0
    pending: list[tuple] = []
    read = None
    for event in spy.events:
        if event[0] == "read":
            read = event
        if event[0] != "line":
            pending.append(event)
            continue
        line = event[1].strip()
        match = re.match(r"(\d+)\. (.*)", line)
        if match:
            # A narration line: every result of the step is in it, and every number in it is a result.
            narrations += 1
            number, text = int(match.group(1)), match.group(2)
            assert read is not None and read in pending, "the step's state was read before it was narrated"
            allowed = {number, read[2], read[3], read[4]}
            for e in pending:
                if e[0] == "acquire":
                    _kind, member, got = e
                    expected = " and ".join(f"{_range(r.first_offset, r.last_offset)} (delivery count "
                                            f"{r.delivery_count})" for r in got)
                    assert f"{member} acquires {expected}" in text
                    allowed |= {n for r in got for n in (r.first_offset, r.last_offset, r.delivery_count)}
                elif e[0] == "acknowledge":
                    _kind, member, batches, before, after, views = e
                    for b in batches:
                        assert f"{member} " in text and f" {_range(b.first_offset, b.last_offset)}:" in text
                        allowed |= {b.first_offset, b.last_offset}
                    for offset, view in views.items():
                        allowed.add(offset)
                        if view is not None:
                            assert f"{view.state.name.lower()} (delivery count {view.delivery_count})" in text
                            allowed.add(view.delivery_count)
                        else:
                            assert "below the SPSO" in text and offset < after
                    if after != before:
                        assert f"the SPSO moves from {before} to {after}" in text
                    allowed |= {before, after}
                elif e[0] == "expire":
                    _kind, count, before, changed = e
                    assert f"expire_locks returns {count}" in text
                    assert sum(1 for v in changed.values() if v.state is not RecordState.ACQUIRED) == count
                    offsets = sorted(changed)
                    owner = before[offsets[0]].member_id
                    assert f"{owner}'s lock on {_range(offsets[0], offsets[-1])} times out" in text
                    view = changed[offsets[0]]
                    assert f"{view.state.name.lower()} (delivery count {view.delivery_count})" in text
                    allowed |= {count, *offsets, *(v.delivery_count for v in changed.values())}
            numbers = {int(n) for n in re.findall(r"\d+", text)}
            assert numbers <= allowed | _elapsed_seconds(text), (line, numbers - allowed)
            pending = []
        elif line.startswith("t="):
            _kind, state, start, end, in_flight = read
            assert line.endswith(f"SPSO={start} SPEO={end} in-flight={in_flight}")
        elif line.startswith("durable"):
            state = read[1]
            expected = ", ".join(f"{b.first_offset}-{b.last_offset}:{b.delivery_state}/{b.delivery_count}"
                                 for b in state.state_batches) or "none"
            assert line == f"durable  start_offset={state.start_offset} batches(first-last:state/count)={expected}"
    assert narrations == 11
    assert spy.partition.start_offset == first_offset + 20
    assert spy.partition.record_state(first_offset + 20).state is RecordState.ACQUIRED


def _elapsed_seconds(text):
    """The "N s later" numbers: the clock's advances, which the script makes (not engine results)."""
    return {int(n) for n in re.findall(r"(\d+) s later", text)}
