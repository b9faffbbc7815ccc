"""The audit's rules through the single-process replay (no Spark, no Java): every fault-injection log
is reported with the right key, log offset and rule; valid histories pass; the replayed state equals the
coordinator's own recovery; the outputs and the command line (python engine, exit codes). The same logs
go through Spark in tests/test_audit_spark.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persister import ShareCheckpoint, ShareCoordinator, ShareDelta
from sharegroup.audit import AuditEnvironmentError, AuditOptions, FinalState, Rule, main, replay_log, run_audit
from sharegroup.audit.rules import KeyAuditor
from sharegroup.audit.synthetic import write_synthetic_log
from sharegroup.clock import ManualClock
from sharegroup.types import StateBatch

from .audit_logs import (
    FAULT_N,
    FAULT_OPTIONS,
    FAULTS,
    K1,
    K2,
    HandLog,
    base_records,
    final_states_by_coordinator,
    found,
    hand_log_from,
    write_history,
)
from .conftest import run
from .test_persister_coordinator import random_workload

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_OPTIONS = AuditOptions(**FAULT_OPTIONS)


def assert_equals_recovery(result, log_dir: str, n: int) -> None:
    """The audit's replayed final states, and everything replay derives per key, equal a
    ShareCoordinator's recovery of the same log."""
    states, dump = final_states_by_coordinator(log_dir, n)
    assert result.final_states == states
    assert {key: kr.replay for key, kr in result.key_results.items() if kr.replay is not None} == dump


# -- fault injection -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_each_fault_is_reported_with_key_offset_and_rule(fault, tmp_path):
    log_dir = str(tmp_path / "log")
    expected = fault.build(log_dir)
    result = replay_log(log_dir, PYTHON_OPTIONS)
    assert found(result) == expected
    assert not result.ok
    for violation in result.violations:
        assert violation.detail


def test_the_clean_base_log_passes_and_equals_recovery(tmp_path):
    log_dir = hand_log_from(list(base_records())).write(str(tmp_path / "log"))
    result = replay_log(log_dir, PYTHON_OPTIONS)
    assert result.ok and result.violations == []
    assert (result.records, result.keys) == (len(base_records()), 2)
    assert result.checkpoints + result.deltas + result.tombstones == result.records
    assert_equals_recovery(result, log_dir, FAULT_N)


def test_a_torn_tail_of_the_last_segment_is_tolerated_like_recovery(tmp_path):
    log = hand_log_from(list(base_records()))
    base, frames = log.segments[-1]
    frames[-1] = frames[-1][:-7]  # a crash in the middle of the last append
    log_dir = log.write(str(tmp_path / "log"))
    result = replay_log(log_dir, PYTHON_OPTIONS)
    assert result.ok
    path, byte_pos, nbytes = result.torn_tail
    assert path.endswith(f"{base:020d}.log") and nbytes == len(frames[-1])
    assert result.records == len(base_records()) - 1
    assert_equals_recovery(result, log_dir, FAULT_N)  # recovery truncates the same frame


def test_a_bit_flip_in_the_last_record_reads_as_a_torn_tail_as_in_recovery(tmp_path):
    log = hand_log_from(list(base_records()))
    frame = bytearray(log.segments[-1][1][-1])
    frame[-1] ^= 1
    log.segments[-1][1][-1] = bytes(frame)
    log_dir = log.write(str(tmp_path / "log"))
    result = replay_log(log_dir, PYTHON_OPTIONS)
    assert result.ok and result.torn_tail is not None
    assert_equals_recovery(result, log_dir, FAULT_N)


