"""bench/readme_tables.py: the README's benchmark blocks generated from a pytest-benchmark JSON run.

Small runs built here stand in for `make bench`'s JSON (same layout: `fullname`, `stats.median`,
`extra_info`, `machine_info`, `commit_info`); the last test checks the repository's README against the
stored run, so a published number that is not what bench/results/latest.json gives fails the suite.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "bench" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)

T = "bench/bench_tracker.py::"


def bench(fullname: str, median: float = 1e-3, **extra) -> dict:
    return {"group": "g", "name": fullname.split("::")[1], "fullname": fullname, "extra_info": extra,
            "stats": {"median": median, "min": median, "mean": median, "rounds": 10}}


def run_json(*benchmarks: dict) -> dict:
    return {
        "machine_info": {"python_implementation": "CPython", "python_version": "3.11.7", "system": "Linux",
                         "release": "6.1.0", "machine": "x86_64",
                         "cpu": {"brand_raw": "Test CPU 9000", "count": 2}},
        "commit_info": {"id": "abcdef1234567890", "dirty": False, "branch": "main"},
        "datetime": "2026-01-02T03:04:05.678901+00:00",
        "version": "5.3.1",
        "benchmarks": list(benchmarks),
    }


def tracker_run() -> dict:
    twins = {"test_whole_batch_cycle": (1.84e-6, 11.1e-6, {}),
             "test_per_offset_ack_one_per_call": (217e-6, 3483e-6, {"acks_per_round": 500}),
             "test_ack_500_per_offset_types[{}-2]": (4.41e-6, 459e-6, {"offsets_per_call": 500}),
             "test_ack_500_per_offset_types[{}-10]": (10.4e-6, 482e-6, {"offsets_per_call": 500}),
             "test_lock_expiry_storm": (0.067e-3, 1.09e-3, {})}
    out = []
    for test, (native, pure, extra) in twins.items():
        pattern = test if "{}" in test else test + "[{}]"
        out.append(bench(T + pattern.format("native"), native, **extra))
        out.append(bench(T + pattern.format("pure"), pure, **extra))
    out.append(bench(T + "test_memory_per_split_offset_is_at_most_16_bytes[native]", 0.5, bytes_per_split_offset=15.1))
    out.append(bench(T + "test_memory_per_whole_batch_entry_is_at_most_200_bytes[native]", 0.3,
                     bytes_per_whole_batch_entry=144.0))
    return run_json(*out)


README = """# title

<!-- bench:begin run -->
old run line
<!-- bench:end run -->

prose stays

<!-- bench:begin tracker -->
| hand-typed | 1.00 µs |
<!-- bench:end tracker -->

<!-- bench:begin e2e -->
hand-typed e2e numbers
<!-- bench:end e2e -->
tail
"""

EXPECTED_TRACKER = """<!-- bench:begin tracker -->
| workload | native (Cython) | pure-Python twin | ratio | target |
|---|---|---|---|---|
| whole-batch cycle: acquire a 500-record producer batch, accept it whole, SPSO advances | **1.84 µs** | 11.1 µs | 6.03× | ≤ 2 µs ✅ |
| per-offset acknowledgements, one offset per call (begin + commit), 500 calls | 217 µs (0.434 µs/ack) | 3,483 µs (6.97 µs/ack) | **16.1×** | ≥ 20× ❌ |
| one acknowledgement of 500 per-offset types, 2 % RELEASE/REJECT | 4.41 µs = **113 M offsets/s** | 459 µs | 104× | ≥ 50 M offsets/s ✅ |
| the same with 10 % RELEASE/REJECT (~100 persisted runs) | 10.4 µs = **48.1 M offsets/s** | 482 µs | 46.3× | ≥ 50 M offsets/s ❌ |
| lock-expiry storm: 100k acquired records in 1k batches expiring at once | **0.067 ms** | 1.09 ms | 16.3× | ≤ 2 ms ✅ |
| memory per in-flight offset in per-offset state (1M-offset window; a test asserts it) | **15.1 B** |  |  | ≤ 16 B ✅ |
| memory per whole-batch entry (10k entries; a test asserts it) | **144 B** |  |  | ≤ 200 B ✅ |

