"""A narrated walk-through of KIP-932's worked example: `sharegroup demo --walkthrough`.

It drives a SharePartition over whatever Persister the command line hands it (the coordinator rules of
`persister.InMemoryPersister`) and, after every step, prints what the calls returned, the in-flight
window and the durable state read back through the Persister protocol. Every number in the text comes
from those results (acquired ranges and delivery counts, the records' states after an
acknowledgement, the count `expire_locks` returned, start and end offsets, durable batches), never from
the script, so the narration cannot tell a different story from the engine. `run_walkthrough` also
returns the steps as data for tests.
"""

from __future__ import annotations

import uuid
from typing import Callable, NamedTuple, Sequence

from ..clock import ManualClock
from ..config import ShareGroupConfig
from ..manager.share_partition import SharePartition
from ..persistence import Persister
from ..tracker import NATIVE
from ..types import AcknowledgementBatch, AcknowledgeType, AcquiredRecords, FetchedBatch, PartitionState, RecordState

__all__ = ["GROUP", "TOPIC", "Step", "run_walkthrough"]

GROUP = "demo-group"
TOPIC = uuid.UUID("6f1b7c1e-0000-4000-8000-000000000932")
LOCK_DURATION_MS = 30_000
_LETTER = {RecordState.AVAILABLE: "a", RecordState.ACQUIRED: "Q", RecordState.ACKNOWLEDGED: "+",
           RecordState.ARCHIVED: "x"}
_LEGEND = "a = available, Q = acquired (owner below), + = acknowledged, x = archived, . = below SPSO"
_VERB = {AcknowledgeType.ACCEPT: "accepts", AcknowledgeType.RELEASE: "releases", AcknowledgeType.REJECT: "rejects",
         AcknowledgeType.GAP: "marks as gaps", AcknowledgeType.RENEW: "renews"}


class Step(NamedTuple):
    """One narrated step: what was called and returned, and the state after it."""

    number: int
    narration: str
    time_ms: int
    acquired: list[tuple[str, list[AcquiredRecords]]]    # (member, what acquire returned), in call order
    acknowledged: list[tuple[str, AcknowledgementBatch]]  # (member, batch acknowledged)
    expired: int | None                                    # what expire_locks returned, if it was called
    start_offset: int
    end_offset: int
    in_flight_count: int
    window: str                                            # one letter per offset of the shown range
    owners: str                                            # first letter of the owner per offset
    durable: PartitionState                                # read back through the Persister protocol


def _offsets(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _acquired_text(member: str, got: Sequence[AcquiredRecords]) -> str:
    if not got:
        return f"{member} acquires nothing"
    parts = [f"{_offsets(r.first_offset, r.last_offset)} (delivery count {r.delivery_count})" for r in got]
    return f"{member} acquires " + " and ".join(parts)


def _states_text(sp: SharePartition, first: int, last: int) -> str:
    """What the records first..last are now, as runs of equal (state, delivery count)."""
    runs: list[list] = []
    for offset in range(first, last + 1):
        view = sp.record_state(offset)
        key = ("done (below the SPSO)", None) if view is None else (view.state.name.lower(), view.delivery_count)
        if runs and runs[-1][2] == key and runs[-1][1] == offset - 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, key])
    parts = []
    for lo, hi, (state, count) in runs:
        verb = "is" if lo == hi else "are"
        parts.append(f"{_offsets(lo, hi)} {verb} {state}" + ("" if count is None else f" (delivery count {count})"))
    return ", ".join(parts)


def _spso_text(before: int, after: int) -> str:
    return f"the SPSO stays at {after}" if before == after else f"the SPSO moves from {before} to {after}"


def _later(elapsed_ms: int) -> str:
    return f"{elapsed_ms / 1000:g} s later " if elapsed_ms else ""


def _durable_text(state: PartitionState) -> str:
    batches = ", ".join(f"{b.first_offset}-{b.last_offset}:{b.delivery_state}/{b.delivery_count}"
                        for b in state.state_batches) or "none"
    return f"start_offset={state.start_offset} batches(first-last:state/count)={batches}"


