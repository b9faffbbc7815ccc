"""The README's benchmark tables, generated from one stored pytest-benchmark run.

    python bench/readme_tables.py [--json bench/results/latest.json] [--readme README.md] [--check] [--strict]

`make bench` runs the benchmarks with `--benchmark-json=bench/results/latest.json` and then this script
(`make bench-readme` runs only the script, on the stored JSON). The README holds blocks between
`<!-- bench:begin NAME -->` and `<!-- bench:end NAME -->`; NAME is one of `BLOCKS` below, a function that
builds the block's Markdown from the run alone: medians (`stats.median`) and the numbers the benchmarks
compute and keep in `extra_info`, the twins (native and pure rows of one pytest-benchmark group) side by
side with their ratio (pure / native), and the machine from `machine_info` / `commit_info`. Nothing else
goes in (no clock, no environment), so the same JSON gives the same README.

A block whose benchmarks are not in the run (a run of some files only; a benchmark skipped for lack of
confluent-kafka or Java) is left as it is and named on stderr, so such a run never erases another run's
numbers; every generated block says which run it comes from. `--strict` makes a kept block an error;
`--check` changes nothing and exits 1 when the README is not what the run gives.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = ROOT / "bench" / "results" / "latest.json"
DEFAULT_README = ROOT / "README.md"

BLOCK = re.compile(r"<!-- bench:begin (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- bench:end (?P<end>[\w-]+) -->",
                   re.DOTALL)

TRACKER = "bench/bench_tracker.py::"
PARTITION = "bench/bench_partition.py::"
MANAGER = "bench/bench_manager.py::"
COORDINATOR = "bench/bench_coordinator.py::"
AUTHORIZER = "bench/bench_authorizer.py::"
PERSISTER = "bench/bench_persister.py::"
TOPIC_STORE = "bench/bench_topic_store.py::"
KAFKA_LOG = "bench/bench_kafka_log.py::test_durable_writes_and_recovery_kafka_vs_segment_log"
AUDIT = "bench/bench_audit.py::test_audit_throughput_spark_vs_single_process_python"
E2E = "bench/bench_e2e.py::test_e2e_serve_vs_mock"
LATENCY = "bench/bench_latency.py::test_latency_serve_vs_mock"
SECURITY = "bench/bench_security.py::test_share_consume_sasl_ssl_vs_plaintext"
SOAK = "bench/bench_soak.py::test_soak_serve_state_stays_bounded"
TRANSACTIONS = "bench/bench_transactions.py::test_transactional_vs_idempotent_producer"


class Missing(Exception):
    """The run lacks a benchmark (or an `extra_info` number) a block needs."""


class Run:
    """One pytest-benchmark JSON file, looked up by each benchmark's `fullname`."""

    def __init__(self, data: dict[str, Any], link: str) -> None:
        self.data = data
        self.link = link  # the JSON's path as the README links it
        self.benchmarks = {b["fullname"]: b for b in data.get("benchmarks", [])}

    def bench(self, fullname: str) -> dict[str, Any]:
        try:
            return self.benchmarks[fullname]
        except KeyError:
            raise Missing(fullname) from None

    def median(self, fullname: str) -> float:
        """The median of a benchmark's rounds, in seconds."""
        return float(self.bench(fullname)["stats"]["median"])

    def extra(self, fullname: str, key: str) -> Any:
        info = self.bench(fullname).get("extra_info") or {}
        if key not in info:
            raise Missing(f"{fullname}: extra_info[{key!r}]")
        return info[key]

    def stamp(self) -> str:
        """The line under every generated block: which run its numbers come from."""
        return f"*Stored run of {_when(self.data)}, commit `{_commit(self.data)}`.*"


def _when(data: dict[str, Any]) -> str:
    # pytest-benchmark writes an ISO time in UTC: 2026-12-02T01:05:31.312405+00:00
    stamp = str(data.get("datetime", "unknown time"))
    return stamp[:10] + " " + stamp[11:16] + " UTC" if len(stamp) >= 16 else stamp


def _commit(data: dict[str, Any]) -> str:
    info = data.get("commit_info") or {}
    commit = str(info.get("id", "unknown"))[:7]
    return commit + (" + uncommitted changes" if info.get("dirty") else "")


# -- number formats (three significant digits, thousands separated) --------------------------------


def num(x: float) -> str:
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    text = f"{x:.3g}"
    return text if "e" not in text else f"{x:.2e}"


def us(seconds: float) -> str:
    return f"{num(seconds * 1e6)} µs"


def ms(seconds: float) -> str:
    return f"{num(seconds * 1e3)} ms"


