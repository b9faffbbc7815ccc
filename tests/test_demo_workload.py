"""The demo's decisions (`Workload`) and its ledger (`Ledger`): decisions are pure functions of the seed
and what they decide about; the ledger counts every delivery once and refuses what cannot happen."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry

from sharegroup.demo.hashing import rate_threshold, stable_hash64
from sharegroup.demo.simulated.ledger import Ledger
from sharegroup.demo.simulated.summary import DemoSummary, Outcome
from sharegroup.demo.simulated.workload import ConsumerBehaviour, RecordKind, Workload
from sharegroup.metrics import SharePartitionMetrics
from sharegroup.types import AcknowledgementBatch, AcknowledgeType, AcquiredRecords

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def test_consumer_behaviour_takes_rates_only():
    for bad in ({"release_rate": -0.1}, {"crash_rate": 1.5}, {"poison_rate": "0.1"}, {"malformed_rate": True},
                {"malformed_rate": 0.6, "poison_rate": 0.5}):
        with pytest.raises(ValueError):
            ConsumerBehaviour(**bad)
    assert ConsumerBehaviour(release_rate=1, crash_rate=0).release_rate == 1


def test_decisions_depend_only_on_the_seed_and_their_subject():
    busy = ConsumerBehaviour(release_rate=0.3, malformed_rate=0.2, poison_rate=0.2, crash_rate=0.3)
    one, same, other = Workload(5, busy), Workload(5, busy), Workload(6, busy)
    kinds = [one.record_kind(0, o) for o in range(400)]
    assert kinds == [same.record_kind(0, o) for o in reversed(range(400))][::-1]  # any order, same answers
    assert kinds != [other.record_kind(0, o) for o in range(400)]
    assert kinds != [one.record_kind(1, o) for o in range(400)]  # partitions differ
    assert set(kinds) == set(RecordKind)
    assert one.producer_random().random() == same.producer_random().random()
    assert one.member_id(2, 0) == same.member_id(2, 0) != one.member_id(2, 1) != one.member_id(3, 1)
    assert uuid.UUID(one.member_id(2, 0)).version == 4
    crashes = [one.consumer_crashes(1, 0, poll) for poll in range(200)]
    assert crashes == [same.consumer_crashes(1, 0, poll) for poll in range(200)] and any(crashes) and not all(crashes)


def test_acknowledge_types_follow_the_record_kind_and_the_rates():
    never = Workload(1, ConsumerBehaviour(release_rate=0))
    always = Workload(1, ConsumerBehaviour(release_rate=1))
    for workload, normal in ((never, ACCEPT), (always, RELEASE)):
        assert workload.acknowledge_type(RecordKind.NORMAL, 0, 7, 1) == normal
        assert workload.acknowledge_type(RecordKind.POISON, 0, 7, 1) == RELEASE
        assert workload.acknowledge_type(RecordKind.MALFORMED, 0, 7, 1) == REJECT
    all_poison = Workload(1, ConsumerBehaviour(poison_rate=1, malformed_rate=0, poison_crash_rate=1))
    assert all(all_poison.record_kind(0, o) == RecordKind.POISON for o in range(50))
    assert all_poison.poison_crashes_consumer(0, 3, 2)
    assert not Workload(1, ConsumerBehaviour(poison_crash_rate=0)).poison_crashes_consumer(0, 3, 2)
    assert rate_threshold(0) == 0 and rate_threshold(1) == 1 << 64 and rate_threshold(0.5) == 1 << 63
    assert stable_hash64(1, 2) != stable_hash64(2, 1) and 0 <= stable_hash64(3) < 1 << 64


def ledger(behaviour=ConsumerBehaviour(release_rate=0, malformed_rate=0, poison_rate=0), limit=3):
    summary = DemoSummary(data_dir="d", group_id="g", topic_id=uuid.uuid4(), partitions=1, consumers=1, seed=1,
                          tracker="t", delivery_count_limit=limit)
    metrics = [SharePartitionMetrics("g", "t", 0, registry=CollectorRegistry())]
    return Ledger(partitions=1, workload=Workload(1, behaviour), summary=summary, metrics=metrics,
                  delivery_count_limit=limit, record_lock_duration_ms=1_000)


def test_the_ledger_counts_each_delivery_once():
    book = ledger()
    book.produced(0, 0, 9)
    assert book.summary.produced == 10 and book.in_flight_count(0) == 10
    got = [AcquiredRecords(0, 4, 1)]
    assert book.acquired(0, got) == 5
    acks = book.acknowledgements(0, got)
    assert acks == [AcknowledgementBatch(0, 4, (ACCEPT,))]  # one type for the whole run
    book.acknowledged(0, got, acks)
    # A crashed member's records: their locks expire after the lock duration, at the limit they are archived.
    held = [AcquiredRecords(5, 6, 1), AcquiredRecords(7, 7, 3)]
    assert book.acquired(0, held) == 3
    book.hold(0, "m", held, acquired_at_ms=100)
    assert book.held_count(0) == 3
    book.locks_expired(0, now_ms=1_099, expired_count=0)  # not yet due
    book.locks_expired(0, now_ms=1_100, expired_count=3)
    s = book.summary
    assert (s.deliveries, s.redeliveries, s.accepted, s.lock_expired, s.archived_lock_expiry) == (8, 1, 5, 3, 1)
    assert list(book.outcomes[0]) == [Outcome.ACCEPTED] * 5 + [Outcome.IN_FLIGHT] * 2 + [Outcome.LOCK_EXPIRY] + \
        [Outcome.IN_FLIGHT] * 2
    book._check()
    # A member that leaves releases what it holds; at the limit that archives too.
    book.hold(0, "n", [AcquiredRecords(8, 9, 3)], acquired_at_ms=2_000)
    book.member_released(0, "m")  # holds nothing any more
    book.member_released(0, "n")
    assert (s.released_on_leave, s.archived_delivery_limit, book.in_flight_count(0)) == (2, 2, 2)
    book._check()


def test_the_ledger_refuses_what_cannot_happen():
    book = ledger()
    book.produced(0, 0, 3)
    with pytest.raises(AssertionError, match="produced 10 after 4"):
        book.produced(0, 10, 12)  # a gap in the offsets
    got = [AcquiredRecords(0, 1, 1)]
    book.acknowledged(0, got, book.acknowledgements(0, got))
    with pytest.raises(AssertionError, match="ACCEPTED and then ACCEPTED"):
        book.acknowledged(0, got, book.acknowledgements(0, got))  # settled twice
    book.hold(0, "m", [AcquiredRecords(2, 3, 1)], acquired_at_ms=0)
    with pytest.raises(AssertionError, match="1 locks expired .* expected 2"):
        book.locks_expired(0, now_ms=1_000, expired_count=1)
    fresh = ledger()
    fresh.produced(0, 0, 3)
    fresh.acknowledged(0, got, fresh.acknowledgements(0, got))
    fresh._check()
    fresh.summary.accepted += 1  # a count the outcomes do not explain
    with pytest.raises(AssertionError):
        fresh._check()
