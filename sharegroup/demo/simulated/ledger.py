"""`Ledger`: the demo's own account of every record it produced, kept apart from the share-partition
leaders so that the two can be checked against each other.

For each record it knows the kind (normal, poison, malformed) and where the record ended (`Outcome`);
for each delivery, how it ended (accepted, released, rejected, lock expired, released on leave). It
counts into the `DemoSummary` and the leaders' Prometheus metrics as it goes, and it raises
AssertionError the moment the leaders and it disagree (a record settled twice, a lock expiry count the
held records do not explain).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ...metrics import SharePartitionMetrics
from ...types import AcknowledgementBatch, AcknowledgeType, AcquiredRecords
from .summary import DemoSummary, Outcome
from .workload import RecordKind, Workload

__all__ = ["Ledger"]


class _Held(NamedTuple):
    """Records a member holds without acknowledging them: until their lock expires or it leaves."""

    lock_deadline_ms: int
    member_id: str
    records: list[AcquiredRecords]


def _record_count(records: Sequence[AcquiredRecords]) -> int:
    return sum(r.last_offset - r.first_offset + 1 for r in records)


class Ledger:
    """Per-record kinds and outcomes, per-member held records, and the counting of every delivery."""

    def __init__(self, *, partitions: int, workload: Workload, summary: DemoSummary,
                 metrics: Sequence[SharePartitionMetrics], delivery_count_limit: int,
                 record_lock_duration_ms: int) -> None:
        self.workload = workload
        self.summary = summary
        self.metrics = metrics
        self.delivery_count_limit = delivery_count_limit
        self.record_lock_duration_ms = record_lock_duration_ms
        self.kinds = [bytearray() for _ in range(partitions)]  # RecordKind per offset
        self.outcomes = [bytearray() for _ in range(partitions)]  # Outcome per offset
        self._held: list[list[_Held]] = [[] for _ in range(partitions)]

    # -- the producer --

    def produced(self, partition: int, base_offset: int, last_offset: int) -> None:
        """Records [base_offset, last_offset] were appended to the partition's log."""
        kinds = self.kinds[partition]
        if base_offset != len(kinds):
            raise AssertionError(f"partition {partition}: produced {base_offset} after {len(kinds)} records")
        summary = self.summary
        for offset in range(base_offset, last_offset + 1):
            kind = self.workload.record_kind(partition, offset)
            kinds.append(kind)
            if kind == RecordKind.POISON:
                summary.poison_records += 1
            elif kind == RecordKind.MALFORMED:
                summary.malformed_records += 1
        count = last_offset - base_offset + 1
        self.outcomes[partition].extend(bytes(count))
        summary.produced += count
        summary.producer_batches += 1

    # -- the consumers --

    def acquired(self, partition: int, records: Sequence[AcquiredRecords]) -> int:
        """A consumer got `records`; returns how many."""
        count = self.metrics[partition].acquired(records)
        self.summary.deliveries += count
        self.summary.redeliveries += _record_count([r for r in records if r.delivery_count > 1])
        return count

    def crashes_processing(self, partition: int, records: Sequence[AcquiredRecords]) -> bool:
        """Whether processing `records` hits a poison record that crashes the consumer."""
        kinds = self.kinds[partition]
        workload = self.workload
        for first, last, delivery_count in records:
            for offset in range(first, last + 1):
                if kinds[offset] == RecordKind.POISON and workload.poison_crashes_consumer(
                        partition, offset, delivery_count):
                    return True
        return False

    def acknowledgements(self, partition: int, records: Sequence[AcquiredRecords]) -> list[AcknowledgementBatch]:
        """What a consumer that processed `records` acknowledges: one batch per acquired run, with one
        type for the whole run when the types agree."""
        kinds = self.kinds[partition]
        decide = self.workload.acknowledge_type
        batches = []
        for first, last, delivery_count in records:
            types = tuple(int(decide(kinds[offset], partition, offset, delivery_count))
                          for offset in range(first, last + 1))
            if all(t == types[0] for t in types):
                types = types[:1]
            batches.append(AcknowledgementBatch(first, last, types))
        return batches

    def acknowledged(self, partition: int, records: Sequence[AcquiredRecords],
                     batches: Sequence[AcknowledgementBatch]) -> None:
        """The leader applied `batches`, the acknowledgement of `records` (one batch per run)."""
        summary = self.summary
        metrics = self.metrics[partition]
        counts = metrics.acknowledged(batches)
        summary.accepted += counts.get(AcknowledgeType.ACCEPT, 0)
        summary.released += counts.get(AcknowledgeType.RELEASE, 0)
        summary.rejected += counts.get(AcknowledgeType.REJECT, 0)
        metrics.archived("rejected", counts.get(AcknowledgeType.REJECT, 0))
        at_limit = 0
        for (first, last, delivery_count), batch in zip(records, batches):
            types = batch.acknowledge_types
            for index in range(last - first + 1):
                ack_type = types[0] if len(types) == 1 else types[index]
                if ack_type == AcknowledgeType.ACCEPT:
                    self._settle(partition, first + index, first + index, Outcome.ACCEPTED)
                elif ack_type == AcknowledgeType.REJECT:
                    self._settle(partition, first + index, first + index, Outcome.REJECTED)
                elif ack_type == AcknowledgeType.RELEASE and delivery_count >= self.delivery_count_limit:
                    at_limit += 1
                    self._settle(partition, first + index, first + index, Outcome.DELIVERY_LIMIT)
        summary.archived_delivery_limit += at_limit
        metrics.archived("delivery_limit", at_limit)

    def hold(self, partition: int, member_id: str, records: list[AcquiredRecords], acquired_at_ms: int) -> None:
        """`member_id` will not acknowledge `records` (it crashed, or its acknowledgement failed): they
        stay acquired until their lock expires or the member leaves."""
        deadline_ms = acquired_at_ms + self.record_lock_duration_ms
        self._held[partition].append(_Held(deadline_ms, member_id, records))

    def locks_expired(self, partition: int, now_ms: int, expired_count: int) -> None:
        """The leader expired `expired_count` locks at `now_ms`: exactly the held records due by then."""
        keep: list[_Held] = []
        expected = archived = 0
        for held in self._held[partition]:
            if held.lock_deadline_ms > now_ms:
                keep.append(held)
                continue
            for first, last, delivery_count in held.records:
                expected += last - first + 1
                if delivery_count >= self.delivery_count_limit:
                    archived += last - first + 1
                    self._settle(partition, first, last, Outcome.LOCK_EXPIRY)
        self._held[partition] = keep
        if expected != expired_count:
            raise AssertionError(f"partition {partition}: {expired_count} locks expired at {now_ms}, "
                                 f"the ledger expected {expected}")
        self.summary.lock_expired += expected
        self.summary.archived_lock_expiry += archived
        self.metrics[partition].lock_expired(expected)
        self.metrics[partition].archived("lock_expiry", archived)

    def member_released(self, partition: int, member_id: str) -> None:
        """The leader released what `member_id` held on the partition (it left or its session ended)."""
        mine = [held for held in self._held[partition] if held.member_id == member_id]
        if not mine:
            return
        self._held[partition] = [held for held in self._held[partition] if held.member_id != member_id]
        released = archived = 0
        for held in mine:
            for first, last, delivery_count in held.records:
                released += last - first + 1
                if delivery_count >= self.delivery_count_limit:
                    archived += last - first + 1
                    self._settle(partition, first, last, Outcome.DELIVERY_LIMIT)
        self.summary.released_on_leave += released
        self.summary.archived_delivery_limit += archived
        self.metrics[partition].archived("delivery_limit", archived)

    # -- queries --

    def in_flight_count(self, partition: int) -> int:
        """Records of the partition that are not delivery-complete."""
        return self.outcomes[partition].count(Outcome.IN_FLIGHT)

    def held_count(self, partition: int) -> int:
        return sum(_record_count(held.records) for held in self._held[partition])

    def poison_offsets(self, partition: int) -> list[int]:
        return [offset for offset, kind in enumerate(self.kinds[partition]) if kind == RecordKind.POISON]

    def _check(self) -> None:
        """Every invariant of the ledger, O(records): kinds and outcomes for every produced record, held
        records still in flight, and the summary's per-record counts equal to the tallies of outcomes."""
        summary = self.summary
        tally = dict.fromkeys(Outcome, 0)
        for partition, outcomes in enumerate(self.outcomes):
            assert len(outcomes) == len(self.kinds[partition]), partition
            for outcome in Outcome:
                tally[outcome] += outcomes.count(outcome)
            for held in self._held[partition]:
                for first, last, _count in held.records:
                    assert all(outcomes[o] == Outcome.IN_FLIGHT for o in range(first, last + 1)), (partition, held)
        assert sum(tally.values()) == summary.produced, (tally, summary.produced)
        assert tally[Outcome.ACCEPTED] == summary.accepted, (tally, summary.accepted)
        assert tally[Outcome.REJECTED] == summary.rejected, (tally, summary.rejected)
        assert tally[Outcome.DELIVERY_LIMIT] == summary.archived_delivery_limit, tally
        assert tally[Outcome.LOCK_EXPIRY] == summary.archived_lock_expiry, tally

    def _settle(self, partition: int, first: int, last: int, outcome: Outcome) -> None:
        outcomes = self.outcomes[partition]
        for offset in range(first, last + 1):
            if outcomes[offset] != Outcome.IN_FLIGHT:
                raise AssertionError(f"partition {partition} offset {offset}: {Outcome(outcomes[offset]).name} "
                                     f"and then {outcome.name}")
            outcomes[offset] = outcome