class _Narrator:
    """Runs the calls of one step, remembers their results, and builds the step's text from them."""

    def __init__(self, sp: SharePartition, persister: Persister, clock: ManualClock, log: list[FetchedBatch],
                 shown: tuple[int, int], out: Callable[[str], None]) -> None:
        self.sp, self.persister, self.clock, self.log, self.shown, self.out = sp, persister, clock, log, shown, out
        self.steps: list[Step] = []
        self._clauses: list[str] = []
        self._acquired: list[tuple[str, list[AcquiredRecords]]] = []
        self._acknowledged: list[tuple[str, AcknowledgementBatch]] = []
        self._expired: int | None = None
        self._last_ms = clock.now_ms()

    def _time(self) -> str:
        elapsed = self.clock.now_ms() - self._last_ms
        self._last_ms = self.clock.now_ms()
        return _later(elapsed)

    def fetch(self, offset: int, upto: int | None = None) -> list[FetchedBatch]:
        """The log's producer batches from the one holding `offset` (up to the one holding `upto`)."""
        return [b for b in self.log if b.last_offset >= offset and (upto is None or b.base_offset <= upto)]

    def acquire(self, member: str, fetched: list[FetchedBatch], **kwargs) -> list[AcquiredRecords]:
        got = self.sp.acquire(member, fetched, **kwargs)
        self._acquired.append((member, got))
        self._clauses.append(self._time() + _acquired_text(member, got))
        return got

    async def acknowledge(self, member: str, first: int, last: int, kind: AcknowledgeType) -> None:
        batch = AcknowledgementBatch(first, last, (int(kind),))
        before = self.sp.start_offset
        await self.sp.acknowledge(member, [batch])
        self._acknowledged.append((member, batch))
        text = f"{self._time()}{member} {_VERB[kind]} {_offsets(first, last)}: {_states_text(self.sp, first, last)}"
        if self.sp.start_offset != before:
            text += f"; {_spso_text(before, self.sp.start_offset)}"
        self._clauses.append(text)

    async def expire_locks(self) -> int:
        lo, hi = self.shown
        before = {o: self.sp.record_state(o) for o in range(lo, hi + 1)}
        expired = await self.sp.expire_locks()
        self._expired = expired
        lost: dict[str, list[int]] = {}
        for offset, view in before.items():
            now = self.sp.record_state(offset)
            if view is not None and view.state is RecordState.ACQUIRED and (now is None or now.state is not RecordState.ACQUIRED):
                lost.setdefault(view.member_id, []).append(offset)
        text = self._time() + (" and ".join(f"{m}'s lock on {_offsets(o[0], o[-1])}" for m, o in lost.items())
                               or "no lock") + f" times out: expire_locks returns {expired}"
        for offsets in lost.values():
            text += f"; {_states_text(self.sp, offsets[0], offsets[-1])}"
        self._clauses.append(text)
        return expired

    async def show(self) -> Step:
        """Close the step: print its narration, the window and the durable state."""
        sp = self.sp
        cells, owners = _window(sp, *self.shown)
        durable = await self.persister.read_state(GROUP, TOPIC, 0, leader_epoch=sp.leader_epoch)
        number = len(self.steps)
        narration = f"{number}. " + ("; ".join(self._clauses) if self._clauses
                                     else f"share-partition initialized at offset {sp.start_offset}")
        step = Step(number, narration, self.clock.now_ms(), self._acquired, self._acknowledged, self._expired,
                    sp.start_offset, sp.end_offset, sp.in_flight_count, cells, owners, durable)
        self.steps.append(step)
        self._clauses, self._acquired, self._acknowledged, self._expired = [], [], [], None
        self.out(f"\n{narration}")
        self.out(f"  t={self.clock.now_ms() // 1000:>3}s   {cells}   SPSO={sp.start_offset} SPEO={sp.end_offset} "
                 f"in-flight={sp.in_flight_count}")
        self.out(f"  owners   {owners}")
        self.out(f"  durable  {_durable_text(durable)}")
        return step


