"""End to end: real `confluent_kafka` ShareConsumers against `sharegroup serve` and against librdkafka's
own mock share-group broker (the mock cluster inside the confluent-kafka wheel), alternated in one run.

    python bench/bench_e2e.py [--records N] [--rounds R]      # prints a table
    python -m pytest bench/bench_e2e.py --benchmark-enable -q  # the same, one test a workload (`make bench`)

Workloads, each with N records of 100 B (50,000; 2,000 under SHAREGROUP_BENCH_SMOKE=1 or
`--benchmark-disable`):
  (a) explicit: 1 partition, 1 explicit-acknowledgement consumer;
  (b) explicit-3x3: 3 partitions, 3 explicit-acknowledgement consumers (aggregate rate);
  (c) implicit: 1 partition, 1 implicit-acknowledgement consumer.
The time runs from the first record received to the last acknowledgement confirmed (every consumer's
final `commit_sync` returned). Each consumer runs in a process of its own, and so does the producer of
the measured records, which stays at most PRODUCE_AHEAD records ahead of the consumers. The mock starts
a share-partition at the log end when it is first fetched, so on both peers the measured records are
produced only after every consumer that gets partitions has received a marker record (markers are told
by offset and not counted). `serve` runs as a subprocess on 127.0.0.1 (port 0, a fresh data directory);
the mock runs inside this process (librdkafka's C threads), which otherwise only waits. Every wait is
bounded.

Beside the rates, each run reports the CPU time per record spent by the consumer processes (from their
first record to their commit), the producer process and the broker (serve's process, or this process for
the mock) over the measured phase: on a machine with few cores these show what bounds the rate.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECORD_BYTES = 100
FULL_RECORDS = 50_000
SMOKE_RECORDS = 2_000
READY_TIMEOUT_S = 30.0
ASSIGN_TIMEOUT_S = 60.0  # the mock's heartbeat interval is 5 s; three members may need a few rounds
RUN_TIMEOUT_S = 120.0
MARKER = b"marker"
# The producer stays at most this many records ahead of the consumers, on both peers: the mock's partition
# log drops its oldest records when it grows (a run of 50,000 produced at once loses ~5,000 before they
# are delivered), and a share group cannot deliver what the log no longer holds.
PRODUCE_AHEAD = 5_000

# workload name -> (partitions, consumers, acknowledgement mode)
WORKLOADS = {
    "a-explicit-1x1": (1, 1, "explicit"),
    "b-explicit-3x3": (3, 3, "explicit"),
    "c-implicit-1x1": (1, 1, "implicit"),
}

# The serve side's timings for a quick group join (setup only; not part of the measured span).
SERVE_ARGS = (
    "--override", "group.share.min.heartbeat.interval.ms=100",
    "--override", "group.share.heartbeat.interval.ms=250",
)


class Unavailable(Exception):
    """A peer cannot run here (confluent-kafka missing)."""


def _kafka():
    try:
        import confluent_kafka
    except ImportError as exc:
        raise Unavailable(f"confluent-kafka is not installed ({exc}); the e2e benchmark needs its ShareConsumer"
                          " and mock cluster") from None
    if not hasattr(confluent_kafka, "ShareConsumer"):
        raise Unavailable(f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer (needs >= 2.16)")
    return confluent_kafka


# -- the two peers --------------------------------------------------------------------------------


class ServePeer:
    """`python -m sharegroup serve` on a fresh data directory (by default `--port 0` and `SERVE_ARGS`),
    stopped with SIGTERM. `listeners` maps each listener line's name to its HOST:PORT (when serve was given
    `listeners`); `bootstrap` is the address of the readiness line (the first listener)."""

    name = "serve"

    def __init__(self, serve_args: tuple[str, ...] = ("--port", "0", *SERVE_ARGS)) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="sharegroup-bench-")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._stderr = open(pathlib.Path(self._dir.name) / "stderr.txt", "w+")
        args = [sys.executable, "-m", "sharegroup", "serve", "--data", str(pathlib.Path(self._dir.name) / "data"),
                *serve_args]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True)
        lines: list[str] = []

        def read_until_ready() -> None:
            for line in self.proc.stdout:
                lines.append(line)
                if " listening on " in line:
                    return

        reader = threading.Thread(target=read_until_ready, daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_S)
        if not lines or " listening on " not in lines[-1]:
            self.close()
            raise RuntimeError(f"sharegroup serve did not become ready: {self.stderr_tail()}")
        self.bootstrap = lines[-1].split(" listening on ", 1)[1].split(" ", 1)[0]
        self.listeners = {line.split()[3]: "127.0.0.1:" + line.rsplit(":", 1)[1].strip()
                          for line in lines if " listener " in line}

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the serve process used so far (Linux /proc)."""
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stderr_tail(self) -> str:
        self._stderr.flush()
        return (pathlib.Path(self._dir.name) / "stderr.txt").read_text()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=20)
        self._stderr.close()
        self._dir.cleanup()


