"""`LiveLedger`: the live demo's account of every record, built from what the producer was told and what
the consumers really saw and acknowledged (plain data, no I/O).

Every delivery a consumer reports carries (partition, offset, delivery count, acknowledgement, whether
the broker took the acknowledgement, digest). From these alone the ledger knows where each record must
have ended, by Kafka's rules for a share group with delivery count limit L:

- ACCEPT taken → accepted; REJECT taken → archived (rejected);
- RELEASE taken → available again, or archived when its delivery count was L (delivery limit);
- held by the consumer that was killed → released when its connection closed (archived at L);
- an acknowledgement the broker refused (the lock had expired) → available again, archived at L.

It checks as it goes that no record is delivered again once it is accepted or archived, that delivery
counts only grow (a count the application never saw is allowed only once, for a record the killed
consumer's client had acquired but not yet handed out), and that keys, values and headers arrive as
produced. `outcome_problems()` then checks that every produced record ended as its kind implies.
"""

from __future__ import annotations

import enum
from typing import Iterable, NamedTuple

from ...types import AcknowledgeType
from .workload import RecordKind

__all__ = ["Delivery", "LiveLedger", "LiveOutcome"]

MAX_PROBLEMS = 20  # problems kept verbatim (the count is always exact)


class LiveOutcome(enum.IntEnum):
    IN_FLIGHT = 0
    ACCEPTED = 1
    REJECTED = 2  # archived: rejected
    DELIVERY_LIMIT = 3  # archived: released on its last allowed delivery
    KILLED_AT_LIMIT = 4  # archived: held by the killed consumer on its last allowed delivery
    LOCK_EXPIRY_AT_LIMIT = 5  # archived: its lock expired on its last allowed delivery


ARCHIVED = (LiveOutcome.REJECTED, LiveOutcome.DELIVERY_LIMIT, LiveOutcome.KILLED_AT_LIMIT,
            LiveOutcome.LOCK_EXPIRY_AT_LIMIT)


class Delivery(NamedTuple):
    """One delivery as a consumer reported it; `ack` 0 means held, never acknowledged (killed)."""

    partition: int
    offset: int
    delivery_count: int
    ack: int
    ack_ok: bool
    digest: int


class _Record:
    __slots__ = ("sequence", "kind", "digest", "counts", "top_count", "outcome")

    def __init__(self, sequence: int, kind: RecordKind, digest: int) -> None:
        self.sequence = sequence
        self.kind = kind
        self.digest = digest
        self.counts: set[int] = set()  # the delivery counts seen
        self.top_count = 0
        self.outcome = LiveOutcome.IN_FLIGHT  # what the delivery with the top count implies

    @property
    def unseen(self) -> int:
        return self.top_count - len(self.counts)