def test_a_pruned_log_starts_at_its_log_start_offset(tmp_path):
    """Records below the stored log start offset are gone (even inside the first live segment), whole
    segments below it are ignored, and a key may start with a delta whose checkpoint was pruned."""
    records = list(base_records())
    log = HandLog(base_offset=40)
    log.append(K1, ShareDelta(99, 0, 0, 0, ()))  # in a segment wholly below the start: never read
    log.append(K1, None)
    log.roll()
    first_live = log.next_offset
    log.append(K2, ShareDelta(7, 0, 0, 0, ()))  # below the start inside the first live segment
    log.start_offset = log.next_offset
    later = [(k, r) for k, r in records if not (k == K1 and type(r) is ShareCheckpoint and r.checkpoint_epoch == 0)]
    first_delta = next(i for i, (k, r) in enumerate(later) if k == K1 and type(r) is ShareDelta)
    later = later[first_delta:]  # K1 starts with a delta: its first checkpoint was pruned
    for key, record in later:
        log.append(key, record)
    log_dir = log.write(str(tmp_path / "log"))
    result = replay_log(log_dir, PYTHON_OPTIONS)
    assert result.violations == []
    assert result.log_start_offset == first_live + 1
    assert result.segments == 1 and result.records == len(later)
    assert result.key_results[K1].first_offset == first_live + 1
    assert_equals_recovery(result, log_dir, FAULT_N)


def test_a_corrupt_frame_in_a_segment_below_the_log_start_is_not_a_violation(tmp_path):
    log = HandLog(base_offset=0)
    log.segments[0][1].append(b"\x00\x00\x00\x09garbage-garbage")
    log.next_offset += 1
    log.roll()
    for key, record in base_records():
        log.append(key, record)
    log.start_offset = 1
    log_dir = log.write(str(tmp_path / "log"))
    assert replay_log(log_dir, PYTHON_OPTIONS).ok


# -- valid histories: no violation, and the replay equals recovery ---------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["leader", "share-partition"]))
def test_valid_histories_pass_and_the_replay_equals_recovery(tmp_path_factory, seed, kind):
    log_dir = str(tmp_path_factory.mktemp("history") / "log")
    if kind == "leader":
        write_history(kind, log_dir, seed, steps=150)
        options = AuditOptions(delivery_count_limit=5, snapshot_update_records_per_snapshot=3)
    else:
        write_history(kind, log_dir, seed, rounds=100)
        options = AuditOptions(delivery_count_limit=4, snapshot_update_records_per_snapshot=5)
    result = replay_log(log_dir, options)
    assert result.violations == []
    assert_equals_recovery(result, log_dir, options.snapshot_update_records_per_snapshot)


@pytest.mark.parametrize("seed", range(8))
def test_arbitrary_coordinator_workloads_keep_every_coordinator_rule_and_replay_equal(seed, tmp_path):
    """Any sequence of requests the coordinator accepts (its own random workload: arbitrary batches,
    re-initializations, deletions, idle checkpoints, pruning) keeps every rule the coordinator is
    responsible for; only the leader-side rule (terminal offsets) can be broken by arbitrary batches."""
    log_dir = str(tmp_path / "log")

    async def workload() -> int:
        rng = random.Random(seed)
        clock = ManualClock(0)
        n = rng.choice([0, 1, 2, 5, 500])
        coord = await ShareCoordinator.open(
            log_dir, snapshot_update_records_per_snapshot=n, cold_checkpoint_interval_ms=250_000, clock=clock,
            fsync=False, segment_bytes=1024,
        )
        await random_workload(coord, rng, 300, clock)
        await coord.prune()
        await coord.close()
        return n

    n = run(workload())
    result = replay_log(log_dir, AuditOptions(snapshot_update_records_per_snapshot=n))
    assert {v.rule for v in result.violations} <= {Rule.TERMINAL}
    assert_equals_recovery(result, log_dir, n)


def test_a_synthetic_benchmark_log_is_valid_and_equals_recovery(tmp_path):
    log_dir = str(tmp_path / "log")
    segments = write_synthetic_log(log_dir, 5_000, keys=40, records_per_snapshot=20, segment_bytes=32 * 1024)
    assert segments > 3
    result = replay_log(log_dir, AuditOptions(5, 20))
    assert result.ok and result.records == 5_000 and result.keys == 40
    assert_equals_recovery(result, log_dir, 20)