class MockPeer:
    """librdkafka's mock cluster, owned by a Producer (`test.mock.num.brokers=1`); its bootstrap address is
    read from the client's log line announcing it."""

    name = "mock"

    def __init__(self) -> None:
        ck = _kafka()
        lines: list[str] = []

        class _Capture(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                lines.append(record.getMessage())

        logger = logging.getLogger(f"sharegroup.bench.mock.{uuid.uuid4().hex}")
        logger.propagate = False
        logger.addHandler(_Capture())
        logger.setLevel(logging.DEBUG)
        self._owner = ck.Producer({"test.mock.num.brokers": 1, "logger": logger})
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any("replaced with" in text for text in lines):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the mock cluster did not announce its address: {lines[-5:]}")
            self._owner.poll(0.05)
        announced = next(text for text in lines if "replaced with" in text)
        self.bootstrap = announced.rsplit("replaced with", 1)[1].strip()

    def cpu_s(self) -> float:
        """CPU seconds of this process: the mock's broker threads (this process otherwise waits)."""
        return time.process_time()

    def close(self) -> None:
        self._owner.flush(5)
        self._owner = None


# -- one measured run -------------------------------------------------------------------------------

_SPAWN = multiprocessing.get_context("spawn")  # never fork a process that runs librdkafka threads


@dataclass
class RunResult:
    peer: str
    workload: str
    records: int
    seconds: float
    consumer_cpu_s: float = 0.0  # CPU of the consumer processes, each from its first record to its commit
    producer_cpu_s: float = 0.0  # CPU of the producer process of the measured records
    peer_cpu_s: float = 0.0  # CPU of the peer (serve's process, or the mock's threads in this one) meanwhile

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    def cpu_us_per_record(self) -> tuple[float, float, float]:
        """CPU microseconds per record of the consumers, the producer and the peer."""
        return tuple(s * 1e6 / self.records for s in (self.consumer_cpu_s, self.producer_cpu_s, self.peer_cpu_s))


@dataclass
class _Shared:
    """What the consumer processes, the producer process and this one share (spawn-safe arrays).

    `measured_from[p]` is the first offset of the measured records of partition p (every marker lies
    below it), valid once `ready` is 1; `markers[i]` is the bitmask of partitions consumer i received a
    marker from; `counts[i]` its distinct measured records; `first[i]` / `committed[i]` the
    `time.perf_counter()` (CLOCK_MONOTONIC, one clock for every process) of its first measured record
    and of the return of its final `commit_sync`; `cpu[i]` its CPU time (`time.process_time()`) over that
    span and `cpu[consumers]` the producer process's CPU time."""

    measured_from: Any
    ready: Any
    markers: Any
    counts: Any
    first: Any
    committed: Any
    stop: Any
    cpu: Any

    @classmethod
    def make(cls, partitions: int, consumers: int) -> "_Shared":
        return cls(_SPAWN.Array("q", partitions, lock=False), _SPAWN.Value("i", 0, lock=False),
                   _SPAWN.Array("q", consumers, lock=False), _SPAWN.Array("q", consumers, lock=False),
                   _SPAWN.Array("d", consumers, lock=False), _SPAWN.Array("d", consumers, lock=False),
                   _SPAWN.Value("i", 0, lock=False), _SPAWN.Array("d", consumers + 1, lock=False))


def _consume(bootstrap: str, group: str, topic: str, mode: str, index: int, target: int, shared: _Shared) -> None:
    """One consumer process: poll (acknowledging each record in explicit mode) until all consumers
    together received `target` measured records, then `commit_sync` and note the time."""
    import confluent_kafka

    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                              "share.acknowledgement.mode": mode, "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    explicit = mode == "explicit"
    seen: set[tuple[int, int]] = set()
    measured: list[int] | None = None
    counts = shared.counts
    cpu_from = time.process_time()
    deadline = time.monotonic() + ASSIGN_TIMEOUT_S + RUN_TIMEOUT_S
    try:
        while not shared.stop.value and time.monotonic() < deadline:
            messages = consumer.poll(0.1)
            now = time.perf_counter()
            if measured is None and shared.ready.value:
                measured = list(shared.measured_from)
            fresh = 0
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                if explicit:
                    consumer.acknowledge(message)
                key = (message.partition(), message.offset())
                if measured is None or key[0] >= len(measured) or key[1] < measured[key[0]]:  # a marker
                    shared.markers[index] |= 1 << key[0]
                    continue
                if not shared.first[index]:
                    shared.first[index] = now
                    cpu_from = time.process_time()
                if key not in seen:
                    fresh += 1
                    seen.add(key)
            if fresh:
                counts[index] += fresh
            if measured is not None and sum(counts) >= target:
                break
        consumer.commit_sync(RUN_TIMEOUT_S)
        shared.committed[index] = time.perf_counter()
        shared.cpu[index] = time.process_time() - cpu_from
    finally:
        consumer.close()


def _produce_records(bootstrap: str, topic: str, partitions: int, records: int, counts: Any, cpu: Any) -> None:
    """The measured records, round-robin over the partitions, at most PRODUCE_AHEAD ahead of what the
    consumers received (`counts`); exits 1 when they are not all delivered in time."""
    import confluent_kafka

    cpu_from = time.process_time()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                         "enable.idempotence": True})
    value = b"x" * RECORD_BYTES
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for i in range(records):
        producer.produce(topic, value=value, partition=i % partitions)
        if i % 500 == 499:
            producer.poll(0)
            while i + 1 - sum(counts) > PRODUCE_AHEAD and time.monotonic() < deadline:
                producer.poll(0.001)
    delivered = producer.flush(max(1.0, deadline - time.monotonic())) == 0
    cpu[len(cpu) - 1] = time.process_time() - cpu_from
    sys.exit(0 if delivered else 1)