def rate(per_s: float) -> str:
    """A rate without its unit: 113 M, 75.1k, 940."""
    per_s = float(per_s)
    if per_s >= 1e6:
        return f"{num(per_s / 1e6)} M"
    if per_s >= 1e4:
        return f"{num(per_s / 1e3)}k"
    return num(per_s)


def times(x: float) -> str:
    return f"{num(x)}×"


def count(n: float) -> str:
    return f"{round(n):,}"


def size(n_bytes: float) -> str:
    """Bytes as KiB below a MiB, else MiB: 18.1 KiB, 2.49 MiB."""
    return f"{num(n_bytes / 1024)} KiB" if n_bytes < 1 << 20 else f"{num(n_bytes / (1 << 20))} MiB"


def meets(value: float, op: str, bound: float, text: str) -> str:
    """A target and whether the run met it: `≥ 20× ❌`."""
    ok = value <= bound if op == "<=" else value >= bound
    return f"{text} {'✅' if ok else '❌'}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# -- the blocks --------------------------------------------------------------------------------------


def block_run(run: Run) -> list[str]:
    """The run itself: where it is stored, when, which commit, which files, which machine."""
    if not run.benchmarks:
        raise Missing("no benchmarks in the run")
    machine = run.data.get("machine_info") or {}
    cpu = machine.get("cpu") or {}
    files = sorted({name.split("::", 1)[0].rsplit("/", 1)[-1] for name in run.benchmarks})
    brand = cpu.get("brand_raw") or machine.get("processor") or "unknown CPU"
    python = f"{machine.get('python_implementation', 'Python')} {machine.get('python_version', '?')}"
    system = " ".join(str(machine[k]) for k in ("system", "release", "machine") if machine.get(k))
    invocation = run.data.get("invocation") or {}
    start, end = invocation.get("load_average_at_start"), invocation.get("load_average_at_end")
    load = f"; load average (1 min) {start[0]:.2f} when the run started, {end[0]:.2f} when it ended" if (
        start and end) else ""
    return [
        f"**Stored run:** [`{run.link}`]({run.link}), {_when(run.data)}, commit `{_commit(run.data)}`, "
        f"{len(run.benchmarks)} benchmarks from {', '.join(f'`{f}`' for f in files)}.",
        "",
        f"**Machine:** {brand}, {cpu.get('count', '?')} CPUs, {python}, {system}{load}.",
    ]


E2E_WORKLOADS = {
    "a-explicit-1x1": ("(a)", "1 partition, 1 explicit-ack consumer", True),
    "b-explicit-3x3": ("(b)", "3 partitions, 3 explicit-ack consumers (aggregate)", True),
    "c-implicit-1x1": ("(c)", "1 partition, implicit acknowledgement", False),
}


# The broker's CPU per record each workload must stay within (issue: latency and CPU), and the factor it
# must stay below the mock's broker CPU per record. They replace the retired >= 10x throughput targets.
E2E_BROKER_CPU_TARGET_US = {"(a)": 0.5, "(b)": 1.0, "(c)": 0.5}
E2E_BROKER_CPU_BELOW_MOCK = 10


def block_e2e(run: Run) -> list[str]:
    rows, clients = [], []
    first = f"{E2E}[{next(iter(E2E_WORKLOADS))}]"
    for workload, (letter, label, _has_target) in E2E_WORKLOADS.items():
        name = f"{E2E}[{workload}]"
        x = lambda key: run.extra(name, key)  # noqa: E731
        serve, mock, ratio = x("serve_records_per_s"), x("mock_records_per_s"), x("serve_over_mock")
        cpu = {peer: [x(f"{peer}_cpu_us_per_record_{party}") for party in ("consumers", "producer", "broker")]
               for peer in ("serve", "mock")}
        bound = E2E_BROKER_CPU_TARGET_US[letter]
        broker, mock_broker = cpu["serve"][2], cpu["mock"][2]
        below = mock_broker / broker if broker > 0 else float("inf")
        target = (meets(broker, "<=", bound, f"broker ≤ {bound} µs") + "; "
                  + meets(below, ">=", E2E_BROKER_CPU_BELOW_MOCK,
                          f"{times(below)} below the mock's (≥ {E2E_BROKER_CPU_BELOW_MOCK}×)"))
        rows.append([f"{letter} {label}", f"**{count(serve)} records/s**", count(mock), f"**{times(ratio)}**",
                     target,
                     " / ".join(f"{v:.1f}" for v in cpu["serve"]), " / ".join(f"{v:.1f}" for v in cpu["mock"])])
        client_us = cpu["serve"][0] + cpu["serve"][1]
        clients.append(f"{letter} {client_us:.1f} µs × {count(10 * mock)}/s = {num(10 * mock * client_us / 1e6)}")
    lines = table(["workload", "serve", "librdkafka mock", "ratio", "target: broker CPU per record",
                   "CPU µs/record (consumers / producer / broker), serve",
                   "CPU µs/record (consumers / producer / broker), mock"], rows)
    lines += ["", "The former targets of 10× the mock's rate are retired: at that rate the clients alone, at the "
              "CPU per record they spent in the serve runs (consumers + producer), need in CPU-seconds per "
              "second, before serve does any work: " + "; ".join(clients) + " (two cores give 2.0).", "",
              f"{count(run.extra(first, 'records'))} records of {run.extra(first, 'record_bytes')} B per run, best "
              f"of {run.extra(first, 'rounds')} alternated runs per peer (every run's rate is in the JSON). "
              + run.stamp()]
    return lines