*Stored run of 2026-01-02 03:04 UTC, commit `abcdef1`.*
<!-- bench:end tracker -->"""


def render(readme: str, data: dict):
    return readme_tables.render(readme, readme_tables.Run(data, "bench/results/latest.json"))


def test_the_tracker_table_quotes_medians_ratios_and_targets():
    text, generated, kept = render(README, tracker_run())
    assert EXPECTED_TRACKER in text
    assert generated == ["run", "tracker"]
    assert "prose stays" in text and text.endswith("tail\n")


def test_a_changed_number_in_the_run_changes_the_table():
    data = tracker_run()
    before, _, _ = render(README, data)
    changed = copy.deepcopy(data)
    whole = next(b for b in changed["benchmarks"] if b["fullname"] == T + "test_whole_batch_cycle[native]")
    whole["stats"]["median"] = 2.5e-6  # slower than the 2 us target; the ratio to the twin shrinks
    after, _, _ = render(README, changed)
    assert after != before
    row = next(line for line in after.splitlines() if line.startswith("| whole-batch cycle"))
    assert row == ("| whole-batch cycle: acquire a 500-record producer batch, accept it whole, SPSO advances "
                   "| **2.50 µs** | 11.1 µs | 4.44× | ≤ 2 µs ❌ |")
    # an extra_info number too
    memory = next(b for b in changed["benchmarks"] if "split_offset" in b["fullname"])
    memory["extra_info"]["bytes_per_split_offset"] = 16.4
    again, _, _ = render(README, changed)
    assert "| **16.4 B** |  |  | ≤ 16 B ❌ |" in again


def test_the_run_block_names_the_file_commit_and_machine():
    data = tracker_run()
    text, _, _ = render(README, data)
    assert ("**Stored run:** [`bench/results/latest.json`](bench/results/latest.json), 2026-01-02 03:04 UTC, "
            "commit `abcdef1`, 12 benchmarks from `bench_tracker.py`.") in text
    assert "**Machine:** Test CPU 9000, 2 CPUs, CPython 3.11.7, Linux 6.1.0 x86_64." in text
    data["commit_info"]["dirty"] = True
    data["invocation"] = {"args": ["bench"], "load_average_at_start": [0.5, 0.4, 0.3],
                          "load_average_at_end": [1.25, 0.9, 0.5]}
    dirty, _, _ = render(README, data)
    assert "commit `abcdef1 + uncommitted changes`" in dirty
    assert ("**Machine:** Test CPU 9000, 2 CPUs, CPython 3.11.7, Linux 6.1.0 x86_64; load average (1 min) 0.50 "
            "when the run started, 1.25 when it ended.") in dirty


def test_a_block_the_run_does_not_cover_is_kept_as_it_was():
    text, generated, kept = render(README, tracker_run())
    assert "e2e" not in generated and list(kept) == ["e2e"]
    assert "<!-- bench:begin e2e -->\nhand-typed e2e numbers\n<!-- bench:end e2e -->" in text
    # a run without the tracker keeps the hand-typed tracker table too
    only_e2e = run_json(bench("bench/bench_e2e.py::test_e2e_serve_vs_mock[a-explicit-1x1]"))
    text, generated, kept = render(README, only_e2e)
    assert "| hand-typed | 1.00 µs |" in text and "tracker" in kept and generated == ["run"]


def test_deterministic_and_a_fixed_point():
    first, _, _ = render(README, tracker_run())
    second, _, _ = render(README, tracker_run())
    assert first == second
    assert render(first, tracker_run())[0] == first


@pytest.mark.parametrize("bad", [
    "<!-- bench:begin nonsense -->\nx\n<!-- bench:end nonsense -->\n",
    "<!-- bench:begin tracker -->\nx\n<!-- bench:end run -->\n",
    "<!-- bench:begin tracker -->\nx\n",
    "<!-- bench:begin run -->\nx\n<!-- bench:end run -->\n<!-- bench:begin run -->\ny\n<!-- bench:end run -->\n",
])
def test_malformed_markers_are_errors(bad):
    with pytest.raises(ValueError):
        render(bad, tracker_run())


def full_run() -> dict:
    """Every benchmark every block reads, with the extra_info keys the bench files write."""
    p, m, c = "bench/bench_partition.py::", "bench/bench_manager.py::", "bench/bench_coordinator.py::"
    s, ts = "bench/bench_persister.py::", "bench/bench_topic_store.py::"
    out = tracker_run()["benchmarks"]
    for test in ("test_sweep_whole_batch_cycle", "test_sweep_per_offset_ack", "test_sweep_next_fetch_offset_walk"):
        for twin in ("native", "pure"):
            for w in ("1e+03", "1e+04", "1e+05", "1e+06"):
                out.append(bench(f"{T}{test}[{twin}-window={w}]", 2e-6))
    out.append(bench(T + "test_share_partition_cycle", 20.3e-6))
    for twin in ("native", "pure"):
        out += [bench(f"{p}test_whole_batch_cycle[{twin}-tracker]", 1.8e-6),
                bench(f"{p}test_whole_batch_cycle[{twin}-share-partition]", 3e-6),
                bench(f"{p}test_ack_500_per_offset_types[{twin}]", 25e-6, offsets_per_call=500),
                bench(f"{p}test_single_offset_acknowledge[{twin}]", 466e-6, acks_per_round=500),
                bench(f"{m}test_manager_share_fetch[{twin}]", 121e-6),
                bench(f"{m}test_bare_share_partition_calls[{twin}]", 46e-6),
                bench(f"{m}test_one_append_wakes_the_one_waiting_fetch[{twin}]", 35e-6)]
    out.append(bench(m + "test_memory_per_idle_waiting_fetch", 1.0, waiters=10_000, bytes_per_waiting_fetch=5077,
                     bytes_per_purgatory_entry=719))
    out += [bench(c + "test_heartbeat_steady_state", 2.31e-3, us_per_heartbeat=11.55),
            bench(c + "test_heartbeat_full_request", 2.66e-3, us_per_heartbeat=13.3),
            bench(c + "test_assignment_recompute_in_heartbeat", 1.91e-3, ms_per_assignment=1.91),
            bench(c + "test_simple_assign_fresh", 1.29e-3, ms_per_assignment=1.29),
            bench(c + "test_simple_assign_sticky_after_leave", 1.39e-3, ms_per_assignment=1.39)]
    for n, (cached, indexed, scan) in {100: (180, 1230, 13_700), 10_000: (190, 2240, 1_360_000)}.items():
        out.append(bench(f"bench/bench_authorizer.py::test_authorize_cost[{n}]", cached * 1e-9,
                         cached_ns_median=cached, indexed_uncached_ns_mean=indexed, scan_every_acl_ns_mean=scan,
                         scan_over_indexed=round(scan / indexed, 1), indexed_over_cached=round(indexed / cached, 1)))
    out.append(bench(s + "test_durable_write_throughput_and_latency", 20.0, **{
        "naive_fsync_per_write_writes_per_s": 5963, "single_write_fsync_latency_p50_ms": 0.139,
        "single_write_fsync_latency_p99_ms": 0.322, "group_commit_writes_per_s (LocalPersister, median of 3)": 75112,
        "speedup_vs_naive (target >= 20)": 12.6, "writes_per_fsync (target >= 50)": 256.0,
        "writes_per_group_commit": 256.0, "latency_under_load_p50_ms": 3.012, "latency_under_load_p99_ms": 5.101,
        "p99_under_load / single_fsync_p50 (target <= 3)": 36.7, "p99_under_load / single_fsync_p99": 15.84,
        "little's law: partitions / writes_per_s, ms": 3.41,
        "cpu_per_write_us (1 / writes_per_s; the loop is saturated)": 13.3,
        "closed_loop_floor_us (no persister work, one fsync a group)": 4.2,
        "persister_cpu_per_write_us (over that floor)": 9.1,
        "sweep   8 partitions: writes/s, writes/fsync, p50/p99 ms, p99/fsync": "6000, 7.9, 0.40/0.53, 3.80"}))
    out.append(bench(s + "test_recovery_of_a_million_records_and_after_pruning", 5.0, **{
        "log_scan_records_per_s (SegmentLog.open: framing + CRC)": 22_000_000,
        "coordinator_open_records_per_s (scan+decode+replay, target >= 300k)": 648_000, "coordinator_open_s": 1.54,
        "records_replayed_before_prune": 1_000_000, "records_replayed_after_prune": 100_000,
        "bound_live_keys_x_(N+1)": 100_000, "coordinator_open_after_prune_s": 0.56}))
    out.append(bench(s + "test_bytes_on_disk_per_delta", 0.1, **{
        "bytes_on_disk_per_delta": 76.6, "msgpack_payload_bytes_per_delta": 66.6,
        "framing_overhead_pct (target <= 20)": 15.0}))
    for twin, decode in (("native", 1_360_000), ("pure", 260_000)):
        out.append(bench(f"{s}test_frame_codec_twins[{twin}]", 0.2, **{
            "scan_records_per_s (framing + CRC)": decode * 3, "decode_records_per_s (framing + CRC + rows)": decode}))
    for producers, batches in ((1, 2441), (8, 12686), (64, 22506)):
        out.append(bench(f"{ts}test_durable_append_throughput[{producers}]", 1.0, batches=2000, batch_bytes=11_634,
                         batches_per_s=batches, records_per_s=batches * 100, MB_per_s=round(batches * 0.0116, 1),
                         appends_per_group_commit=float(producers), naive_write_fsync_batches_per_s=6800,
                         speedup_vs_naive=round(batches / 6800, 2)))
    out += [bench(ts + "test_produce_checks_throughput", 1e-4, bytes=581_700, MB_per_s=5600),
            bench(ts + "test_timestamp_check_throughput", 2.3e-6, check_us_per_batch=2.3, records_per_s=43_478_261,
                  produce_checks_us_per_batch=2.1, check_vs_produce_checks=1.1),
            bench(ts + "test_read_and_recovery_throughput", 0.04, read_MB_per_s=6200, recovery_batches_per_s=190_000,
                  recovery_MB_per_s=2200)]
    kafka = {}
    for name, (writes, p50, p99) in {"segment log (fsync)": (85_400, 2.9, 3.6), "kafka mock, rtt 0 ms": (55_500, 4.5, 5.9),
                                     "kafka mock, rtt 2 ms": (21_500, 11.7, 15.7)}.items():
        kafka.update({f"{name}.writes_per_s": writes, f"{name}.p50_ms": p50, f"{name}.p99_ms": p99,
                      f"{name}.open_s": 0.05, f"{name}.recovery_records_per_s": 61_000})
        if name.startswith("kafka"):
            kafka.update({f"{name}.open_empty_s": 0.01, f"{name}.appends_per_txn": 256.0,
                          f"{name}.read_replay_records_per_s": 70_000})
    out.append(bench(readme_tables.KAFKA_LOG, 10.0, **kafka))
    out.append(bench(readme_tables.AUDIT, 40.0, **{
        "records": 1_000_000, "segments": 7, "log_mib": 53.0, "share_partitions": 1000, "generate_log_s": 9.0,
        "rounds (medians below)": 3, "python_replay_s": 14.2, "python_replay_records_per_s": 70_423,
        "spark_session_start_s": 4.2, "spark_cold_audit_s (first job on a fresh session)": 11.9,
        "spark_cold_records_per_s": 84_034, "spark_warm_audit_s": 8.32, "spark_warm_records_per_s": 120_192,
        "ratio_spark_warm_over_python": 1.71, "ratio_spark_cold_over_python": 1.2,
        "ratio_spark_with_start_up_over_python": 0.88, "python_replay_s_each": [14.2, 14.0, 14.9],
        "spark_warm_audit_s_each": [8.32, 9.09, 8.14], "spark_cores": 2, "cpus_on_machine": 2}))
    for workload, (serve, mock) in {"a-explicit-1x1": (297_987, 54_485), "b-explicit-3x3": (192_137, 90_570),
                                    "c-implicit-1x1": (350_907, 53_365)}.items():
        extra = {"workload": workload, "records": 50_000, "record_bytes": 100, "rounds": 2,
                 "serve_records_per_s": serve, "mock_records_per_s": mock, "serve_over_mock": round(serve / mock, 3),
                 "serve_runs_records_per_s": [serve], "mock_runs_records_per_s": [mock]}
        for peer in ("serve", "mock"):
            extra.update({f"{peer}_cpu_us_per_record_consumers": 1.5, f"{peer}_cpu_us_per_record_producer": 1.3,
                          f"{peer}_cpu_us_per_record_broker": 1.2})
        out.append(bench(f"{readme_tables.E2E}[{workload}]", 5.0, **extra))
    out.append(bench(readme_tables.SECURITY, 5.0, records=200_000, record_bytes=100, rounds=3,
                     sasl_ssl_records_per_s=874_995, plaintext_records_per_s=826_127, sasl_ssl_over_plaintext=1.059,
                     sasl_ssl_runs_records_per_s=[874_995], plaintext_runs_records_per_s=[826_127]))
    out.append(bench(readme_tables.TRANSACTIONS, 5.0, records=20_000, record_bytes=100, rounds=3,
                     idempotent_records_per_s=250_000, transactions_of_100_records_per_s=18_000,
                     transactions_of_100_over_idempotent=0.072, transactions_of_1000_records_per_s=125_000,
                     transactions_of_1000_over_idempotent=0.5))
    out.append(soak_bench())
    for i, row in enumerate(readme_tables.LATENCY_ROWS):
        extra = {"row": row, "seconds": 5.0, "rounds": 2}
        for peer, scale in (("serve", 1.0), ("mock", 3.0)):
            extra.update({f"{peer}_p50_ms": scale * (1.5 + i), f"{peer}_p99_ms": scale * (9.0 + i),
                          f"{peer}_delivered": 10_000, f"{peer}_expected": 10_000})
        out.append(bench(f"{readme_tables.LATENCY}[{row}]", 20.0, **extra))
    return run_json(*out)


def soak_bench(share_state_last: int = 85_074) -> dict:
    """The soak's extra_info as bench/bench_soak.py writes it (a 60 s run with the share state pruned; the
    sample series shortened)."""
    def measure(first: float, last: float, peaks: tuple[float, float]) -> dict:
        return {"first": first, "last": last, "growth": round(last / first, 3), "peak_first_half": peaks[0],
                "peak_second_half": peaks[1], "peak_growth": round(peaks[1] / peaks[0], 3)}

    return bench(readme_tables.SOAK, 79.6, soak_s=60, target_records_per_s=1000, record_bytes=200,
                 warmup_s=12.0, warmup_sample_t_s=12.24, end_sample_t_s=60.0,
                 samples_columns=["t_s", "share_state_bytes", "groups_bytes", "topics_bytes", "rss_kb", "fds"],
                 samples=[[12.24, 45_930, 31_039, 2_584_852, 53_948, 28],
                          [60.0, share_state_last, 142_648, 2_408_791, 54_492, 27]],
                 growth={"share_state_bytes": measure(45_930, share_state_last,
                                                      (98_463, max(85_074, share_state_last))),
                         "groups_bytes": measure(31_039, 142_648, (87_115, 142_648)),
                         "topics_bytes": measure(2_584_852, 2_408_791, (3_458_293, 3_587_684)),
                         "rss_kb": measure(53_948, 54_492, (54_344, 54_492)), "fds": measure(28, 27, (30, 30))},
                 restart={"first_start_s": 5.241, "middle_copy": {"ready_s": 2.001, "pause_s": 0.004},
                          "end_copy": {"ready_s": 1.568, "pause_s": 0.003}, "restart_s": [5.084, 4.613],
                          "stop_s": [0.685, 0.834, 0.812], "exit_codes": [0, 0, 0]},
                 produced_per_s=997.0, share_acknowledged_per_s=1096.4, group_consumed_per_s=1983.4,
                 group_commits_per_s=3.23, counts={"churn_rounds": 26, "produced": 61_709}, errors=[])


EXPECTED_SOAK = """<!-- bench:begin soak -->
| measure | after the warm-up (t = 12 s) | at the end (t = 60 s) | end / warm-up | peak in the first → second half after the warm-up |
|---|---|---|---|---|
| `DIR/share-state` (the share-state log) | 44.9 KiB | **83.1 KiB** | 1.85× | 96.2 KiB → 83.1 KiB (**0.864×**) |
| `DIR/groups` (group and offset records) | 30.3 KiB | **139 KiB** | 4.60× | 85.1 KiB → 139 KiB (**1.64×**) |
| `DIR/topics` (topic logs) | 2.47 MiB | **2.30 MiB** | 0.932× | 3.30 MiB → 3.42 MiB (**1.04×**) |
| serve's resident memory (VmRSS) | 52.7 MiB | **53.2 MiB** | 1.01× | 53.1 MiB → 53.2 MiB (**1.00×**) |
| serve's open file descriptors | 28 | **27** | 0.964× | 30 → 30 (**1.00×**) |
| start of a second serve on a copy of the data directory (launch to readiness) | 2.00 s (copy at the middle) | **1.57 s** (copy at the end) | 0.784× |  |