class _Run:
    """One run: a topic, consumers in processes of their own (so no two share an interpreter lock), the
    markers, then the measured records from a producer process."""

    def __init__(self, peer: Any, workload: str, records: int) -> None:
        self.ck = _kafka()
        self.peer, self.workload, self.records = peer, workload, records
        self.partitions, self.consumers, self.mode = WORKLOADS[workload]
        self.topic = f"bench-{workload}-{uuid.uuid4().hex[:8]}"
        self.group = f"g-{self.topic}"
        self.shared = _Shared.make(self.partitions, self.consumers)
        self._marker_end = [0] * self.partitions
        self.working_members = self.consumers  # how many consumers the peer's assignor gives partitions to

    def _create_topic(self) -> None:
        if self.peer.name == "mock":
            # The mock's CreateTopics is unreachable through the admin client (it waits for a controller);
            # a produce auto-creates the topic with the mock's default partition count (4), of which only
            # the first `partitions` get records. Its range assignor splits 4 partitions over 3 members
            # as 2 + 2 + 0, so in (b) two mock consumers do the work.
            producer = self.ck.Producer({"bootstrap.servers": self.peer.bootstrap})
            producer.produce(self.topic, value=MARKER, partition=0)
            assert producer.flush(READY_TIMEOUT_S) == 0, "mock topic not created"
            total = len(producer.list_topics(self.topic, timeout=READY_TIMEOUT_S).topics[self.topic].partitions)
            assert total >= self.partitions, (total, self.partitions)
            per_member = -(-total // self.consumers)
            self.working_members = min(self.consumers, -(-total // per_member))
            return
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.peer.bootstrap})
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=self.partitions, replication_factor=1)],
                                      request_timeout=READY_TIMEOUT_S)
        futures[self.topic].result(READY_TIMEOUT_S)

    def run(self) -> RunResult:
        self._create_topic()
        shared = self.shared
        members = [_SPAWN.Process(target=_consume, daemon=True, args=(
            self.peer.bootstrap, self.group, self.topic, self.mode, i, self.records, shared))
            for i in range(self.consumers)]
        for member in members:
            member.start()
        producer = self.ck.Producer({"bootstrap.servers": self.peer.bootstrap, "linger.ms": 5, "acks": "all",
                                     "enable.idempotence": True})
        feeder = None
        try:
            # Markers until every consumer that gets partitions received one and every partition delivered
            # one: everyone is assigned and fetching, so the mock's share-partitions start before the
            # measured records.
            deadline = time.monotonic() + ASSIGN_TIMEOUT_S
            everything = (1 << self.partitions) - 1
            while True:
                covered = 0
                for bits in shared.markers:
                    covered |= bits
                marked = sum(1 for bits in shared.markers if bits)
                if marked >= self.working_members and covered & everything == everything:
                    break
                self._check(members, deadline, "consumers assigned")
                for partition in range(self.partitions):
                    producer.produce(self.topic, value=MARKER, partition=partition, on_delivery=self._marked)
                producer.flush(READY_TIMEOUT_S)
                time.sleep(0.3)
            shared.measured_from[:] = self._marker_end
            shared.ready.value = 1
            feeder = _SPAWN.Process(target=_produce_records, daemon=True, args=(
                self.peer.bootstrap, self.topic, self.partitions, self.records, shared.counts, shared.cpu))
            peer_cpu_from = self.peer.cpu_s()
            feeder.start()
            deadline = time.monotonic() + RUN_TIMEOUT_S
            for member in members:
                member.join(max(0.0, deadline - time.monotonic()))
            peer_cpu_s = self.peer.cpu_s() - peer_cpu_from
            feeder.join(max(1.0, deadline - time.monotonic()))
            self._check(members, deadline, f"{sum(shared.counts)} of {self.records} records")
            if any(m.is_alive() for m in members):
                raise TimeoutError(f"{self.peer.name} {self.workload}: {sum(shared.counts)} of {self.records}")
            if feeder.exitcode != 0:
                raise RuntimeError(f"the producer process failed (exit code {feeder.exitcode})")
            assert sum(shared.counts) == self.records, (list(shared.counts), self.records)
            first = min(t for t in shared.first if t)
            last = max(shared.committed)
            return RunResult(self.peer.name, self.workload, self.records, last - first,
                             sum(shared.cpu[:-1]), shared.cpu[len(shared.cpu) - 1], peer_cpu_s)
        finally:
            shared.stop.value = 1
            for process in [*members, *([feeder] if feeder is not None else [])]:
                process.join(RUN_TIMEOUT_S)
                if process.is_alive():
                    process.kill()
                    process.join(READY_TIMEOUT_S)

    def _marked(self, err: Any, message: Any) -> None:
        if err is None:
            self._marker_end[message.partition()] = max(self._marker_end[message.partition()], message.offset() + 1)

    def _check(self, members: list[Any], deadline: float, what: str) -> None:
        for i, member in enumerate(members):
            if member.exitcode not in (None, 0):
                raise RuntimeError(f"{self.peer.name}: consumer {i} failed (exit code {member.exitcode})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{self.peer.name} {self.workload}: timed out waiting for {what}")


