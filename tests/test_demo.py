"""The demo (`sharegroup demo`): small runs whose summary must add up, agree with the leaders and with
the durable state replayed from disk (for every record); the metrics endpoint, the data directory rules
and the audit wiring (the audit's own tests cover Spark)."""

from __future__ import annotations

import io
import socket
import sys
import types
import urllib.error
import urllib.request
import uuid

import pytest
from prometheus_client import CollectorRegistry

from persister import LocalPersister
from persister.state_log import segment_file_name
from sharegroup.demo.checks import check_durable_state
from sharegroup.demo.data_dir import DATA_DIR_MARKER
from sharegroup.demo.errors import DemoError
from sharegroup.demo.simulated.demo import RECORDS_PER_CHECKPOINT, ConsumerBehaviour, Outcome, run_demo
from sharegroup.metrics import SharePartitionMetrics, metrics_for, serve_metrics
from sharegroup.types import AcknowledgementBatch, AcquiredRecords, RecordState, StateBatch

from .conftest import run

# Rates high enough that a few thousand records see every path: poison, malformed, crashes.
BUSY = ConsumerBehaviour(release_rate=0.05, malformed_rate=0.01, poison_rate=0.01, poison_crash_rate=0.2,
                         crash_rate=0.01)


def demo(tmp_path, **kw):
    kw.setdefault("data_dir", tmp_path / "data")
    kw.setdefault("records", 3_000)
    kw.setdefault("audit", False)
    kw.setdefault("fsync", False)
    kw.setdefault("behaviour", BUSY)
    kw.setdefault("print_fn", lambda line: None)
    kw.setdefault("progress", False)
    return run(run_demo(**kw))


@pytest.fixture
def counted_wall_clock(monkeypatch):
    """The run's wall clock made deterministic: every reading is 1 ms later than the one before, so a
    run cut short by its duration stops at the same point of the (seeded) simulation on any machine,
    however busy (a real 0.05 s could pass before anything was in flight, or just as all was done)."""
    import sharegroup.demo.simulated.run as demo_run

    readings = iter(range(10**9))
    monkeypatch.setattr(demo_run, "time", types.SimpleNamespace(monotonic=lambda: next(readings) / 1000))


def counts(summary):
    return {k: getattr(summary, k) for k in (
        "produced", "producer_batches", "poison_records", "malformed_records", "deliveries", "redeliveries",
        "accepted", "released", "rejected", "lock_expired", "released_on_leave", "archived_delivery_limit",
        "archived_lock_expiry", "crashes", "polls", "in_flight", "durable_writes", "simulated_seconds", "share_fetches",
        "share_fetches_held", "share_acknowledges")}


# -- a whole run ---------------------------------------------------------------------------------------------


def test_small_demo_adds_up_and_agrees_with_the_leaders(tmp_path):
    progress = io.StringIO()
    lines: list[str] = []
    s = demo(tmp_path, progress=progress, print_fn=lines.append)
    assert s.exit_code == 0 and s.audit is None and s.audit_error is None and not s.stopped_early
    # Every delivery ended one way; every record ended accepted or archived (or is still in flight).
    assert s.deliveries == s.accepted + s.released + s.rejected + s.lock_expired + s.released_on_leave
    assert s.produced == 3_000 == s.accepted + s.archived + s.in_flight and s.in_flight == 0
    assert s.redeliveries == s.deliveries - s.produced  # every record was delivered, once or more
    assert s.archived == s.rejected + s.archived_delivery_limit + s.archived_lock_expiry
    # The ledger of outcomes per record says the same.
    tally = {o: 0 for o in Outcome}
    for outcomes in s.outcomes.values():
        for o in outcomes:
            tally[Outcome(o)] += 1
    assert tally == {Outcome.IN_FLIGHT: 0, Outcome.ACCEPTED: s.accepted, Outcome.REJECTED: s.rejected,
                     Outcome.DELIVERY_LIMIT: s.archived_delivery_limit, Outcome.LOCK_EXPIRY: s.archived_lock_expiry}
    # The run saw every path.
    assert s.crashes > 0 and s.lock_expired > 0 and s.rejected == s.malformed_records > 0
    assert s.archived_delivery_limit > 0 and s.archived_lock_expiry > 0
    # Poison records never succeed: they are archived on their last allowed delivery.
    poison = [(p, o) for p, offsets in s.poison.items() for o in offsets]
    assert len(poison) == s.poison_records > 0
    assert all(s.outcomes[p][o] in (Outcome.DELIVERY_LIMIT, Outcome.LOCK_EXPIRY) for p, o in poison)
    assert s.archived_delivery_limit + s.archived_lock_expiry >= s.poison_records  # neighbours may get there too
    # Every leader finished: the start offset is at the log end, nothing in flight.
    for p, leader in s.leader_states.items():
        assert leader.start_offset == leader.log_end_offset and leader.state_batches == []
    assert sum(leader.log_end_offset for leader in s.leader_states.values()) == s.produced
    assert s.durable_state_problems == [] and s.durable_writes > 0
    # The consumers went through the broker's share sessions: no request refused, and fetches that found
    # nothing acquirable waited (long polling) instead of returning at once.
    assert s.fetch_errors == 0 and s.acknowledgement_errors == 0
    assert s.share_fetches > s.polls > s.share_acknowledges > 0 and s.share_fetches_held > 0
    text = "\n".join(lines)
    assert "Summary" in text and "lock expiry at limit" in text and "durable state" in text
    assert f"{s.share_fetches:,} ShareFetch ({s.share_fetches_held:,} long-polled)" in text
    assert "100%" in progress.getvalue() and "\r" not in progress.getvalue()  # not a terminal: plain lines


