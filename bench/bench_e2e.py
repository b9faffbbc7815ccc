"""End to end: real `confluent_kafka` ShareConsumers against `sharegroup serve` and against librdkafka's
own mock share-group broker (the mock cluster inside the confluent-kafka wheel), alternated in one run.

    python bench/bench_e2e.py [--records N] [--rounds R]      # prints a table
    python -m pytest bench/bench_e2e.py --benchmark-enable -q  # the same, as pytest-benchmark entries

Workloads, each with N records of 100 B (50,000; 2,000 under SHAREGROUP_BENCH_SMOKE=1 or
`--benchmark-disable`):
  (a) explicit: 1 partition, 1 explicit-acknowledgement consumer;
  (b) explicit-3x3: 3 partitions, 3 explicit-acknowledgement consumers (aggregate rate);
  (c) implicit: 1 partition, 1 implicit-acknowledgement consumer.
The time runs from the first record received to the last acknowledgement confirmed (every consumer's
final `commit_sync` returned). The producer runs at most PRODUCE_AHEAD records ahead of the consumers. The mock starts a share-partition at the log end when it is first fetched,
so on both peers the records are produced only after every consumer has received a marker record from
its partitions (markers are not counted). `serve` runs as a subprocess on 127.0.0.1 (port 0, a fresh data
directory); the mock runs inside this process (librdkafka's C threads), which costs this process CPU the
serve runs do not: the comparison favours the mock, if anything. Every wait is bounded.
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
from dataclasses import dataclass, field
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
    """`python -m sharegroup serve --port 0` on a fresh data directory, stopped with SIGTERM."""

    name = "serve"

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="sharegroup-bench-")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._stderr = open(pathlib.Path(self._dir.name) / "stderr.txt", "w+")
        args = [sys.executable, "-m", "sharegroup", "serve", "--port", "0", "--data",
                str(pathlib.Path(self._dir.name) / "data"), *SERVE_ARGS]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_S)
        if not line or " listening on " not in line[0]:
            self.close()
            raise RuntimeError(f"sharegroup serve did not become ready: {self.stderr_tail()}")
        self.bootstrap = line[0].split(" listening on ", 1)[1].split(" ", 1)[0]

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

    def close(self) -> None:
        self._owner.flush(5)
        self._owner = None


# -- one measured run -------------------------------------------------------------------------------


@dataclass
class _Consumer:
    """One consumer thread's state: what it received (unique (partition, offset)) and when."""

    index: int
    consumer: Any
    explicit: bool
    markers: set = field(default_factory=set)
    first_record_s: float | None = None
    committed_s: float | None = None
    error: BaseException | None = None


@dataclass
class RunResult:
    peer: str
    workload: str
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