def run_once(peer: Any, workload: str, records: int) -> RunResult:
    return _Run(peer, workload, records).run()


def compare(peers: dict[str, Any], workload: str, records: int, rounds: int) -> dict[str, list[RunResult]]:
    """`rounds` runs on each peer, alternated (serve, mock, serve, mock, ...)."""
    results: dict[str, list[RunResult]] = {name: [] for name in peers}
    for _ in range(rounds):
        for name, peer in peers.items():
            results[name].append(run_once(peer, workload, records))
    return results


def _cpu(result: RunResult) -> str:
    return " ".join(f"{us:.1f}" for us in result.cpu_us_per_record())


def best(results: list[RunResult]) -> RunResult:
    """The fastest of the runs (the one the table reports, with its CPU figures)."""
    return max(results, key=lambda r: r.records_per_s)


def table(rows: list[tuple[str, RunResult, RunResult]], records: int, rounds: int) -> str:
    """Records/s of both peers and their ratio, and the CPU spent per record in the same runs by the
    consumer processes (first record to commit), the producer process and the peer (the broker)."""
    load = os.getloadavg()
    out = [f"e2e: {records} records of {RECORD_BYTES} B, best of {rounds} alternated runs, "
           f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
           f"{'':<18} {'':>12} {'':>12} {'':>11}   CPU us/record: consumers, producer, broker",
           f"{'workload':<18} {'serve rec/s':>12} {'mock rec/s':>12} {'serve/mock':>11}   {'serve':<16}   {'mock':<16}"]
    for workload, serve, mock in rows:
        out.append(f"{workload:<18} {serve.records_per_s:>12,.0f} {mock.records_per_s:>12,.0f} "
                   f"{serve.records_per_s / mock.records_per_s:>10.1f}x   "
                   f"{_cpu(serve):<16}   {_cpu(mock):<16}")
    return "\n".join(out)