# row of bench_latency -> (label, quantiles shown, target: (quantile, bound ms, text) or None, below the mock's p99)
LATENCY_ROWS: dict[str, tuple[str, tuple[int, ...], tuple[int, float, str] | None, bool]] = {
    "produce-idempotent-100": ("one record, idempotent acks=all, 100 records/s: delivery report", (50, 99),
                               (50, 2.0, "p50 ≤ 2 ms"), False),
    "produce-idempotent-2000": ("idempotent acks=all, 2,000 records/s, linger.ms=0: delivery report", (50, 99),
                                (99, 20.0, "p99 ≤ 20 ms"), False),
    "produce-acks1-2000": ("acks=1, 2,000 requests/s on one connection, linger.ms=0: delivery report", (50, 99),
                           (99, 20.0, "p99 ≤ 20 ms"), False),
    "delivery-2000": ("produce → ShareConsumer delivery, 2,000 records/s (3 partitions, 3 consumers)", (50, 99),
                      (99, 20.0, "p99 ≤ 20 ms"), True),
    "delivery-20000": ("the same at 20,000 records/s", (50, 99), (99, 30.0, "p99 ≤ 30 ms"), True),
    "commit-sync": ("commit_sync after acknowledging a batch of 10", (50, 99), (50, 2.0, "p50 ≤ 2 ms"), False),
    "release-redelivery": ("redelivery after RELEASE (median)", (50,), (50, 2.0, "median ≤ 2 ms"), False),
}


def block_latency(run: Run) -> list[str]:
    rows = []
    first = f"{LATENCY}[{next(iter(LATENCY_ROWS))}]"
    for row, (label, quantiles, target, below_mock) in LATENCY_ROWS.items():
        name = f"{LATENCY}[{row}]"
        x = lambda key: run.extra(name, key)  # noqa: E731
        shown = {peer: " / ".join(f"{x(f'{peer}_p{q}_ms'):.2f}" for q in quantiles) for peer in ("serve", "mock")}
        checks = []
        if target is not None:
            q, bound, text = target
            checks.append(meets(x(f"serve_p{q}_ms"), "<=", bound, text))
        if below_mock:
            checks.append(meets(x("serve_p99_ms"), "<=", x("mock_p99_ms"), "below the mock's p99"))
        delivered = " / ".join(f"{x(f'{peer}_delivered') / x(f'{peer}_expected'):.0%}" for peer in ("serve", "mock"))
        rows.append([label, f"**{shown['serve']} ms**", f"{shown['mock']} ms", "; ".join(checks), delivered])
    lines = table(["latency (p50 / p99)", "serve", "librdkafka mock", "target", "delivered (serve / mock)"], rows)
    lines += ["", f"{num(run.extra(first, 'seconds'))} s of traffic per run, {run.extra(first, 'rounds')} alternated "
              "runs per peer, percentiles of the runs pooled. " + run.stamp()]
    return lines


def block_security(run: Run) -> list[str]:
    x = lambda key: run.extra(SECURITY, key)  # noqa: E731
    return [f"One ShareConsumer, {count(x('records'))} records of {x('record_bytes')} B, best of {x('rounds')} "
            f"alternated runs per listener: SASL_SSL (TLS, SCRAM-SHA-512) **{count(x('sasl_ssl_records_per_s'))}** "
            f"vs PLAINTEXT **{count(x('plaintext_records_per_s'))} records/s**, "
            f"**{times(x('sasl_ssl_over_plaintext'))}**. " + run.stamp()]