def test_reinitialization_may_move_the_start_offset_back_and_reset_the_leader_epoch(tmp_path):
    log_dir = str(tmp_path / "log")

    async def history():
        coord = await ShareCoordinator.open(log_dir, snapshot_update_records_per_snapshot=2, fsync=False)
        await coord.initialize_state(*K1, state_epoch=0, start_offset=50)
        await coord.read_state(*K1, leader_epoch=4)
        await coord.write_state(*K1, state_epoch=0, leader_epoch=4, start_offset=60,
                                state_batches=[StateBatch(60, 65, 2, 1)])
        await coord.initialize_state(*K1, state_epoch=1, start_offset=10)  # alter offsets: back to 10
        await coord.write_state(*K1, state_epoch=1, leader_epoch=4, start_offset=10,
                                state_batches=[StateBatch(10, 12, 0, 1)])
        await coord.delete_state(*K1)
        await coord.initialize_state(*K1, state_epoch=0, start_offset=0)  # a new life: epochs from 0
        await coord.close()

    run(history())
    result = replay_log(log_dir)
    assert result.violations == []
    assert result.final_states[K1] == FinalState(0, 0, 0, 0, 0, ())
    assert_equals_recovery(result, log_dir, 2)


# -- the per-key rules, directly -----------------------------------------------------------------------


def checkpoint(offset, epoch=0, *, se=0, le=0, start=0, batches=(), create=5, write=5):
    return (offset, ShareCheckpoint(epoch, se, le, start, 0, create, write, tuple(StateBatch(*b) for b in batches)))


def delta(offset, epoch=0, *, le=0, start=0, batches=()):
    return (offset, ShareDelta(epoch, le, start, 0, tuple(StateBatch(*b) for b in batches)))


def rules_of(rows, options=AuditOptions(), log_start_offset=0):
    auditor = KeyAuditor(K1, options, log_start_offset)
    result = auditor.apply_all(rows)
    return [(offset, rule) for offset, rule, _detail in result.violations]


def test_a_delivery_count_at_the_limit_passes_and_one_above_does_not():
    options = AuditOptions(delivery_count_limit=3)
    assert rules_of([checkpoint(0), delta(1, batches=[(0, 0, 4, 3)])], options) == []
    assert rules_of([checkpoint(0), delta(1, batches=[(0, 0, 4, 4)])], options) == [(1, Rule.DELIVERY_COUNT)]


def test_too_many_deltas_is_reported_once_per_run_and_n_zero_forbids_deltas():
    rows = [checkpoint(0)] + [delta(i) for i in range(1, 6)] + [checkpoint(6, 1), delta(7, 1)]
    found_two = rules_of(rows, AuditOptions(snapshot_update_records_per_snapshot=2))
    assert found_two == [(3, Rule.DELTAS_BETWEEN_CHECKPOINTS)]
    assert rules_of(rows, AuditOptions(snapshot_update_records_per_snapshot=0)) == [
        (1, Rule.DELTAS_BETWEEN_CHECKPOINTS),
        (7, Rule.DELTAS_BETWEEN_CHECKPOINTS),
    ]


def test_a_lower_count_on_a_terminal_offset_loses_to_it_and_is_no_violation():
    rows = [checkpoint(0, batches=[(0, 4, 2, 2)]), delta(1, batches=[(2, 2, 0, 1), (3, 3, 0, 2)])]
    assert rules_of(rows) == []  # the combiner keeps the acknowledged state (higher count or state)
    rows.append(delta(2, batches=[(4, 4, 0, 3)]))
    assert rules_of(rows) == [(2, Rule.TERMINAL)]


def test_a_checkpoint_that_resurrects_a_terminal_offset_is_a_violation_unless_it_reinitializes():
    base = [checkpoint(0, batches=[(0, 4, 2, 1)])]
    assert rules_of(base + [checkpoint(1, 1, batches=[(0, 4, 0, 2)])]) == [(1, Rule.TERMINAL)]
    assert rules_of(base + [checkpoint(1, 1, start=0, batches=[], create=9, write=9)]) == []


