"""A narrated walk-through of KIP-932's worked example: `sharegroup demo --walkthrough`.

It drives a SharePartition over whatever Persister the command line hands it (the coordinator rules of
`persister.InMemoryPersister`) and prints the in-flight window and the durable state, read back through
the Persister protocol, after every step.
"""

from __future__ import annotations

import uuid
from typing import Callable

from .clock import ManualClock
from .config import ShareGroupConfig
from .partition import SharePartition
from .persistence import Persister
from .tracker import NATIVE
from .types import AcknowledgementBatch as Ack
from .types import FetchedBatch as FB

GROUP = "demo-group"
TOPIC = uuid.UUID("6f1b7c1e-0000-4000-8000-000000000932")
_LETTER = {0: "a", 1: "Q", 2: "+", 4: "x"}
_LEGEND = "a = available, Q = acquired (owner below), + = acknowledged, x = archived, . = below SPSO"


def _window(sp: SharePartition, lo: int, hi: int) -> str:
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
            cells.append(_LETTER[int(view.state)])
            owners.append(view.member_id[:1] if view.member_id else " ")
    return "".join(cells), "".join(owners)


async def walkthrough(persister: Persister, clock: ManualClock, out: Callable[[str], None] = print) -> None:
    """Run the example against `persister` (empty for this group) with `clock` driving the locks."""
    await persister.initialize_state(GROUP, TOPIC, 0, state_epoch=0, start_offset=100)
    sp = SharePartition(GROUP, TOPIC, 0, persister=persister, clock=clock,
                        config=ShareGroupConfig(record_lock_duration_ms=30_000))
    await sp.initialize()
    log = [FB(100, 109), FB(110, 112), FB(113, 118), FB(119, 119), FB(120, 120)]

    def fetch(offset: int, upto: int = 119):
        return [b for b in log if b.last_offset >= offset and b.base_offset <= upto]

    out(f"KIP-932 worked example on one share-partition (tracker: {'native Cython' if NATIVE else 'pure Python'})")
    out(_LEGEND)
    out("offsets  100       110       120")

    async def show(step: str) -> None:
        cells, owners = _window(sp, 100, 120)
        state = await persister.read_state(GROUP, TOPIC, 0, leader_epoch=sp.leader_epoch)
        batches = ", ".join(f"{b.first_offset}-{b.last_offset}:{b.delivery_state}/{b.delivery_count}"
                            for b in state.state_batches) or "none"
        out(f"\n{step}")
        out(f"  t={clock.now_ms() // 1000:>3}s   {cells}   SPSO={sp.start_offset} SPEO={sp.end_offset} "
            f"in-flight={sp.in_flight_count}")
        out(f"  owners   {owners}")
        out(f"  durable  start_offset={state.start_offset} batches(first-last:state/count)={batches}")

    await show("0. share-partition initialized at offset 100")
    sp.acquire("A", fetch(100, 109))
    await sp.acknowledge("A", [Ack(100, 109, (1,))])
    await show("1. A fetches 100-109 and accepts them")
    sp.acquire("A", fetch(110), max_records=3)
    clock.advance(10_000)
    sp.acquire("B", fetch(sp.next_fetch_offset()), max_records=6)
    sp.acquire("C", fetch(sp.next_fetch_offset()))
    await show("2. A acquires 110-112; ten seconds later B acquires 113-118 and C acquires 119")
    await sp.acknowledge("A", [Ack(110, 110, (2,))])
    await show("3. A releases 110")
    await sp.acknowledge("C", [Ack(119, 119, (1,))])
    await show("4. C accepts 119")
    clock.advance(10_000)
    sp.acquire("C", fetch(110, 120))
    await show(f"5. C fetches again: 110 (delivery count {sp.record_state(110).delivery_count}) and the new record 120")
    clock.advance(10_000)
    expired = await sp.expire_locks()
    await show(f"6. A's lock on 111-112 times out ({expired} records available again)")
    await sp.acknowledge("B", [Ack(113, 118, (1,))])
    await show("7. B accepts 113-118")
    clock.advance(1_000)
    sp.acquire("B", fetch(111, 120))
    await show(f"8. B fetches 111-112 (delivery count {sp.record_state(111).delivery_count})")
    await sp.acknowledge("C", [Ack(110, 110, (1,))])
    await show("9. C accepts 110: the SPSO moves to 111")
    await sp.acknowledge("B", [Ack(111, 112, (1,))])
    await show("10. B accepts 111-112: everything below 120 is done")
    sp._check()
    out("\nEverything below 120 is durable and done; only offset 120 is in flight.")