class LiveLedger:
    """Counts and checks every delivery; `done` is how many records are accepted or archived."""

    def __init__(self, delivery_count_limit: int) -> None:
        if delivery_count_limit < 2:
            raise ValueError(f"delivery_count_limit must be at least 2, got {delivery_count_limit}")
        self.delivery_count_limit = delivery_count_limit
        self.records: dict[tuple[int, int], _Record] = {}
        self.kinds: dict[RecordKind, int] = {kind: 0 for kind in RecordKind}
        self.done = 0
        self.deliveries = 0
        self.redeliveries = 0
        self.acks = {AcknowledgeType.ACCEPT: 0, AcknowledgeType.RELEASE: 0, AcknowledgeType.REJECT: 0}
        self.ack_failures = 0
        self.held: list[tuple[int, int, int]] = []  # (partition, offset, delivery count) the killed consumer held
        self.outcomes = {outcome: 0 for outcome in LiveOutcome}
        self.problem_count = 0
        self.problems: list[str] = []
        self._early: dict[tuple[int, int], list[tuple[int, Delivery, bool]]] = {}

    # -- what the producer was told ------------------------------------------------------------------

    def produced(self, partition: int, offset: int, sequence: int, kind: RecordKind, digest: int) -> None:
        key = (partition, offset)
        if key in self.records:
            self._problem(f"partition {partition} offset {offset} acknowledged to the producer twice")
            return
        self.records[key] = _Record(sequence, kind, digest)
        self.kinds[kind] += 1
        self.outcomes[LiveOutcome.IN_FLIGHT] += 1
        for consumer, delivery, held in sorted(self._early.pop(key, ()), key=lambda e: e[1].delivery_count):
            self.delivered(consumer, (delivery,), held=held)

    def producer_finished(self) -> None:
        """Every delivery report is in: a delivery of a record the producer never heard of is a problem."""
        for (partition, offset), early in sorted(self._early.items()):
            self._problem(f"partition {partition} offset {offset}: delivered {len(early)} times but never "
                          "acknowledged to the producer")
        self._early.clear()

    # -- what the consumers saw ----------------------------------------------------------------------

    def delivered(self, consumer: int, deliveries: Iterable[Delivery | tuple], *, held: bool = False) -> None:
        """A batch a consumer handled (or, `held`, the part the killed consumer still held)."""
        for delivery in deliveries:
            d = Delivery(*delivery)
            where = f"partition {d.partition} offset {d.offset} (consumer {consumer}, delivery {d.delivery_count})"
            record = self.records.get((d.partition, d.offset))
            if record is None:
                # A consumer may see a record before the producer's delivery report reaches the ledger.
                self._early.setdefault((d.partition, d.offset), []).append((consumer, d, held))
                continue
            self.deliveries += 1
            self.redeliveries += d.delivery_count > 1
            if d.digest != record.digest:
                self._problem(f"{where}: key, value or headers differ from what was produced")
            if d.delivery_count in record.counts:
                self._problem(f"{where}: delivered twice with the same delivery count")
                continue
            record.counts.add(d.delivery_count)
            self._settle(record, d, held, where)

    def _settle(self, record: _Record, d: Delivery, held: bool, where: str) -> None:
        """Reports of different consumers arrive in any order, so a record's state is what its delivery
        with the highest count implies; a delivery that ended the record must be its last one."""
        at_limit = d.delivery_count >= self.delivery_count_limit
        if held:
            self.held.append((d.partition, d.offset, d.delivery_count))
            outcome = LiveOutcome.KILLED_AT_LIMIT if at_limit else LiveOutcome.IN_FLIGHT
        elif not d.ack_ok:
            self.ack_failures += 1
            outcome = LiveOutcome.LOCK_EXPIRY_AT_LIMIT if at_limit else LiveOutcome.IN_FLIGHT
        else:
            ack = AcknowledgeType(d.ack)
            self.acks[ack] += 1
            outcome = {AcknowledgeType.ACCEPT: LiveOutcome.ACCEPTED, AcknowledgeType.REJECT: LiveOutcome.REJECTED,
                       AcknowledgeType.RELEASE: LiveOutcome.DELIVERY_LIMIT if at_limit else LiveOutcome.IN_FLIGHT}[ack]
        if d.delivery_count < record.top_count:
            if outcome != LiveOutcome.IN_FLIGHT:
                self._problem(f"{where}: delivered again (count {record.top_count}) after it was "
                              f"{outcome.name.lower()}")
            return
        if record.outcome != LiveOutcome.IN_FLIGHT:
            self._problem(f"{where}: delivered again after it was {record.outcome.name.lower()}")
        record.top_count = d.delivery_count
        self.outcomes[record.outcome] -= 1
        self.outcomes[outcome] += 1
        self.done += (outcome != LiveOutcome.IN_FLIGHT) - (record.outcome != LiveOutcome.IN_FLIGHT)
        record.outcome = outcome

    @property
    def held_at_kill(self) -> int:
        return len(self.held)

    def outcome_of(self, partition: int, offset: int) -> tuple[LiveOutcome, int]:
        """(outcome, highest delivery count seen) of one record."""
        record = self.records[(partition, offset)]
        return record.outcome, record.top_count

    @property
    def unseen_deliveries(self) -> int:
        """Delivery counts no consumer reported (acquired by the killed consumer's client, not handed out)."""
        return sum(record.unseen for record in self.records.values())

    # -- the verdict ----------------------------------------------------------------------------------

    @property
    def produced_count(self) -> int:
        return len(self.records)

    def outcome_problems(self, killed: bool) -> list[str]:
        """Every record accepted or archived as its kind implies; unseen deliveries only after a kill.
        Returns the problems found here (also counted in `problem_count`)."""
        found: list[str] = []
        expected = {RecordKind.NORMAL: (LiveOutcome.ACCEPTED,), RecordKind.FLAKY: (LiveOutcome.ACCEPTED,),
                    RecordKind.MALFORMED: (LiveOutcome.REJECTED,),
                    RecordKind.POISON: (LiveOutcome.DELIVERY_LIMIT, LiveOutcome.KILLED_AT_LIMIT)}
        for (partition, offset), record in sorted(self.records.items()):
            where = f"partition {partition} offset {offset} ({record.kind.name.lower()} order {record.sequence})"
            if record.outcome == LiveOutcome.IN_FLIGHT:
                found.append(f"{where}: not accepted or archived (last delivery count {record.top_count})")
            elif record.outcome not in expected[record.kind] and record.outcome != LiveOutcome.LOCK_EXPIRY_AT_LIMIT:
                found.append(f"{where}: ended {record.outcome.name.lower()}")
            if record.unseen and (not killed or record.unseen > 1):
                found.append(f"{where}: {record.unseen} deliveries no consumer saw")
        for problem in found:
            self._problem(problem)
        return found

    def _problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def _check(self) -> None:
        assert sum(self.outcomes.values()) == len(self.records), self.outcomes
        assert self.done == len(self.records) - self.outcomes[LiveOutcome.IN_FLIGHT], (self.done, self.outcomes)
        assert self.deliveries >= self.done