def test_acquired_runs_are_accepted_and_combined_by_count_then_state():
    """Every record state, ACQUIRED (1) included, is a valid delivery state, as in the coordinator."""
    rows = [
        checkpoint(0, batches=[(0, 9, 1, 1)]),
        delta(1, batches=[(0, 2, 0, 1), (5, 14, 1, 2)]),
        delta(2, batches=[(3, 4, 2, 1)]),
    ]
    auditor = KeyAuditor(K1, AuditOptions(), 0)
    result = auditor.apply_all(rows)
    assert result.violations == []
    assert result.final.state_batches == (
        StateBatch(0, 2, 1, 1),
        StateBatch(3, 4, 2, 1),
        StateBatch(5, 14, 1, 2),
    )
    assert rules_of(rows + [delta(3, batches=[(0, 0, 5, 1)])]) == [(3, Rule.BATCHES)]  # 5 is no state


def test_archiving_is_a_state_that_only_becomes_archived():
    """ARCHIVING (3, KIP-1191) awaits its dead-letter write: ARCHIVED may follow, AVAILABLE or ACQUIRED may not,
    and an ARCHIVED offset never goes back to ARCHIVING."""
    rows = [checkpoint(0, batches=[(0, 4, 0, 1)]), delta(1, batches=[(0, 1, 3, 1)]), delta(2, batches=[(0, 0, 4, 1)])]
    assert rules_of(rows) == []
    assert rules_of(rows + [delta(3, batches=[(1, 1, 0, 2)])]) == [(3, Rule.TERMINAL)]
    assert rules_of(rows + [delta(3, batches=[(0, 0, 3, 2)])]) == [(3, Rule.TERMINAL)]


def test_a_terminal_offset_acquired_again_is_a_violation():
    rows = [checkpoint(0, batches=[(0, 4, 2, 1)]), delta(1, batches=[(2, 2, 1, 2)])]
    assert rules_of(rows) == [(1, Rule.TERMINAL)]


def test_a_tombstone_starts_a_new_life_and_a_delta_after_it_is_a_violation():
    rows = [checkpoint(0, 3, se=2, le=5, start=100), (1, None), checkpoint(2, 0, se=0, le=0, start=0)]
    assert rules_of(rows) == []
    assert rules_of(rows[:2] + [delta(2, 3)]) == [(2, Rule.DELTA_EPOCH)]