class _Run:
    def __init__(self, peer: Any, workload: str, records: int) -> None:
        self.ck = _kafka()
        self.peer, self.workload, self.records = peer, workload, records
        self.partitions, consumers, mode = WORKLOADS[workload]
        self.topic = f"bench-{workload}-{uuid.uuid4().hex[:8]}"
        self.group = f"g-{self.topic}"
        self._lock = threading.Lock()
        self._seen: set[tuple[int, int]] = set()
        self._received = 0
        self._shared_received: Any = None  # the count the producer process reads (PRODUCE_AHEAD)
        self._stop = threading.Event()
        self._done = threading.Event()
        self.members = [_Consumer(i, None, mode == "explicit") for i in range(consumers)]
        self._mode = mode
        # partition -> first offset of the measured records (every marker lies below it); None until the
        # markers are done. Telling markers by offset keeps the consumer loop from copying values.
        self._measured_from: list[int] | None = None
        self._marker_end = [0] * self.partitions
        self.working_members = consumers  # how many consumers the peer's assignor gives partitions to

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
            per_member = -(-total // len(self.members))
            self.working_members = min(len(self.members), -(-total // per_member))
            return
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.peer.bootstrap})
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=self.partitions, replication_factor=1)],
                                      request_timeout=READY_TIMEOUT_S)
        futures[self.topic].result(READY_TIMEOUT_S)

    def _consume(self, member: _Consumer) -> None:
        consumer = member.consumer
        try:
            while not self._stop.is_set():
                messages = consumer.poll(0.1)
                now = time.perf_counter()
                fresh = 0
                measured = self._measured_from
                for message in messages:
                    if message.error() is not None:
                        raise RuntimeError(str(message.error()))
                    if member.explicit:
                        consumer.acknowledge(message)
                    key = (message.partition(), message.offset())
                    if measured is None or key[1] < measured[key[0]]:  # a marker
                        member.markers.add(key[0])
                        continue
                    if member.first_record_s is None:
                        member.first_record_s = now
                    if key not in self._seen:
                        fresh += 1
                        self._seen.add(key)  # set.add is atomic under the GIL
                if fresh:
                    with self._lock:
                        self._received += fresh
                        if self._shared_received is not None:
                            self._shared_received.value = self._received
                        if self._received >= self.records:
                            self._done.set()
                if self._done.is_set():
                    break
            consumer.commit_sync(RUN_TIMEOUT_S)
            member.committed_s = time.perf_counter()
        except BaseException as exc:  # reported by the main thread
            member.error = exc
            self._done.set()

    def run(self) -> RunResult:
        ck = self.ck
        self._create_topic()
        for member in self.members:
            member.consumer = ck.ShareConsumer({
                "bootstrap.servers": self.peer.bootstrap, "group.id": self.group,
                "share.acknowledgement.mode": self._mode, "fetch.wait.max.ms": 100})
            member.consumer.subscribe([self.topic])
        threads = [threading.Thread(target=self._consume, args=(m,), daemon=True) for m in self.members]
        for thread in threads:
            thread.start()
        producer = ck.Producer({"bootstrap.servers": self.peer.bootstrap, "linger.ms": 5, "acks": "all",
                                "enable.idempotence": True})
        try:
            # Markers until every consumer received one and every partition delivered one: everyone is
            # assigned and fetching, so the mock's share-partitions start before the measured records.
            deadline = time.monotonic() + ASSIGN_TIMEOUT_S
            while True:
                covered = set().union(*(m.markers for m in self.members))
                marked = sum(1 for m in self.members if m.markers)
                if marked >= self.working_members and len(covered) == self.partitions:
                    break
                self._check(threads, deadline, "consumers assigned")
                for partition in range(self.partitions):
                    producer.produce(self.topic, value=MARKER, partition=partition, on_delivery=self._marked)
                producer.flush(READY_TIMEOUT_S)
                self._done.wait(0.3)
            self._measured_from = list(self._marker_end)
            # The records come from a producer process of their own, so producing does not compete with
            # the consumer threads for this process's interpreter lock.
            received = _SPAWN.Value("q", 0, lock=False)
            self._shared_received = received
            feeder = _SPAWN.Process(target=_produce_records, daemon=True, args=(
                self.peer.bootstrap, self.topic, self.partitions, self.records, received))
            feeder.start()
            feeder.join(RUN_TIMEOUT_S)
            if feeder.exitcode != 0:
                feeder.kill()
                raise RuntimeError(f"the producer process failed (exit code {feeder.exitcode})")
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while not self._done.wait(0.2):
                self._check(threads, deadline, f"{self._received} of {self.records} records")
            for thread in threads:
                thread.join(RUN_TIMEOUT_S)
            self._check(threads, deadline, "final commit")
            if any(t.is_alive() for t in threads):
                raise RuntimeError("a consumer did not finish its final commit")
            assert len(self._seen) == self.records, (len(self._seen), self.records)
            first = min(m.first_record_s for m in self.members if m.first_record_s is not None)
            last = max(m.committed_s for m in self.members)
            return RunResult(self.peer.name, self.workload, self.records, last - first)
        finally:
            self._stop.set()
            for thread in threads:
                thread.join(RUN_TIMEOUT_S)
            for member in self.members:
                try:
                    member.consumer.close()
                except Exception:  # closing is best effort after a failure
                    pass

    def _marked(self, err: Any, message: Any) -> None:
        if err is None:
            self._marker_end[message.partition()] = max(self._marker_end[message.partition()], message.offset() + 1)

    def _check(self, threads: list[threading.Thread], deadline: float, what: str) -> None:
        for member in self.members:
            if member.error is not None:
                raise RuntimeError(f"{self.peer.name}: consumer {member.index} failed") from member.error
        if time.monotonic() > deadline:
            raise TimeoutError(f"{self.peer.name} {self.workload}: timed out waiting for {what}")