ARCHIVED_OUTCOMES = (Outcome.REJECTED, Outcome.DELIVERY_LIMIT, Outcome.LOCK_EXPIRY)


def record_state(start_offset, state_batches, offset):
    """One offset as a share-partition state says: "accepted" / "archived" for terminal runs, "done" below
    the start offset (terminal, which one is no longer recorded), else (delivery state, delivery count);
    an offset no run covers is AVAILABLE and never delivered."""
    if offset < start_offset:
        return "done"
    for first, last, state, count in state_batches:
        if first <= offset <= last:
            if state == RecordState.ACKNOWLEDGED:
                return "accepted"
            if state == RecordState.ARCHIVED:
                return "archived"
            return (state, count)
    return (RecordState.AVAILABLE, 0)


def lost_writes(summary, durable_states):
    """Every produced offset whose durable state disagrees with its leader or with the ledger: a
    record the leader completed must be complete durably (as accepted when the ledger says accepted, as
    archived when it was archived), and a record still in flight must have the leader's state and
    delivery count. Returns (disagreements, offsets checked)."""
    disagreements = []
    checked = 0
    for partition, leader in sorted(summary.leader_states.items()):
        durable = durable_states[partition]
        durable_start, durable_batches = (0, []) if durable is None else (durable.start_offset, durable.state_batches)
        outcomes = summary.outcomes[partition]
        assert len(outcomes) == leader.log_end_offset  # the ledger knows every produced record
        for offset in range(leader.log_end_offset):
            checked += 1
            held = record_state(leader.start_offset, leader.state_batches, offset)
            stored = record_state(durable_start, durable_batches, offset)
            outcome = outcomes[offset]
            if outcome == Outcome.IN_FLIGHT:
                ok = stored == held and isinstance(held, tuple)
            else:
                ok = held in ("done", "accepted", "archived") and (
                    stored == "done"
                    or (stored == "accepted" and outcome == Outcome.ACCEPTED)
                    or (stored == "archived" and outcome in ARCHIVED_OUTCOMES))
            if not ok:
                disagreements.append((partition, offset, Outcome(outcome).name, held, stored))
    return disagreements, checked


def durable_states_of(data_dir, summary):
    """Reopen the state log (the persister's own recovery: scan and replay) and read every partition."""
    async def read():
        persister = await LocalPersister.open(data_dir, fsync=False)
        try:
            return {p: persister.state_of(summary.group_id, summary.topic_id, p) for p in summary.leader_states}
        finally:
            await persister.close()

    return run(read())


@pytest.mark.parametrize("records, duration_s", [(2_000, 30.0), (50_000, 0.05)], ids=["complete", "cut-short"])
def test_no_acknowledged_write_is_lost(tmp_path, counted_wall_clock, records, duration_s):
    """Every record ever produced has, durably, what its leader acknowledged: complete runs end with
    every record durably done; runs cut short also keep the delivery counts of the records in flight."""
    s = demo(tmp_path, records=records, duration_s=duration_s, fsync=True)
    assert s.stopped_early == (duration_s < 1) and s.fsyncs > 0 and s.writes_per_fsync > 0
    disagreements, checked = lost_writes(s, durable_states_of(tmp_path / "data", s))
    assert disagreements == [] and checked == s.produced
    if s.stopped_early:  # the cut-short run really compares states and delivery counts in flight
        assert s.in_flight > 0
    else:
        assert s.in_flight == 0