def block_transactions(run: Run) -> list[str]:
    x = lambda key: run.extra(TRANSACTIONS, key)  # noqa: E731
    rows = [["idempotent producer (acks=all)", f"**{count(x('idempotent_records_per_s'))}**", "1×"]]
    for size in (100, 1000):
        key = f"transactions_of_{size}"
        rows.append([f"transactional, {count(size)} records per transaction",
                     f"**{count(x(key + '_records_per_s'))}**", times(x(key + "_over_idempotent"))])
    return [*table(["producer", "committed records/s", "vs idempotent"], rows), "",
            f"{count(x('records'))} records of {x('record_bytes')} B to one partition per run, best of "
            f"{x('rounds')} alternated runs per producer (every run's rate is in the JSON). " + run.stamp()]


def block_tracker(run: Run) -> list[str]:
    def twins(test: str, suffix: str = "") -> tuple[float, float]:
        return run.median(f"{TRACKER}{test}[native{suffix}]"), run.median(f"{TRACKER}{test}[pure{suffix}]")

    rows = []
    native, pure = twins("test_whole_batch_cycle")
    rows.append(["whole-batch cycle: acquire a 500-record producer batch, accept it whole, SPSO advances",
                 f"**{us(native)}**", us(pure), times(pure / native), meets(native, "<=", 2e-6, "≤ 2 µs")])
    native, pure = twins("test_per_offset_ack_one_per_call")
    acks = run.extra(f"{TRACKER}test_per_offset_ack_one_per_call[native]", "acks_per_round")
    rows.append([f"per-offset acknowledgements, one offset per call (begin + commit), {acks} calls",
                 f"{us(native)} ({us(native / acks)}/ack)", f"{us(pure)} ({us(pure / acks)}/ack)",
                 f"**{times(pure / native)}**", meets(pure / native, ">=", 20, "≥ 20×")])
    for pct, label in ((2, "one acknowledgement of 500 per-offset types, 2 % RELEASE/REJECT"),
                       (10, "the same with 10 % RELEASE/REJECT (~100 persisted runs)")):
        native, pure = twins("test_ack_500_per_offset_types", f"-{pct}")
        offsets = run.extra(f"{TRACKER}test_ack_500_per_offset_types[native-{pct}]", "offsets_per_call")
        rows.append([label, f"{us(native)} = **{rate(offsets / native)} offsets/s**", us(pure), times(pure / native),
                     meets(offsets / native, ">=", 50e6, "≥ 50 M offsets/s")])
    native, pure = twins("test_lock_expiry_storm")
    rows.append(["lock-expiry storm: 100k acquired records in 1k batches expiring at once", f"**{ms(native)}**",
                 ms(pure), times(pure / native), meets(native, "<=", 2e-3, "≤ 2 ms")])
    per_offset = run.extra(f"{TRACKER}test_memory_per_split_offset_is_at_most_16_bytes[native]",
                           "bytes_per_split_offset")
    per_entry = run.extra(f"{TRACKER}test_memory_per_whole_batch_entry_is_at_most_200_bytes[native]",
                          "bytes_per_whole_batch_entry")
    rows.append(["memory per in-flight offset in per-offset state (1M-offset window; a test asserts it)",
                 f"**{num(per_offset)} B**", "", "", meets(per_offset, "<=", 16, "≤ 16 B")])
    rows.append(["memory per whole-batch entry (10k entries; a test asserts it)", f"**{num(per_entry)} B**", "", "",
                 meets(per_entry, "<=", 200, "≤ 200 B")])
    return table(["workload", "native (Cython)", "pure-Python twin", "ratio", "target"], rows) + ["", run.stamp()]


SWEEP_WINDOWS = ("1e+03", "1e+04", "1e+05", "1e+06")


def block_tracker_sweep(run: Run) -> list[str]:
    rows = []
    for test, label in (("test_sweep_whole_batch_cycle", "whole-batch cycle (accept the oldest 500, acquire 500)"),
                        ("test_sweep_per_offset_ack", "500 single-offset acknowledgements"),
                        ("test_sweep_next_fetch_offset_walk", "`next_fetch_offset` walk after a redelivery near the "
                                                              "start")):
        for twin in ("native", "pure"):
            rows.append([label if twin == "native" else "", twin,
                         *(us(run.median(f"{TRACKER}{test}[{twin}-window={w}]")) for w in SWEEP_WINDOWS)])
    return table(["median, by records in flight", "twin", "10³", "10⁴", "10⁵", "10⁶"], rows) + ["", run.stamp()]


