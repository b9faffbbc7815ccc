"""Audit throughput: the Spark job (local[2]) vs the single-process Python replay, on the same log in
the same run.

    .venv/bin/python -m pytest bench/bench_audit.py --benchmark-enable -q -s

The log is a generated valid state log (sharegroup.audit.synthetic: frames written straight into 8 MiB
segments; 1,000 busy share-partitions, a checkpoint every 101st record of a key), 1M records by default
(SHAREGROUP_BENCH_AUDIT_RECORDS=200000 for a quicker run). Both engines run the same code per record
(the framing and CRC check, decode_record, the KeyAuditor replay with persister.combine); Spark adds
parallelism over 2 cores and the cost of its shuffle. Reported: the Spark session start-up, the first
Spark audit on the fresh session (JVM class loading and Python worker start-up included), then
SHAREGROUP_BENCH_AUDIT_ROUNDS (default 3) alternating rounds of the Python replay and of the Spark audit
on the warm session: medians in records/s and their ratio. All audits must agree (violations, final
states) and find the log clean.

Seeded; about 2 minutes on 2 cores for 1M records. The machine is shared and noisy: compare ratios.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from sharegroup.audit import AuditEnvironmentError, AuditOptions, replay_log
from sharegroup.audit.synthetic import write_synthetic_log

# `make test` smoke-runs every benchmark once (SHAREGROUP_BENCH_SMOKE=1) on a small log.
SMOKE = os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1"
RECORDS = int(os.environ.get("SHAREGROUP_BENCH_AUDIT_RECORDS", "20000" if SMOKE else "1000000"))
ROUNDS = int(os.environ.get("SHAREGROUP_BENCH_AUDIT_ROUNDS", "1" if SMOKE else "3"))
KEYS = 1_000
RECORDS_PER_SNAPSHOT = 100
DELIVERY_COUNT_LIMIT = 5
SEGMENT_BYTES = 8 * 2**20


def _spark_session():
    from sharegroup.audit.spark_job import build_session

    try:
        return build_session("local[2]")
    except AuditEnvironmentError as exc:
        pytest.skip(f"the Spark audit benchmark needs Java: {exc}")


@pytest.mark.benchmark(group="audit")
def test_audit_throughput_spark_vs_single_process_python(benchmark, capsys, tmp_path):
    from sharegroup.audit.spark_job import run_spark_audit

    log_dir = str(tmp_path / "state-log")
    started = time.perf_counter()
    segments = write_synthetic_log(
        log_dir, RECORDS, keys=KEYS, records_per_snapshot=RECORDS_PER_SNAPSHOT,
        delivery_count_limit=DELIVERY_COUNT_LIMIT, segment_bytes=SEGMENT_BYTES,
    )
    generate_s = time.perf_counter() - started
    log_bytes = sum(os.path.getsize(os.path.join(log_dir, name)) for name in os.listdir(log_dir))
    options = AuditOptions(DELIVERY_COUNT_LIMIT, RECORDS_PER_SNAPSHOT)

    started = time.perf_counter()
    spark = _spark_session()
    session_s = time.perf_counter() - started
    python_times: list[float] = []
    warm_times: list[float] = []
    results = {}
    try:
        started = time.perf_counter()
        cold = run_spark_audit(spark, log_dir, options)
        cold_s = time.perf_counter() - started

        def rounds():
            # Alternate the engines so that noise from other work on the machine hits both alike.
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                results["python"] = replay_log(log_dir, options)
                python_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                results["spark"] = run_spark_audit(spark, log_dir, options)
                warm_times.append(time.perf_counter() - t0)

        benchmark.pedantic(rounds, rounds=1, iterations=1)
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    python, warm = results["python"], results["spark"]
    python_s, warm_s = statistics.median(python_times), statistics.median(warm_times)

    for result in (python, cold, warm):
        assert result.ok and result.records == RECORDS, result.violations[:5]
    assert cold.final_states == warm.final_states == python.final_states
    assert cold.violations == warm.violations == python.violations == []

    numbers = {
        "records": RECORDS,
        "segments": segments,
        "log_mib": round(log_bytes / 2**20, 1),
        "share_partitions": KEYS,
        "generate_log_s": round(generate_s, 2),
        "rounds (medians below)": ROUNDS,
        "python_replay_s": round(python_s, 2),
        "python_replay_records_per_s": round(RECORDS / python_s),
        "spark_session_start_s": round(session_s, 2),
        "spark_cold_audit_s (first job on a fresh session)": round(cold_s, 2),
        "spark_cold_records_per_s": round(RECORDS / cold_s),
        "spark_warm_audit_s": round(warm_s, 2),
        "spark_warm_records_per_s": round(RECORDS / warm_s),
        "ratio_spark_warm_over_python": round(python_s / warm_s, 2),
        "ratio_spark_cold_over_python": round(python_s / cold_s, 2),
        "ratio_spark_with_start_up_over_python": round(python_s / (session_s + cold_s), 2),
        "python_replay_s_each": [round(t, 2) for t in python_times],
        "spark_warm_audit_s_each": [round(t, 2) for t in warm_times],
        "spark_cores": cores,
        "cpus_on_machine": os.cpu_count(),
    }
    benchmark.extra_info.update(numbers)
    with capsys.disabled():
        print(f"\naudit: {RECORDS:,} records, {KEYS:,} share-partitions, {segments} segments")
        width = max(map(len, numbers))
        for name, value in numbers.items():
            text = f"{value:,}" if isinstance(value, int) else str(value)
            print(f"  {name:<{width}}  {text:>12}")