def extra_info(workload: str, serve: RunResult, mock: RunResult, results: dict[str, list[RunResult]], records: int,
               rounds: int) -> dict[str, Any]:
    """What the table prints, as numbers: the best run of each peer, their ratio, the CPU per record of
    those runs, and every run's rate."""
    partitions, consumers, mode = WORKLOADS[workload]
    info: dict[str, Any] = {"workload": workload, "partitions": partitions, "consumers": consumers, "mode": mode,
                            "records": records, "record_bytes": RECORD_BYTES, "rounds": rounds,
                            "serve_over_mock": round(serve.records_per_s / mock.records_per_s, 3)}
    for result in (serve, mock):
        info[f"{result.peer}_records_per_s"] = round(result.records_per_s)
        for party, us in zip(("consumers", "producer", "broker"), result.cpu_us_per_record()):
            info[f"{result.peer}_cpu_us_per_record_{party}"] = round(us, 3)
        info[f"{result.peer}_runs_records_per_s"] = [round(r.records_per_s) for r in results[result.peer]]
    return info


def record_count(disabled: bool = False, *, variable: str = "SHAREGROUP_BENCH_E2E_RECORDS",
                 full: int = FULL_RECORDS, smoke: int = SMOKE_RECORDS) -> int:
    """How many records a run uses: `smoke` for the smoke run (or timing disabled), else `variable`
    from the environment, else `full`."""
    if os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1" or disabled:
        return smoke
    return int(os.environ.get(variable, full))


# -- pytest-benchmark -------------------------------------------------------------------------------


def timing_disabled(config) -> bool:
    """Whether this pytest run has benchmark timing off (`--benchmark-disable` without `--benchmark-enable`):
    the smoke run, which uses small sizes and one round."""
    return config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)

try:
    import pytest
except ImportError:  # the script needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="module")
    def peers():
        try:
            _kafka()
        except Unavailable as exc:
            pytest.skip(str(exc))
        made = {"serve": ServePeer()}
        try:
            made["mock"] = MockPeer()
            yield made
        finally:
            for peer in made.values():
                peer.close()

    @pytest.mark.parametrize("workload", list(WORKLOADS))
    @pytest.mark.benchmark(group="e2e: serve vs librdkafka mock")
    def test_e2e_serve_vs_mock(request, benchmark, capsys, peers, workload):
        """Alternated runs on both peers, each timed from the first record received to the last
        acknowledgement confirmed; prints records/s for both and the ratio, and keeps them (with the CPU
        per record) in `benchmark.extra_info`, so `make bench`'s JSON holds them.

        The rates are not the pytest-benchmark timing: what is measured happens in consumer processes. The
        timing (one round) is the whole alternated comparison, set-up of every run included; only
        `extra_info` carries the numbers. `--benchmark-disable` (the smoke run) uses a small record count
        and one round.
        """
        config = request.config
        disabled = timing_disabled(config)
        records = record_count(disabled)
        rounds = 1 if disabled else 2
        results = benchmark.pedantic(compare, args=(peers, workload, records, rounds), rounds=1, iterations=1)
        serve, mock = best(results["serve"]), best(results["mock"])
        benchmark.extra_info.update(extra_info(workload, serve, mock, results, records, rounds))
        with capsys.disabled():
            print("\n" + table([(workload, serve, mock)], records, rounds))
        assert all(r.records == records for rs in results.values() for r in rs)
        assert serve.records_per_s > 0 and mock.records_per_s > 0
        assert all(cpu_s > 0 for r in (serve, mock) for cpu_s in (r.consumer_cpu_s, r.producer_cpu_s, r.peer_cpu_s))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=record_count())
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workload", choices=list(WORKLOADS), action="append")
    args = parser.parse_args(argv)
    try:
        _kafka()
    except Unavailable as exc:
        print(f"skipped: {exc}")
        return 0
    peers = {"serve": ServePeer()}
    rows = []
    try:
        peers["mock"] = MockPeer()
        for workload in args.workload or list(WORKLOADS):
            results = compare(peers, workload, args.records, args.rounds)
            rows.append((workload, best(results["serve"]), best(results["mock"])))
            print(f"  {workload}: " + ", ".join(f"{r.peer} {r.records_per_s:,.0f}/s" for rs in results.values()
                                                 for r in rs), flush=True)
    finally:
        for peer in peers.values():
            peer.close()
    print(table(rows, args.records, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