def block_partition(run: Run) -> list[str]:
    cycle = {(twin, through): run.median(f"{PARTITION}test_whole_batch_cycle[{twin}-{through}]")
             for twin in ("native", "pure") for through in ("tracker", "share-partition")}
    ack500 = [run.median(f"{PARTITION}test_ack_500_per_offset_types[{twin}]") for twin in ("native", "pure")]
    single = [run.median(f"{PARTITION}test_single_offset_acknowledge[{twin}]") for twin in ("native", "pure")]
    acks = run.extra(f"{PARTITION}test_single_offset_acknowledge[native]", "acks_per_round")
    through_persister = run.median(f"{TRACKER}test_share_partition_cycle")

    def versus(twin: str, bold: bool) -> str:
        sp, own = cycle[(twin, "share-partition")], cycle[(twin, "tracker")]
        ratio = times(sp / own)
        return f"{us(sp)} vs {us(own)} = " + (f"**{ratio}**" if bold else ratio)

    native_ratio = cycle[("native", "share-partition")] / cycle[("native", "tracker")]
    rows = [
        ["whole-batch cycle through `SharePartition` (acquire 500, `await acknowledge`) vs the tracker's own",
         versus("native", True), versus("pure", False), "", meets(native_ratio, "<=", 2, "native within 2×")],
        ["one `await acknowledge` of 500 per-offset types, 40 % RELEASE/REJECT", us(ack500[0]), us(ack500[1]),
         f"**{times(ack500[1] / ack500[0])}**", meets(ack500[1] / ack500[0], ">=", 10, "≥ 10×")],
        [f"{acks} single-offset `await acknowledge` calls", f"{us(single[0])} ({us(single[0] / acks)} each)",
         f"{us(single[1])} ({us(single[1] / acks)} each)", f"**{times(single[1] / single[0])}**",
         meets(single[1] / single[0], ">=", 10, "≥ 10×")],
        ["acquire 500 + `await acknowledge` through `InMemoryPersister`, one event-loop turn "
         "(`bench_tracker.py`, the default tracker)", us(through_persister), "", "", ""],
    ]
    return table(["measure", "native", "pure", "ratio", "target"], rows) + ["", run.stamp()]


def block_manager(run: Run) -> list[str]:
    fetch = {twin: (run.median(f"{MANAGER}test_manager_share_fetch[{twin}]"),
                    run.median(f"{MANAGER}test_bare_share_partition_calls[{twin}]")) for twin in ("native", "pure")}
    wake = [run.median(f"{MANAGER}test_one_append_wakes_the_one_waiting_fetch[{twin}]") for twin in ("native", "pure")]
    memory = f"{MANAGER}test_memory_per_idle_waiting_fetch"
    waiters = run.extra(memory, "waiters")
    rows = [
        ["ShareFetch of 500 records over 10 partitions through the manager vs the bare calls",
         *(f"{us(fetch[t][0])} vs {us(fetch[t][1])} ({times(fetch[t][0] / fetch[t][1])})" for t in ("native", "pure")),
         ""],
        [f"{count(waiters)} idle waiting ShareFetches: one append wakes the right one", f"**{us(wake[0])}**",
         us(wake[1]), "one clock timer for every idle waiter, asserted: no CPU while idle"],
        ["memory per idle waiting ShareFetch (task, frames, future, purgatory entry)",
         f"{count(run.extra(memory, 'bytes_per_waiting_fetch'))} B (the purgatory entry alone "
         f"{count(run.extra(memory, 'bytes_per_purgatory_entry'))} B)", "", ""],
    ]
    return table(["measure", "native", "pure", "note"], rows) + ["", run.stamp()]


def block_coordinator(run: Run) -> list[str]:
    steady, full = f"{COORDINATOR}test_heartbeat_steady_state", f"{COORDINATOR}test_heartbeat_full_request"
    rows = [
        ["steady-state share-group heartbeat (a round of one heartbeat per member / members)",
         f"**{num(run.extra(steady, 'us_per_heartbeat'))} µs** (a round: {ms(run.median(steady))})"],
        ["the same, resending the subscription", f"{num(run.extra(full, 'us_per_heartbeat'))} µs"],
        ["target-assignment recompute inside a heartbeat after a member left",
         f"**{ms(run.median(f'{COORDINATOR}test_assignment_recompute_in_heartbeat'))}**"],
        ["`simple_assign` alone, from scratch", ms(run.median(f"{COORDINATOR}test_simple_assign_fresh"))],
        ["`simple_assign` alone, sticky after a member left",
         ms(run.median(f"{COORDINATOR}test_simple_assign_sticky_after_leave"))],
    ]
    return table(["measure (200 members × 1,000 partitions)", "median"], rows) + ["", run.stamp()]