def test_a_lost_write_is_noticed_offset_by_offset(tmp_path):
    s = demo(tmp_path, records=600, partitions=2)
    durable = durable_states_of(tmp_path / "data", s)
    assert lost_writes(s, durable) == ([], 600)
    # As if the last writes of partition 1 were lost: its durable start offset is 7 records back.
    start = durable[1].start_offset
    assert start == s.leader_states[1].log_end_offset
    durable[1] = durable[1]._replace(start_offset=start - 7, state_batches=[])
    disagreements, _checked = lost_writes(s, durable)
    assert [(p, o) for p, o, *_rest in disagreements] == [(1, o) for o in range(start - 7, start)]
    assert {d[4] for d in disagreements} == {(RecordState.AVAILABLE, 0)}
    # A record the ledger says was accepted, durably archived, is a disagreement too.
    offset = s.outcomes[0].index(Outcome.ACCEPTED)
    durable = durable_states_of(tmp_path / "data", s)
    durable[0] = durable[0]._replace(start_offset=offset,
                                     state_batches=[StateBatch(offset, s.leader_states[0].log_end_offset - 1,
                                                               RecordState.ARCHIVED, 1)])
    disagreements, _checked = lost_writes(s, durable)
    assert (0, offset, "ACCEPTED", "done", "archived") in disagreements


def test_the_same_seed_gives_the_same_run(tmp_path):
    first = demo(tmp_path, records=1_500, seed=7)
    again = demo(tmp_path, records=1_500, seed=7)
    other = demo(tmp_path, records=1_500, seed=8)
    assert counts(first) == counts(again)
    assert first.outcomes == again.outcomes and first.poison == again.poison
    assert counts(other) != counts(first)


def test_a_run_cut_short_by_its_duration_leaves_records_in_flight_but_adds_up(tmp_path, counted_wall_clock):
    s = demo(tmp_path, records=50_000, duration_s=0.05)
    assert s.stopped_early and s.produced < 50_000 and s.in_flight > 0
    assert s.produced == s.accepted + s.archived + s.in_flight
    assert s.deliveries == s.accepted + s.released + s.rejected + s.lock_expired + s.released_on_leave
    assert sum(bytes(o).count(Outcome.IN_FLIGHT) for o in s.outcomes.values()) == s.in_flight
    for leader in s.leader_states.values():  # the consumers left: nothing stays acquired
        assert all(b.delivery_state != 1 for b in leader.state_batches)
    assert s.durable_state_problems == [] and s.exit_code == 0
    assert run(check_durable_state(tmp_path / "data", s.group_id, s.topic_id, s.leader_states)) == []


def test_a_run_stopped_before_any_fetch_has_nothing_durable_and_that_is_fine(tmp_path):
    s = demo(tmp_path, records=50_000, duration_s=1e-9)  # stops as soon as the tasks first wait
    assert s.stopped_early and s.in_flight == s.produced > 0 and s.deliveries == 0
    assert not any(leader.loaded for leader in s.leader_states.values())
    assert s.durable_state_problems == [] and s.exit_code == 0
    assert lost_writes(s, durable_states_of(tmp_path / "data", s)) == ([], s.produced)


def test_one_consumer_one_partition(tmp_path):
    s = demo(tmp_path, records=500, partitions=1, consumers=1)
    assert s.produced == s.accepted + s.archived and s.in_flight == 0 and s.exit_code == 0


def test_the_durable_state_check_notices_a_difference(tmp_path):
    s = demo(tmp_path, records=300, behaviour=ConsumerBehaviour(poison_rate=0, crash_rate=0, malformed_rate=0.05))
    leaders = dict(s.leader_states)
    leader = leaders[0]
    leaders[0] = leader._replace(start_offset=leader.start_offset + 5)  # claims more than the log holds
    problems = run(check_durable_state(tmp_path / "data", s.group_id, s.topic_id, leaders))
    assert len(problems) == 1 and problems[0].startswith("partition 0")
    assert run(check_durable_state(tmp_path / "data", s.group_id, uuid.uuid4(), s.leader_states))  # no such key


# -- metrics ---------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def total(values: dict[str, float], name: str, **labels: str) -> float:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in values.items()
               if k.split("{")[0] == name and all(w in k for w in want))


