"""The live demo (`sharegroup demo`): the ledger's rules on hand-made reports, then one small real run
(`sharegroup serve`, a real Producer, two real ShareConsumers in child processes, one killed mid-batch)
whose every record must end exactly as its kind implies, with the durable state and the audit agreeing."""

from __future__ import annotations

import os

import pytest

from sharegroup.demo.data_dir import DATA_DIR_MARKER, prepare_serve_data_dir
from sharegroup.demo.errors import DemoError
from sharegroup.demo.live.ledger import LiveLedger, LiveOutcome
from sharegroup.demo.live.workload import LiveRates, RecordKind, ack_for, kind_of, make_record, record_digest
from sharegroup.types import AcknowledgeType

ACCEPT, RELEASE, REJECT = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE), int(AcknowledgeType.REJECT)
LIMIT = 3


def ledger_with(*kinds: RecordKind) -> LiveLedger:
    ledger = LiveLedger(LIMIT)
    for offset, kind in enumerate(kinds):
        key, value, headers = make_record(offset, kind)
        ledger.produced(0, offset, offset, kind, record_digest(key, value, headers))
    return ledger


def digest(offset: int, kind: RecordKind = RecordKind.NORMAL) -> int:
    return record_digest(*make_record(offset, kind))


# -- the workload ------------------------------------------------------------------------------------------


def test_consumers_decide_from_the_record_and_its_delivery_count():
    decisions = {kind: [ack_for(make_record(7, kind)[1], count) for count in (1, 2, 3)] for kind in RecordKind}
    assert decisions == {
        RecordKind.NORMAL: [AcknowledgeType.ACCEPT] * 3,
        RecordKind.FLAKY: [AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT],
        RecordKind.MALFORMED: [AcknowledgeType.REJECT] * 3,
        RecordKind.POISON: [AcknowledgeType.RELEASE] * 3,
    }


def test_record_kinds_follow_the_seed_and_the_rates():
    rates = LiveRates(flaky=0.1, malformed=0.05, poison=0.02)
    kinds = [kind_of(932, sequence, rates) for sequence in range(20_000)]
    assert kinds == [kind_of(932, sequence, rates) for sequence in range(20_000)]
    share = {kind: kinds.count(kind) / len(kinds) for kind in RecordKind}
    assert abs(share[RecordKind.FLAKY] - 0.1) < 0.01 and abs(share[RecordKind.POISON] - 0.02) < 0.005
    assert kinds != [kind_of(933, sequence, rates) for sequence in range(20_000)]
    with pytest.raises(ValueError):
        LiveRates(flaky=0.6, malformed=0.6)


def test_the_digest_sees_every_byte_of_key_value_and_headers():
    key, value, headers = make_record(1, RecordKind.NORMAL)
    base = record_digest(key, value, headers)
    assert record_digest(key, value, list(headers)) == base
    assert record_digest(key + b"x", value, headers) != base
    assert record_digest(key, value[:-1], headers) != base
    assert record_digest(key, value, headers[:-1]) != base
    assert record_digest(key, value, [(n, v + b"!") for n, v in headers]) != base
    assert record_digest(None, value, headers) != record_digest(b"", value, headers)


# -- the ledger --------------------------------------------------------------------------------------------


def test_ledger_settles_each_record_by_its_last_delivery_whatever_order_reports_arrive_in():
    ledger = ledger_with(RecordKind.FLAKY, RecordKind.POISON, RecordKind.MALFORMED)
    # consumer 2 reports delivery 2 of the flaky record before consumer 1 reports its delivery 1
    ledger.delivered(2, [(0, 0, 2, ACCEPT, True, digest(0, RecordKind.FLAKY))])
    ledger.delivered(1, [(0, 0, 1, RELEASE, True, digest(0, RecordKind.FLAKY)),
                         (0, 2, 1, REJECT, True, digest(2, RecordKind.MALFORMED))])
    ledger.delivered(1, [(0, 1, count, RELEASE, True, digest(1, RecordKind.POISON)) for count in (1, 3, 2)])
    assert ledger.problem_count == 0, ledger.problems
    assert [ledger.outcome_of(0, o) for o in range(3)] == [
        (LiveOutcome.ACCEPTED, 2), (LiveOutcome.DELIVERY_LIMIT, 3), (LiveOutcome.REJECTED, 1)]
    assert (ledger.done, ledger.deliveries, ledger.redeliveries) == (3, 6, 3)
    assert ledger.outcome_problems(killed=False) == []
    ledger._check()


def test_ledger_finds_double_delivery_delivery_after_acceptance_and_changed_bytes():
    ledger = ledger_with(RecordKind.NORMAL, RecordKind.NORMAL, RecordKind.NORMAL)
    ledger.delivered(1, [(0, 0, 1, ACCEPT, True, digest(0))])
    ledger.delivered(2, [(0, 0, 2, ACCEPT, True, digest(0))])  # accepted, then delivered again
    ledger.delivered(1, [(0, 1, 1, RELEASE, True, digest(1))])
    ledger.delivered(2, [(0, 1, 1, ACCEPT, True, digest(1))])  # the same delivery count twice
    ledger.delivered(1, [(0, 2, 1, ACCEPT, True, digest(2) ^ 1)])  # a changed byte
    assert ledger.problems == [
        "partition 0 offset 0 (consumer 2, delivery 2): delivered again after it was accepted",
        "partition 0 offset 1 (consumer 2, delivery 1): delivered twice with the same delivery count",
        "partition 0 offset 2 (consumer 1, delivery 1): key, value or headers differ from what was produced",
    ]