60 s of load: 997 records/s produced (target 1,000), 1,096/s acknowledged by the share consumers, 1,983/s read \
by the two consumer groups with 3.23 commits/s, 26 churn rounds. Restart after SIGTERM at the end: 5.08 s, 4.61 s \
(the first start, on the empty directory: 5.24 s). *Stored run of 2026-01-02 03:04 UTC, commit `abcdef1`.*
<!-- bench:end soak -->""".replace(" \\\n", " ")


def test_the_soak_table_shows_each_size_at_the_warm_up_and_at_the_end():
    text, generated, _ = render("<!-- bench:begin soak -->\nold\n<!-- bench:end soak -->\n", run_json(soak_bench()))
    assert generated == ["soak"] and EXPECTED_SOAK in text
    grown, _, _ = render(text, run_json(soak_bench(share_state_last=5 * 1024 * 1024)))
    row = next(line for line in grown.splitlines() if line.startswith("| `DIR/share-state`"))
    assert row == ("| `DIR/share-state` (the share-state log) | 44.9 KiB | **5.00 MiB** | 114× | "
                   "96.2 KiB → 5.00 MiB (**53.2×**) |")


def test_every_block_renders_from_a_run_of_every_benchmark():
    readme = "".join(f"<!-- bench:begin {name} -->\nold\n<!-- bench:end {name} -->\n\n" for name in readme_tables.BLOCKS)
    text, generated, kept = render(readme, full_run())
    assert kept == {} and generated == list(readme_tables.BLOCKS)
    assert "\nold\n" not in text
    row_a = next(line for line in text.splitlines() if line.startswith("| (a) 1 partition"))
    assert row_a.startswith("| (a) 1 partition, 1 explicit-ack consumer | **297,987 records/s** | 54,485 | **5.47×** | "
                            "broker ≤ 0.5 µs "), row_a
    assert row_a.split("|")[5].strip().startswith("broker")  # the retired throughput target is not shown
    assert "SASL_SSL (TLS, SCRAM-SHA-512) **874,995** vs PLAINTEXT **826,127 records/s**, **1.06×**" in text
    assert "| transactional, 100 records per transaction | **18,000** | 0.072× |" in text
    assert ("| one record, idempotent acks=all, 100 records/s: delivery report | **1.50 / 9.00 ms** | 4.50 / 27.00 ms "
            "| p50 ≤ 2 ms ✅ | 100% / 100% |") in text
    assert ("| the same at 20,000 records/s | **5.50 / 13.00 ms** | 16.50 / 39.00 ms | p99 ≤ 30 ms ✅; below the "
            "mock's p99 ✅ |") in text
    assert "| redelivery after RELEASE (median) | **7.50 ms** | 22.50 ms | median ≤ 2 ms ❌ |" in text
    assert "| write latency p99 with 8 writers | 3.80× one fsync |  |" in text
    assert "| recovery after pruning | replays 100,000 records" in text and "| bounded ✅ |" in text
    assert "warm session (median of 3: 8.14, 8.32, 9.09 s)" in text
    assert ("| `DIR/groups` (group and offset records) | 30.3 KiB | **139 KiB** | 4.60× | "
            "85.1 KiB → 139 KiB (**1.64×**) |") in text


def test_main_check_and_write(tmp_path, capsys):
    stored = tmp_path / "bench" / "results" / "latest.json"
    stored.parent.mkdir(parents=True)
    stored.write_text(json.dumps(tracker_run()))
    readme = tmp_path / "README.md"
    readme.write_text(README)
    args = ["--json", str(stored), "--readme", str(readme)]
    assert readme_tables.main([*args, "--check"]) == 1 and readme.read_text() == README
    assert readme_tables.main(args) == 0
    assert EXPECTED_TRACKER in readme.read_text()
    assert readme_tables.main([*args, "--check"]) == 0
    assert readme_tables.main([*args, "--strict"]) == 1  # the e2e block is not in the run
    assert "kept block 'e2e'" in capsys.readouterr().err


def test_the_readme_is_what_the_stored_run_gives():
    """Every generated block of README.md is what bench/results/latest.json gives (`make bench-readme`
    would change nothing): a number in them cannot be edited by hand or drift from the stored run."""
    run = readme_tables.load(readme_tables.DEFAULT_JSON, readme_tables.DEFAULT_README)
    readme = readme_tables.DEFAULT_README.read_text(encoding="utf-8")
    text, generated, _kept = readme_tables.render(readme, run)
    assert "run" in generated
    assert text == readme