def test_metrics_are_served_on_loopback_while_the_demo_runs(tmp_path):
    port = free_port()
    scraped: dict[str, float] = {}

    def print_fn(line: str) -> None:
        if line.startswith("metrics: "):
            assert line == f"metrics: http://127.0.0.1:{port}/metrics"
        if line == "Summary":  # still running: the endpoint is up and the counts are final
            scraped.update(scrape(f"http://127.0.0.1:{port}/metrics"))

    s = demo(tmp_path, metrics_port=port, print_fn=print_fn, fsync=True)
    assert s.metrics_url == f"http://127.0.0.1:{port}/metrics"
    assert total(scraped, "sharegroup_leader_acquired_records_total") == s.deliveries
    assert total(scraped, "sharegroup_leader_redelivered_records_total") == s.redeliveries
    assert total(scraped, "sharegroup_leader_acknowledged_records_total", type="accept") == s.accepted
    assert total(scraped, "sharegroup_leader_acknowledged_records_total", type="release") == s.released
    assert total(scraped, "sharegroup_leader_acknowledged_records_total", type="reject") == s.rejected
    assert total(scraped, "sharegroup_leader_lock_expired_records_total") == s.lock_expired
    assert total(scraped, "sharegroup_leader_archived_records_total", reason="rejected") == s.rejected
    assert total(scraped, "sharegroup_leader_archived_records_total", reason="delivery_limit") == \
        s.archived_delivery_limit
    assert total(scraped, "sharegroup_leader_archived_records_total", reason="lock_expiry") == s.archived_lock_expiry
    assert total(scraped, "sharegroup_leader_acquired_records_total", partition="0") > 0
    assert total(scraped, "sharegroup_leader_in_flight_records") == 0
    assert total(scraped, "sharegroup_persister_fsyncs_total") == s.fsyncs
    assert total(scraped, "sharegroup_persister_group_commit_records_count") == s.group_commits
    with pytest.raises(urllib.error.URLError):  # stopped with the demo
        urllib.request.urlopen(s.metrics_url, timeout=2)


def test_share_partition_metrics_count_by_type_and_reason():
    registry = CollectorRegistry()
    m = SharePartitionMetrics("g", "t", 3, registry=registry)
    assert metrics_for(registry) is metrics_for(registry)
    assert m.acquired([AcquiredRecords(0, 9, 1), AcquiredRecords(10, 11, 3)]) == 12
    assert m.acquired([]) == 0
    got = m.acknowledged([AcknowledgementBatch(0, 9, (1,)), AcknowledgementBatch(10, 12, (2, 3, 1))])
    assert got == {1: 11, 2: 1, 3: 1}
    m.lock_expired(4)
    m.archived("delivery_limit", 2)
    m.set_in_flight(7)
    labels = {"group": "g", "topic": "t", "partition": "3"}
    value = registry.get_sample_value
    assert value("sharegroup_leader_acquisitions_total", labels) == 1
    assert value("sharegroup_leader_acquired_records_total", labels) == 12
    assert value("sharegroup_leader_redelivered_records_total", labels) == 2
    assert value("sharegroup_leader_acknowledged_records_total", {**labels, "type": "accept"}) == 11
    assert value("sharegroup_leader_acknowledged_records_total", {**labels, "type": "reject"}) == 1
    assert value("sharegroup_leader_lock_expired_records_total", labels) == 4
    assert value("sharegroup_leader_archived_records_total", {**labels, "reason": "delivery_limit"}) == 2
    assert value("sharegroup_leader_archived_records_total", {**labels, "reason": "rejected"}) == 0
    assert value("sharegroup_leader_in_flight_records", labels) == 7
    with pytest.raises(KeyError):
        m.archived("boredom", 1)


def test_serve_metrics_binds_the_loopback_interface_only():
    registry = CollectorRegistry()
    SharePartitionMetrics("g", "t", 0, registry=registry).lock_expired(1)
    server = serve_metrics(0, registry)
    try:
        assert server.host == "127.0.0.1" and server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        assert total(scrape(server.url), "sharegroup_leader_lock_expired_records_total") == 1
    finally:
        server.close()
        server.close()  # idempotent
    with pytest.raises(ValueError):
        serve_metrics(70_000, registry)


def test_a_metrics_port_in_use_is_a_demo_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(DemoError, match="cannot serve metrics"):
            demo(tmp_path, metrics_port=sock.getsockname()[1])


# -- the data directory ---------------------------------------------------------------------------------------


def test_a_fresh_run_wipes_the_previous_demo_log_and_keep_adds_to_it(tmp_path):
    first = demo(tmp_path, records=300)
    data = tmp_path / "data"
    assert (data / DATA_DIR_MARKER).exists()
    (data / "notes.txt").write_text("mine")
    kept = demo(tmp_path, records=300, keep=True)
    both = run(check_durable_state(data, first.group_id, first.topic_id, first.leader_states))
    assert both == [] and kept.exit_code == 0  # the first run's state is still there
    fresh = demo(tmp_path, records=300)
    assert fresh.exit_code == 0
    assert run(check_durable_state(data, first.group_id, first.topic_id, first.leader_states))  # wiped
    assert (data / "notes.txt").read_text() == "mine"  # only the state log's files are deleted