def block_authorizer(run: Run) -> list[str]:
    sizes = (100, 10_000)
    names = {n: f"{AUTHORIZER}test_authorize_cost[{n}]" for n in sizes}
    rows = [["cached (a consumer's steady state)", *(f"**{us(run.extra(names[n], 'cached_ns_median') / 1e9)}**"
                                                    for n in sizes)],
            ["uncached, through the name and prefix indexes",
             *(us(run.extra(names[n], "indexed_uncached_ns_mean") / 1e9) for n in sizes)],
            ["scanning every ACL (the baseline)",
             *(us(run.extra(names[n], "scan_every_acl_ns_mean") / 1e9) for n in sizes)]]
    return table(["one ACL decision (READ/WRITE/DESCRIBE on a topic)", *(f"{n:,} ACLs" for n in sizes)], rows) + [
        "", run.stamp()]


def block_persister(run: Run) -> list[str]:
    durable = f"{PERSISTER}test_durable_write_throughput_and_latency"
    recovery = f"{PERSISTER}test_recovery_of_a_million_records_and_after_pruning"
    on_disk = f"{PERSISTER}test_bytes_on_disk_per_delta"
    d = lambda key: run.extra(durable, key)  # noqa: E731
    r = lambda key: run.extra(recovery, key)  # noqa: E731
    speedup = d("speedup_vs_naive (target >= 20)")
    per_fsync = d("writes_per_fsync (target >= 50)")
    p99_ratio = d("p99_under_load / single_fsync_p50 (target <= 3)")
    sweep8 = float(str(d("sweep   8 partitions: writes/s, writes/fsync, p50/p99 ms, p99/fsync")).split(", ")[-1])
    cpu = d("cpu_per_write_us (1 / writes_per_s; the loop is saturated)")
    open_rate = r("coordinator_open_records_per_s (scan+decode+replay, target >= 300k)")
    replayed, bound = r("records_replayed_after_prune"), r("bound_live_keys_x_(N+1)")
    overhead = run.extra(on_disk, "framing_overhead_pct (target <= 20)")
    decode = [run.extra(f"{PERSISTER}test_frame_codec_twins[{twin}]", "decode_records_per_s (framing + CRC + rows)")
              for twin in ("native", "pure")]
    rows = [
        ["one write + fsync alone (the naive loop), p50 / p99",
         f"{d('single_write_fsync_latency_p50_ms'):.2f} / {d('single_write_fsync_latency_p99_ms'):.2f} ms", ""],
        ["durable write throughput, 256 concurrent share-partitions writing small deltas",
         f"{rate(d('group_commit_writes_per_s (LocalPersister, median of 3)'))} writes/s vs "
         f"{rate(d('naive_fsync_per_write_writes_per_s'))} fsync-per-write: **{times(speedup)}**",
         meets(speedup, ">=", 20, "≥ 20×")],
        ["writes per fsync at saturation", f"**{num(per_fsync)}**", meets(per_fsync, ">=", 50, "≥ 50")],
        ["write latency under that load, p50 / p99",
         f"{d('latency_under_load_p50_ms'):.1f} / {d('latency_under_load_p99_ms'):.1f} ms = "
         f"{times(p99_ratio)} one fsync", meets(p99_ratio, "<=", 3, "p99 ≤ 3× one fsync")],
        ["write latency p99 with 8 writers", f"{times(sweep8)} one fsync", ""],
        ["CPU per durable write (the 256-writer loop is CPU-bound)",
         f"{num(cpu)} µs = {num(d('closed_loop_floor_us (no persister work, one fsync a group)'))} µs closed-loop "
         f"floor + **{num(d('persister_cpu_per_write_us (over that floor)'))} µs persister**",
         meets(cpu, "<=", 5, "≤ 5 µs")],
        [f"recovery: coordinator open of {count(r('records_replayed_before_prune'))} records over 10k keys "
         "(scan, decode, replay)",
         f"**{rate(open_rate)} records/s** ({r('coordinator_open_s'):.2f} s); the log scan alone "
         f"{rate(r('log_scan_records_per_s (SegmentLog.open: framing + CRC)'))}/s",
         meets(open_rate, ">=", 300e3, "≥ 300k/s")],
        ["recovery after pruning", f"replays {count(replayed)} records (live keys × (N+1) = {count(bound)}) instead "
         f"of {count(r('records_replayed_before_prune'))}, {r('coordinator_open_after_prune_s'):.2f} s",
         meets(replayed, "<=", bound, "bounded")],
        ["bytes on disk per delta vs its msgpack payload",
         f"{run.extra(on_disk, 'bytes_on_disk_per_delta')} vs {run.extra(on_disk, 'msgpack_payload_bytes_per_delta')}"
         f" B: **{num(overhead)} %** framing", meets(overhead, "<=", 20, "≤ 20 %")],
        ["frame codec twins: decode (framing, CRC, rows)",
         f"native {rate(decode[0])}/s, pure {rate(decode[1])}/s ({times(decode[0] / decode[1])})", ""],
    ]
    return table(["measure", "result", "target"], rows) + ["", run.stamp()]