def test_the_audit_uses_only_public_names_of_persister():
    """The audit shares the persister's replay and recovery rules through public functions; it never
    reaches for a private name (nor keeps a copy of the rules)."""
    import ast

    audit_dir = os.path.join(REPO_ROOT, "sharegroup", "audit")
    for name in sorted(os.listdir(audit_dir)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(audit_dir, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("persister"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, (name, node.module, private)
                assert not any(part.startswith("_") for part in node.module.split(".")), (name, node.module)


def test_rows_must_come_in_log_order():
    with pytest.raises(AssertionError):
        rules_of([checkpoint(5), delta(3)])


def test_options_are_validated():
    bad_options = (
        dict(delivery_count_limit=0),
        dict(snapshot_update_records_per_snapshot=501),
        dict(delivery_count_limit=True),
    )
    for bad in bad_options:
        with pytest.raises(ValueError):
            AuditOptions(**bad)


# -- outputs and the command line (python engine) ---------------------------------------------------


def test_run_audit_writes_the_report_and_the_picture_and_prints_the_summary(tmp_path):
    log_dir = write_history("share-partition", str(tmp_path / "log"), 5, rounds=120)
    printed = []
    result = run_audit(log_dir, engine="python", out_dir=tmp_path / "out", print_fn=printed.append)
    assert result.ok
    summary = "\n".join(printed)
    for word in ("records", "checkpoints", "deltas", "tombstones", "violations", "time", "verdict: OK"):
        assert word in summary
    with open(result.report_path) as f:
        report = json.load(f)
    assert report["ok"] is True and report["records"] == result.records and report["violations"] == []
    assert len(report["final_states"]) == len(result.final_states)
    with open(result.picture_path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_report_lists_violations_with_key_offset_and_rule(tmp_path):
    log_dir = str(tmp_path / "log")
    (expected,) = FAULTS[1].build(log_dir)  # a stale delta epoch
    printed = []
    result = run_audit(log_dir, engine="python", out_dir=tmp_path / "out", print_fn=printed.append, **FAULT_OPTIONS)
    with open(result.report_path) as f:
        report = json.load(f)
    (violation,) = report["violations"]
    key, offset, rule = expected
    assert violation["key"] == {"group_id": key.group_id, "topic_id": str(key.topic_id), "partition": key.partition}
    assert (violation["log_offset"], violation["rule"]) == (offset, rule)
    assert report["violations_by_rule"] == {str(rule): 1}
    assert "verdict: FAILED" in "\n".join(printed)


def test_cli_exit_codes_with_the_python_engine(tmp_path, capsys):
    clean = hand_log_from(list(base_records())).write(str(tmp_path / "clean"))
    bad = str(tmp_path / "bad")
    FAULTS[0].build(bad)
    out = str(tmp_path / "out")
    limits = ["--delivery-count-limit", "5", "--snapshot-update-records-per-snapshot", "3"]
    assert main([clean, "--engine", "python", "--out", out, *limits]) == 0
    assert main([bad, "--engine", "python", "--out", out, *limits]) == 1
    assert main([str(tmp_path / "missing"), "--engine", "python", "--out", out]) == 2
    assert "no such state log directory" in capsys.readouterr().err
    os.makedirs(tmp_path / "empty")
    assert main([str(tmp_path / "empty"), "--engine", "python", "--out", out]) == 2
    assert "no state log segments" in capsys.readouterr().err
    assert main([clean, "--engine", "python", "--delivery-count-limit", "0"]) == 2
    assert main([clean, "--engine", "fortran"]) == 2
    assert main([clean, "--conf", "spark.executor.memory"]) == 2  # not KEY=VALUE
    assert main(["--help"]) == 0
    assert "deltas-between-checkpoints" in capsys.readouterr().out


def test_without_java_the_spark_audit_exits_2_and_says_what_to_install(tmp_path):
    log_dir = hand_log_from(list(base_records())).write(str(tmp_path / "log"))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "no-java-here")
    done = subprocess.run(
        [sys.executable, "-m", "sharegroup.audit", log_dir, "--out", str(tmp_path / "out")],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "install Java 17 (apt-get install openjdk-17-jre-headless)" in done.stderr


def test_run_audit_raises_environment_errors(tmp_path):
    with pytest.raises(AuditEnvironmentError, match="no such state log directory"):
        run_audit(tmp_path / "missing", engine="python")
    with pytest.raises(AuditEnvironmentError, match="local directories only"):
        run_audit("hdfs://namenode/state-log", engine="python")
    with pytest.raises(ValueError):
        run_audit(tmp_path, engine="python", delivery_count_limit=-1)


def test_importing_the_audit_does_not_import_pyspark_or_matplotlib():
    code = (
        "import sys, sharegroup, persister, sharegroup.audit; "
        "print(sorted(m for m in ('pyspark', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_code_shipped_to_executors_imports_from_the_zip_alone(tmp_path):
    from sharegroup.audit.spark_job import _code_zip

    path = _code_zip()
    names = zipfile.ZipFile(path).namelist()
    assert "sharegroup/audit/tasks.py" in names and "persister/state_records.py" in names
    assert not any("__pycache__" in n or n.endswith(".so") for n in names)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import sharegroup.audit.tasks as t, persister.state_records as r; "
        "assert t.__file__.startswith(sys.argv[1]) and r.__file__.startswith(sys.argv[1]); print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, path], cwd=str(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_route_hash_is_stable_across_processes():
    from sharegroup.audit.tasks import partition_of

    key = ("grüppe", K1.topic_id.bytes, 3)
    code = f"from sharegroup.audit.tasks import partition_of; print(partition_of({key!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert int(done.stdout) == partition_of(key)
