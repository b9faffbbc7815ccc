"""The Spark audit end to end on the one shared Spark session (tests/conftest.py `spark`): a clean log
exits 0, each fault-injection log is reported by Spark with the key, log offset and rule (exit 1), and
on valid histories the Spark audit, the single-process replay and the coordinator's recovery agree.

Spark is slow to start (~7 s) and each audit on the warm session takes ~0.5 s, so the logs are small and
the hypothesis examples few; the exhaustive checks of the rules run without Spark in
tests/test_audit_replay.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharegroup.audit import AuditOptions, main, replay_log, run_audit
from sharegroup.audit.synthetic import write_synthetic_log

from .audit_logs import (
    FAULT_N,
    FAULT_OPTIONS,
    FAULTS,
    base_records,
    final_states_by_coordinator,
    found,
    hand_log_from,
    write_history,
)

LIMITS = [
    "--delivery-count-limit",
    str(FAULT_OPTIONS["delivery_count_limit"]),
    "--snapshot-update-records-per-snapshot",
    str(FAULT_OPTIONS["snapshot_update_records_per_snapshot"]),
]


def spark_audit(spark, log_dir, **options):
    return run_audit(log_dir, spark=spark, print_fn=None, write_outputs=False, **options)


def assert_engines_and_recovery_agree(result, log_dir, options: AuditOptions) -> None:
    python = replay_log(log_dir, options)
    assert result.violations == python.violations
    assert result.final_states == python.final_states
    assert {k: kr.replay for k, kr in result.key_results.items()} == {
        k: kr.replay for k, kr in python.key_results.items()
    }
    assert (result.records, result.keys, result.checkpoints, result.deltas, result.tombstones) == (
        python.records, python.keys, python.checkpoints, python.deltas, python.tombstones)
    states, dump = final_states_by_coordinator(log_dir, options.snapshot_update_records_per_snapshot)
    assert result.final_states == states
    assert {k: kr.replay for k, kr in result.key_results.items() if kr.replay is not None} == dump


def test_a_clean_log_from_share_partitions_exits_0_with_report_and_picture(spark, tmp_path, capsys):
    log_dir = write_history("share-partition", str(tmp_path / "log"), 11, partitions=4, rounds=200)
    out = tmp_path / "out"
    limits = ["--delivery-count-limit", "4", "--snapshot-update-records-per-snapshot", "5"]
    code = main([log_dir, "--out", str(out), *limits])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verdict: OK" in printed and "spark, master local[2]" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] and report["engine"] == "spark" and report["records"] > 0
    assert (out / "audit.png").read_bytes()[:4] == b"\x89PNG"
    result = spark_audit(spark, log_dir, delivery_count_limit=4, snapshot_update_records_per_snapshot=5)
    assert_engines_and_recovery_agree(result, log_dir, AuditOptions(4, 5))


@pytest.mark.parametrize("fault", [f for f in FAULTS if f.required], ids=lambda f: f.name)
def test_each_required_fault_exits_1_and_is_reported_with_key_offset_and_rule(spark, fault, tmp_path, capsys):
    log_dir = str(tmp_path / "log")
    expected = fault.build(log_dir)
    out = tmp_path / "out"
    assert main([log_dir, "--out", str(out), *LIMITS]) == 1
    assert "verdict: FAILED" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    reported = [
        (v["key"] and (v["key"]["group_id"], v["key"]["topic_id"], v["key"]["partition"]), v["log_offset"], v["rule"])
        for v in report["violations"]
    ]
    assert reported == [
        (key and (key.group_id, str(key.topic_id), key.partition), offset, str(rule)) for key, offset, rule in expected
    ]


@pytest.mark.parametrize("fault", [f for f in FAULTS if not f.required], ids=lambda f: f.name)
def test_every_other_fault_is_reported_by_spark_as_by_the_replay(spark, fault, tmp_path):
    log_dir = str(tmp_path / "log")
    expected = fault.build(log_dir)
    result = spark_audit(spark, log_dir, **FAULT_OPTIONS)
    assert found(result) == expected
    assert result.violations == replay_log(log_dir, AuditOptions(**FAULT_OPTIONS)).violations


def test_a_torn_tail_is_tolerated_by_spark_too(spark, tmp_path):
    log = hand_log_from(list(base_records()))
    log.segments[-1][1][-1] = log.segments[-1][1][-1][:-3]
    log_dir = log.write(str(tmp_path / "log"))
    result = spark_audit(spark, log_dir, **FAULT_OPTIONS)
    assert result.ok and result.torn_tail is not None
    assert_engines_and_recovery_agree(result, log_dir, AuditOptions(**FAULT_OPTIONS))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["leader", "share-partition"]))
def test_on_random_valid_histories_spark_replay_and_recovery_agree(spark, tmp_path_factory, seed, kind):
    log_dir = str(tmp_path_factory.mktemp("history") / "log")
    if kind == "leader":
        write_history(kind, log_dir, seed, steps=200)
        options = AuditOptions(delivery_count_limit=5, snapshot_update_records_per_snapshot=3)
    else:
        write_history(kind, log_dir, seed, rounds=150)
        options = AuditOptions(delivery_count_limit=4, snapshot_update_records_per_snapshot=5)
    result = spark_audit(
        spark, log_dir, delivery_count_limit=options.delivery_count_limit,
        snapshot_update_records_per_snapshot=options.snapshot_update_records_per_snapshot,
    )
    assert result.violations == []
    assert_engines_and_recovery_agree(result, log_dir, options)


def test_many_input_partitions_split_keys_across_map_tasks(spark, tmp_path):
    """Small input splits: every map task sees a few segment files, so each key's frames arrive in chunks
    from several tasks and are merged in log order by the reduce side."""
    log_dir = str(tmp_path / "log")
    write_synthetic_log(log_dir, 6_000, keys=30, records_per_snapshot=20, segment_bytes=16 * 1024)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "32768")
    spark.conf.set("spark.sql.files.openCostInBytes", "1024")
    try:
        files = spark.read.format("binaryFile").load(log_dir)
        assert files.rdd.getNumPartitions() > 4
        result = spark_audit(spark, log_dir, delivery_count_limit=5, snapshot_update_records_per_snapshot=20)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert result.ok and result.records == 6_000 and result.segments > 10
    assert_engines_and_recovery_agree(result, log_dir, AuditOptions(5, 20))


def test_a_missing_directory_is_an_environment_error_on_spark(spark, tmp_path, capsys):
    assert main([str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "no such state log directory" in capsys.readouterr().err


def test_the_clean_base_log_on_spark(spark, tmp_path):
    log_dir = hand_log_from(list(base_records())).write(str(tmp_path / "log"))
    result = spark_audit(spark, log_dir, **FAULT_OPTIONS)
    assert result.ok and result.records == len(base_records())
    assert_engines_and_recovery_agree(result, log_dir, AuditOptions(**FAULT_OPTIONS))
    assert result.master == "local[2]" and result.engine == "spark" and FAULT_N == 3


def test_outputs_name_the_state_log_as_the_user_gave_it(spark, tmp_path, monkeypatch):
    """Spark reads an absolute path, but the summary, the report and the picture's title name the state
    log as the user gave it: an output never carries a path of the machine it was made on."""
    write_history("share-partition", str(tmp_path / "log"), 5, rounds=20)
    monkeypatch.chdir(tmp_path)
    printed = []
    result = run_audit("log", spark=spark, out_dir="out", print_fn=printed.append)
    assert result.ok and result.log_dir == "log"
    with open(result.report_path) as f:
        assert str(tmp_path) not in f.read()
    assert not any(str(tmp_path) in line for line in printed if not line.startswith("report:"))