_SPAWN = multiprocessing.get_context("spawn")  # never fork a process that runs librdkafka threads


def _produce_records(bootstrap: str, topic: str, partitions: int, records: int, received: Any) -> None:
    """The measured records, round-robin over the partitions, at most PRODUCE_AHEAD ahead of `received`
    (the consumers' count); exits 1 when they are not all delivered in time."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                         "enable.idempotence": True})
    value = b"x" * RECORD_BYTES
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for i in range(records):
        producer.produce(topic, value=value, partition=i % partitions)
        if i % 500 == 499:
            producer.poll(0)
            while i + 1 - received.value > PRODUCE_AHEAD and time.monotonic() < deadline:
                producer.poll(0.001)
    sys.exit(0 if producer.flush(max(1.0, deadline - time.monotonic())) == 0 else 1)


def run_once(peer: Any, workload: str, records: int) -> RunResult:
    return _Run(peer, workload, records).run()


def compare(peers: dict[str, Any], workload: str, records: int, rounds: int) -> dict[str, list[RunResult]]:
    """`rounds` runs on each peer, alternated (serve, mock, serve, mock, ...)."""
    results: dict[str, list[RunResult]] = {name: [] for name in peers}
    for _ in range(rounds):
        for name, peer in peers.items():
            results[name].append(run_once(peer, workload, records))
    return results


def best_rate(results: list[RunResult]) -> float:
    return max(r.records_per_s for r in results)


def table(rows: list[tuple[str, float, float]], records: int, rounds: int) -> str:
    load = os.getloadavg()
    out = [f"e2e: {records} records of {RECORD_BYTES} B, best of {rounds} alternated runs, "
           f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
           f"{'workload':<18} {'serve rec/s':>12} {'mock rec/s':>12} {'serve/mock':>11}"]
    for workload, serve, mock in rows:
        out.append(f"{workload:<18} {serve:>12,.0f} {mock:>12,.0f} {serve / mock:>10.1f}x")
    return "\n".join(out)


def record_count(disabled: bool = False) -> int:
    if os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1" or disabled:
        return SMOKE_RECORDS
    return int(os.environ.get("SHAREGROUP_BENCH_E2E_RECORDS", FULL_RECORDS))


# -- pytest-benchmark -------------------------------------------------------------------------------

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
    def test_e2e_serve_vs_mock(benchmark, peers, workload):
        """Alternated runs on both peers; the benchmark's time is the serve side's best run, the mock's
        rate and the ratio go to extra_info (and are printed)."""
        records = record_count(benchmark.disabled)
        rounds = 1 if benchmark.disabled else 2
        results = compare(peers, workload, records, rounds)
        serve, mock = best_rate(results["serve"]), best_rate(results["mock"])
        benchmark.extra_info.update(records=records, serve_records_per_s=round(serve),
                                    mock_records_per_s=round(mock), ratio=round(serve / mock, 2),
                                    load_average=os.getloadavg()[0])
        best = min(results["serve"], key=lambda r: r.seconds)
        benchmark.pedantic(lambda: best.seconds, rounds=1, iterations=1)
        print("\n" + table([(workload, serve, mock)], records, rounds))
        assert all(r.records == records for rs in results.values() for r in rs)


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
            rows.append((workload, best_rate(results["serve"]), best_rate(results["mock"])))
            print(f"  {workload}: " + ", ".join(f"{r.peer} {r.records_per_s:,.0f}/s" for rs in results.values()
                                                 for r in rs), flush=True)
    finally:
        for peer in peers.values():
            peer.close()
    print(table(rows, args.records, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