def test_a_state_log_open_elsewhere_is_not_wiped(tmp_path):
    first = demo(tmp_path, records=300)
    data = tmp_path / "data"

    async def try_while_open():
        persister = await LocalPersister.open(data, fsync=False)  # holds the directory lock
        try:
            with pytest.raises(DemoError, match="open in another process"):
                await run_demo(data_dir=data, records=100, audit=False, fsync=False, print_fn=lambda line: None,
                               progress=False)
        finally:
            await persister.close()

    run(try_while_open())
    assert run(check_durable_state(data, first.group_id, first.topic_id, first.leader_states)) == []  # intact
    assert demo(tmp_path, records=100).exit_code == 0  # closed: wiped and written afresh


def test_a_state_log_the_demo_did_not_write_is_never_wiped(tmp_path):
    data = tmp_path / "theirs"
    data.mkdir()
    segment = data / segment_file_name(0)
    segment.write_bytes(b"")
    with pytest.raises(DemoError, match="did not create"):
        demo(tmp_path, data_dir=data)
    assert segment.exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(DemoError, match="not a directory"):
        demo(tmp_path, data_dir=tmp_path / "file")
    busy = tmp_path / "project"
    busy.mkdir()
    (busy / "README").write_text("x")
    with pytest.raises(DemoError, match="not empty"):
        demo(tmp_path, data_dir=busy)
    assert sorted(p.name for p in busy.iterdir()) == ["README"]
    assert demo(tmp_path, data_dir=busy, records=100, keep=True).exit_code == 0  # asked for explicitly


# -- the audit's wiring (no Spark here) ------------------------------------------------------------------------


class FakeResult:
    def __init__(self, ok: bool) -> None:
        self.ok = ok
        self.violations = [] if ok else ["one"]
        self.records = self.keys = 1


def fake_audit_module(run_audit=None, main=None) -> types.ModuleType:
    """A stand-in for `sharegroup.audit` with its public names, so that the wiring is tested without
    Spark and whatever state the audit package is in."""
    module = types.ModuleType("sharegroup.audit")

    class AuditEnvironmentError(Exception):
        pass

    module.AuditEnvironmentError = AuditEnvironmentError
    module.run_audit = run_audit or (lambda *a, **k: FakeResult(ok=True))
    module.main = main or (lambda argv: 0)
    return module


def test_the_audit_runs_on_the_log_just_written_and_decides_the_exit_code(tmp_path, monkeypatch):
    calls = []

    def fake_run_audit(log_dir, *, master="local[2]", out_dir=None, spark=None, print_fn=print,
                       delivery_count_limit=10, snapshot_update_records_per_snapshot=500):
        calls.append((str(log_dir), master, delivery_count_limit, snapshot_update_records_per_snapshot))
        return FakeResult(ok=len(calls) == 1)

    monkeypatch.setitem(sys.modules, "sharegroup.audit", fake_audit_module(fake_run_audit))
    s = demo(tmp_path, records=200, audit=True, master="local[1]")
    # The audit checks the log against the settings it was written with.
    assert s.exit_code == 0 and calls == [(str(tmp_path / "data"), "local[1]", 5, RECORDS_PER_CHECKPOINT)]
    s = demo(tmp_path, records=200, audit=True)
    assert s.exit_code == 1


def test_an_audit_that_cannot_run_exits_2_with_a_message(tmp_path, monkeypatch):
    audit = fake_audit_module()

    def no_java(*args, **kwargs):
        raise audit.AuditEnvironmentError("no Java runtime: install openjdk-17-jre-headless")

    audit.run_audit = no_java
    monkeypatch.setitem(sys.modules, "sharegroup.audit", audit)
    lines: list[str] = []
    s = demo(tmp_path, records=200, audit=True, print_fn=lines.append)
    assert s.exit_code == 2 and "openjdk" in s.audit_error and any("openjdk" in line for line in lines)
    monkeypatch.setitem(sys.modules, "sharegroup.audit", None)  # as if it could not be imported
    lines.clear()
    s = demo(tmp_path, records=200, audit=True, print_fn=lines.append)
    assert s.exit_code == 2 and "pip install pyspark" in s.audit_error


def test_demo_with_the_spark_audit(tmp_path, request):
    try:
        spark = request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no shared `spark` fixture: the audit's tests own the Spark session")
    s = demo(tmp_path, records=1_000, audit=True, spark=spark, audit_out_dir=tmp_path / "audit-out")
    assert s.audit is not None and s.audit.ok and s.exit_code == 0
    assert s.audit.records == s.durable_writes