def block_topic_store(run: Run) -> list[str]:
    rows = []
    batch_bytes = None
    for producers in (1, 8, 64):
        name = f"{TOPIC_STORE}test_durable_append_throughput[{producers}]"
        x = lambda key: run.extra(name, key)  # noqa: E731
        batch_bytes = x("batch_bytes")
        rows.append([str(producers), count(x("batches_per_s")), rate(x("records_per_s")), num(x("MB_per_s")),
                     times(x("speedup_vs_naive")), num(x("appends_per_group_commit"))])
    checks = run.extra(f"{TOPIC_STORE}test_produce_checks_throughput", "MB_per_s")
    stamp = f"{TOPIC_STORE}test_timestamp_check_throughput"
    reads = f"{TOPIC_STORE}test_read_and_recovery_throughput"
    lines = table(["producers (acks=-1, fsync on)", "batches/s", "records/s", "MB/s",
                   "vs one write + fsync per batch", "appends per group commit"], rows)
    lines += ["", f"Batches of 100 records, {batch_bytes / 1000:.1f} kB. Produce checks (framing, magic, CRC-32C) "
              f"{num(checks / 1000)} GB/s; the record timestamp check of one batch {num(run.extra(stamp, 'check_us_per_batch'))}"
              f" µs ({times(run.extra(stamp, 'check_vs_produce_checks'))} the produce checks of that batch); reads "
              f"{num(run.extra(reads, 'read_MB_per_s') / 1000)} GB/s; reopening a log "
              f"{rate(run.extra(reads, 'recovery_batches_per_s'))} batches/s. " + run.stamp()]
    return lines


def block_kafka_log(run: Run) -> list[str]:
    rows = []
    for key, label in (("segment log (fsync)", "`SegmentLog`, fsync on"),
                       ("kafka mock, rtt 0 ms", "`KafkaRecordLog` on librdkafka's 3-broker mock, 0 ms round trips"),
                       ("kafka mock, rtt 2 ms", "the same with 2 ms round trips")):
        x = lambda k: run.extra(KAFKA_LOG, f"{key}.{k}")  # noqa: E731
        per_txn = num(x("appends_per_txn")) if key.startswith("kafka") else ""
        rows.append([label, rate(x("writes_per_s")), f"{x('p50_ms'):.1f} / {x('p99_ms'):.1f} ms", per_txn,
                     f"{rate(x('recovery_records_per_s'))} records/s"])
    return table(["share-state log, 256 writers × 40 writes", "writes/s", "p50 / p99", "appends per transaction",
                  "recovery of that log"], rows) + ["", run.stamp()]


def block_audit(run: Run) -> list[str]:
    x = lambda key: run.extra(AUDIT, key)  # noqa: E731
    rounds = x("rounds (medians below)")
    session = x("spark_session_start_s")
    cold = x("spark_cold_audit_s (first job on a fresh session)")
    warm_each = ", ".join(f"{s:.2f}" for s in sorted(x("spark_warm_audit_s_each")))
    rows = [
        [f"single-process Python replay (median of {rounds})", f"{num(x('python_replay_s'))} s",
         rate(x("python_replay_records_per_s")), "1×"],
        [f"Spark on {x('spark_cores')} cores, warm session (median of {rounds}: {warm_each} s)",
         f"{num(x('spark_warm_audit_s'))} s", rate(x("spark_warm_records_per_s")),
         f"**{times(x('ratio_spark_warm_over_python'))}**"],
        ["Spark, the first job of a fresh JVM", f"{num(cold)} s", rate(x("spark_cold_records_per_s")),
         times(x("ratio_spark_cold_over_python"))],
        [f"Spark, counting the session start-up ({num(session)} s)", f"{num(session + cold)} s", "",
         times(x("ratio_spark_with_start_up_over_python"))],
    ]
    title = (f"audit of a generated log: {count(x('records'))} records, {x('log_mib')} MiB, {x('segments')} segments, "
             f"{count(x('share_partitions'))} share-partitions")
    return table([title, "time", "records/s", "vs Python"], rows) + ["", run.stamp()]


SOAK_MEASURES = (
    ("share_state_bytes", "`DIR/share-state` (the share-state log)", size),
    ("groups_bytes", "`DIR/groups` (group and offset records)", size),
    ("topics_bytes", "`DIR/topics` (topic logs)", size),
    ("rss_kb", "serve's resident memory (VmRSS)", lambda kb: size(kb * 1024)),
    ("fds", "serve's open file descriptors", count),
)