def test_ledger_outcome_check_finds_lost_and_unexplained_records():
    ledger = ledger_with(RecordKind.NORMAL, RecordKind.MALFORMED, RecordKind.NORMAL)
    ledger.delivered(1, [(0, 0, 1, RELEASE, True, digest(0))])  # released, never redelivered: lost
    ledger.delivered(1, [(0, 1, 1, ACCEPT, True, digest(1, RecordKind.MALFORMED))])  # should be rejected
    ledger.delivered(1, [(0, 2, 2, ACCEPT, True, digest(2))])  # delivery 1 never seen
    assert ledger.outcome_problems(killed=False) == [
        "partition 0 offset 0 (normal order 0): not accepted or archived (last delivery count 1)",
        "partition 0 offset 1 (malformed order 1): ended accepted",
        "partition 0 offset 2 (normal order 2): 1 deliveries no consumer saw",
    ]
    assert ledger.outcomes[LiveOutcome.IN_FLIGHT] == 1


def test_ledger_held_records_at_the_limit_are_archived_and_early_reports_wait_for_the_producer():
    ledger = LiveLedger(LIMIT)
    ledger.delivered(1, [(0, 0, 1, ACCEPT, True, digest(0))])  # before the producer's delivery report
    assert (ledger.deliveries, ledger.done) == (0, 0)
    ledger.produced(0, 0, 0, RecordKind.NORMAL, digest(0))
    ledger.produced(0, 1, 1, RecordKind.POISON, digest(1, RecordKind.POISON))
    ledger.delivered(2, [(0, 1, c, RELEASE, True, digest(1, RecordKind.POISON)) for c in (1, 2)])
    ledger.delivered(2, [(0, 1, 3, 0, False, digest(1, RecordKind.POISON))], held=True)
    ledger.delivered(2, [(0, 9, 1, ACCEPT, True, 0)])  # never produced
    ledger.producer_finished()
    assert ledger.outcome_of(0, 0) == (LiveOutcome.ACCEPTED, 1)
    assert ledger.outcome_of(0, 1) == (LiveOutcome.KILLED_AT_LIMIT, 3)
    assert ledger.held == [(0, 1, 3)]
    assert ledger.problems == ["partition 0 offset 9: delivered 1 times but never acknowledged to the producer"]


# -- the data directory --------------------------------------------------------------------------------------


def test_the_data_directory_is_wiped_only_when_the_demo_made_it(tmp_path):
    data = tmp_path / "data"
    assert prepare_serve_data_dir(str(data), keep=False) == "new"
    for sub in ("topics", "share-state", "groups"):
        (data / sub).mkdir()
        (data / sub / "x").write_text("old")
    (data / "meta.properties").write_text("cluster.id=old\n")
    (data / "notes.txt").write_text("someone's")
    assert prepare_serve_data_dir(str(data), keep=False) == "fresh"
    assert sorted(os.listdir(data)) == [DATA_DIR_MARKER, "notes.txt"]
    other = tmp_path / "other"
    (other / "topics").mkdir(parents=True)
    with pytest.raises(DemoError, match="not empty and was not created by the demo"):
        prepare_serve_data_dir(str(other), keep=False)
    assert os.listdir(other) == ["topics"]


# -- a real run ------------------------------------------------------------------------------------------------


def test_a_small_live_run_ends_every_record_as_its_acknowledgements_imply(tmp_path):
    pytest.importorskip("confluent_kafka")
    from sharegroup.demo.live.demo import run_live_demo

    lines: list[str] = []
    rates = LiveRates(flaky=0.05, malformed=0.02, poison=0.01)
    summary = run_live_demo(data_dir=tmp_path / "data", partitions=3, consumers=2, records=2_000, duration_s=60,
                            delivery_count_limit=3, rates=rates, kill_at_batch=1, audit=True, audit_engine="python",
                            audit_out_dir=tmp_path / "audit", print_fn=lines.append, progress=False)
    ledger = summary.ledger
    assert ledger.problems == [] and summary.consumer_errors == [] and summary.durable_state_problems == []
    kinds = ledger.kinds
    assert ledger.produced_count == 2_000 and sum(summary.log_end_offsets.values()) == 2_000
    out = ledger.outcomes
    assert out[LiveOutcome.IN_FLIGHT] == 0
    assert out[LiveOutcome.ACCEPTED] == kinds[RecordKind.NORMAL] + kinds[RecordKind.FLAKY]
    assert out[LiveOutcome.REJECTED] == kinds[RecordKind.MALFORMED]
    assert out[LiveOutcome.DELIVERY_LIMIT] + out[LiveOutcome.KILLED_AT_LIMIT] == kinds[RecordKind.POISON] > 0
    # the kill happened mid-batch, and every record it held came back (or was archived at the limit)
    assert summary.killed_consumer == 2 and summary.killed_acked >= 1 and summary.killed_held >= 1
    assert len(ledger.held) == summary.killed_held
    for partition, offset, count in ledger.held:
        outcome, top = ledger.outcome_of(partition, offset)
        assert top > count or (count == 3 and outcome == LiveOutcome.KILLED_AT_LIMIT), (partition, offset)
    assert ledger.redeliveries >= kinds[RecordKind.FLAKY] + 2 * kinds[RecordKind.POISON]
    assert summary.serve_exit_code == 0
    assert summary.audit is not None and summary.audit.ok
    assert summary.exit_code == 0
    assert any("every record accepted or archived" in line for line in lines)