def _window(sp: SharePartition, lo: int, hi: int) -> tuple[str, str]:
    cells, owners = [], []
    for o in range(lo, hi + 1):
        view = sp.record_state(o)
        if o < sp.start_offset:
            cells.append(".")
            owners.append(" ")
        elif view is None:
            cells.append(" ")
            owners.append(" ")
        else:
            cells.append(_LETTER[view.state])
            owners.append(view.member_id[:1] if view.member_id else " ")
    return "".join(cells), "".join(owners)


async def run_walkthrough(persister: Persister, clock: ManualClock, out: Callable[[str], None] = print, *,
                          first_offset: int = 100) -> list[Step]:
    """Run the example against `persister` (empty for this group) with `clock` driving the locks.

    KIP-932 starts the share-partition at offset 100; `first_offset` moves the whole example (tests use
    it to make sure every number printed is computed, not scripted). Returns the steps."""
    base = first_offset
    await persister.initialize_state(GROUP, TOPIC, 0, state_epoch=0, start_offset=base)
    sp = SharePartition(GROUP, TOPIC, 0, persister=persister, clock=clock,
                        config=ShareGroupConfig(record_lock_duration_ms=LOCK_DURATION_MS))
    await sp.initialize()
    log = [FetchedBatch(base, base + 9), FetchedBatch(base + 10, base + 12), FetchedBatch(base + 13, base + 18),
           FetchedBatch(base + 19, base + 19), FetchedBatch(base + 20, base + 20)]
    n = _Narrator(sp, persister, clock, log, (base, base + 20), out)

    out(f"KIP-932 worked example on one share-partition (tracker: {'native Cython' if NATIVE else 'pure Python'})")
    out(_LEGEND)
    out(f"offsets  {base:<10}{base + 10:<10}{base + 20}")
    await n.show()

    got = n.acquire("A", n.fetch(base, base + 9))
    await n.acknowledge("A", got[0].first_offset, got[-1].last_offset, AcknowledgeType.ACCEPT)
    await n.show()

    held_by_a = n.acquire("A", n.fetch(sp.next_fetch_offset(), base + 19), max_records=3)
    clock.advance(10_000)
    held_by_b = n.acquire("B", n.fetch(sp.next_fetch_offset(), base + 19), max_records=6)
    held_by_c = n.acquire("C", n.fetch(sp.next_fetch_offset(), base + 19))
    await n.show()

    first_of_a = held_by_a[0].first_offset
    await n.acknowledge("A", first_of_a, first_of_a, AcknowledgeType.RELEASE)
    await n.show()

    await n.acknowledge("C", held_by_c[0].first_offset, held_by_c[-1].last_offset, AcknowledgeType.ACCEPT)
    await n.show()

    clock.advance(10_000)
    n.acquire("C", n.fetch(sp.next_fetch_offset()))
    await n.show()

    clock.advance(10_000)
    await n.expire_locks()
    await n.show()

    await n.acknowledge("B", held_by_b[0].first_offset, held_by_b[-1].last_offset, AcknowledgeType.ACCEPT)
    await n.show()

    clock.advance(1_000)
    again_by_b = n.acquire("B", n.fetch(sp.next_fetch_offset(), base + 19))
    await n.show()

    await n.acknowledge("C", first_of_a, first_of_a, AcknowledgeType.ACCEPT)
    await n.show()

    await n.acknowledge("B", again_by_b[0].first_offset, again_by_b[-1].last_offset, AcknowledgeType.ACCEPT)
    await n.show()
    sp._check()

    final = n.steps[-1]
    in_flight = [(o, sp.record_state(o)) for o in range(final.start_offset, final.end_offset)]
    held = ", ".join(f"{o} ({v.state.name.lower()}" + (f" by {v.member_id}" if v.member_id else "")
                     + f", delivery count {v.delivery_count})" for o, v in in_flight if v is not None) or "nothing"
    out(f"\nDurable: {_durable_text(final.durable)}; in flight: {held}.")
    return n.steps