def block_soak(run: Run) -> list[str]:
    x = lambda key: run.extra(SOAK, key)  # noqa: E731
    growth, restart, counts = x("growth"), x("restart"), x("counts")
    rows = []
    for key, label, fmt in SOAK_MEASURES:
        m = growth[key]
        rows.append([label, fmt(m["first"]), f"**{fmt(m['last'])}**", times(m["growth"]) if m["growth"] else "",
                     f"{fmt(m['peak_first_half'])} → {fmt(m['peak_second_half'])}"
                     + (f" (**{times(m['peak_growth'])}**)" if m["peak_growth"] else "")])
    middle, end = restart["middle_copy"]["ready_s"], restart["end_copy"]["ready_s"]
    rows.append(["start of a second serve on a copy of the data directory (launch to readiness)",
                 f"{num(middle)} s (copy at the middle)", f"**{num(end)} s** (copy at the end)", times(end / middle),
                 ""])
    lines = table(["measure", f"after the warm-up (t = {x('warmup_sample_t_s'):.0f} s)",
                   f"at the end (t = {x('end_sample_t_s'):.0f} s)", "end / warm-up",
                   "peak in the first → second half after the warm-up"], rows)
    lines += ["", f"{count(x('soak_s'))} s of load: {count(x('produced_per_s'))} records/s produced (target "
              f"{count(x('target_records_per_s'))}), {count(x('share_acknowledged_per_s'))}/s acknowledged by the "
              f"share consumers, {count(x('group_consumed_per_s'))}/s read by the two consumer groups with "
              f"{num(x('group_commits_per_s'))} commits/s, {count(counts.get('churn_rounds', 0))} churn rounds. "
              f"Restart after SIGTERM at the end: " + ", ".join(f"{num(t)} s" for t in restart["restart_s"])
              + f" (the first start, on the empty directory: {num(restart['first_start_s'])} s). " + run.stamp()]
    return lines


BLOCKS: dict[str, Callable[[Run], list[str]]] = {
    "run": block_run,
    "e2e": block_e2e,
    "latency": block_latency,
    "security": block_security,
    "transactions": block_transactions,
    "tracker": block_tracker,
    "tracker-sweep": block_tracker_sweep,
    "partition": block_partition,
    "manager": block_manager,
    "coordinator": block_coordinator,
    "authorizer": block_authorizer,
    "persister": block_persister,
    "topic-store": block_topic_store,
    "kafka-log": block_kafka_log,
    "audit": block_audit,
    "soak": block_soak,
}


def render(readme: str, run: Run) -> tuple[str, list[str], dict[str, str]]:
    """The README with every block the run covers regenerated: (text, generated names, {kept name: why})."""
    generated: list[str] = []
    kept: dict[str, str] = {}
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if match["end"] != name:
            raise ValueError(f"bench:begin {name} is closed by bench:end {match['end']}")
        if name not in BLOCKS:
            raise ValueError(f"unknown benchmark block {name!r} (known: {', '.join(BLOCKS)})")
        if name in seen:
            raise ValueError(f"benchmark block {name!r} appears twice")
        seen.add(name)
        try:
            body = "\n".join(BLOCKS[name](run)) + "\n"
        except Missing as missing:
            kept[name] = str(missing)
            return match[0]
        generated.append(name)
        return f"<!-- bench:begin {name} -->\n{body}<!-- bench:end {name} -->"

    text = BLOCK.sub(replace, readme)
    stray = re.findall(r"<!-- bench:(?:begin|end) [\w-]+ -->", BLOCK.sub("", text))
    if stray:
        raise ValueError(f"unpaired benchmark markers: {stray}")
    return text, generated, kept


def load(json_path: Path, readme_path: Path) -> Run:
    data = json.loads(json_path.read_text(encoding="utf-8"))
    link = Path(os.path.relpath(json_path.resolve(), readme_path.resolve().parent)).as_posix()
    return Run(data, link)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="a pytest-benchmark --benchmark-json file")
    parser.add_argument("--readme", type=Path, default=DEFAULT_README)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the README is out of date")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a block is not covered by the run")
    args = parser.parse_args(argv)
    run = load(args.json, args.readme)
    before = args.readme.read_text(encoding="utf-8")
    after, generated, kept = render(before, run)
    print(f"readme_tables: generated {', '.join(generated) or 'nothing'} from {run.link}", file=sys.stderr)
    for name, why in kept.items():
        print(f"readme_tables: kept block {name!r} as it was (not in this run: {why})", file=sys.stderr)
    if args.check:
        if after != before:
            print(f"readme_tables: {args.readme} differs from what {run.link} gives", file=sys.stderr)
            return 1
    elif after != before:
        args.readme.write_text(after, encoding="utf-8")
    return 1 if args.strict and kept else 0


if __name__ == "__main__":
    sys.exit(main())
