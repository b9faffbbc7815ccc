"""Latency a queue's users feel: real `confluent_kafka` clients against `sharegroup serve` and against
librdkafka's own mock cluster, alternated in one run (serve, mock, serve, mock, ...), with percentiles.

    python bench/bench_latency.py [--seconds S] [--rounds R] [--row NAME ...]   # prints the table
    python -m pytest bench/bench_latency.py --benchmark-enable -q                # one entry a row (`make bench`)

Rows (`ROWS`; every latency is taken on CLOCK_MONOTONIC, `time.perf_counter()`, one clock for every
process of the machine):
  produce-idempotent-100: one record at a time, idempotent acks=all, 100 records/s: produce() to its
      delivery report;
  produce-idempotent-2000: the same at 2,000 records/s, linger.ms=0;
  produce-acks1-2000: non-idempotent acks=1 at 2,000 records/s, linger.ms=0 (one request per record:
      librdkafka's default max.in.flight is a million);
  delivery-2000 / delivery-20000: produce() to a ShareConsumer's poll() returning the record, 3
      partitions and 3 consumers (each in a process of its own), the producer at 2,000 / 20,000
      records/s (idempotent, acks=all, linger.ms=0);
  commit-sync: one explicit-acknowledgement ShareConsumer: a batch polled, every record ACCEPTed, then
      `commit_sync()` timed;
  release-redelivery: a record RELEASEd (sent by the next poll) until the same offset is polled again.
Each row checks that 100 % of its records were delivered (produce rows: every delivery report without
error; delivery rows: every record received, by sequence number).

The mock starts a share-partition at the log end when it is first fetched, so the consumer rows first
produce marker records until every consumer received one (markers are not counted). serve runs as a
subprocess (`bench_e2e.ServePeer`); the mock inside this process (`bench_e2e.MockPeer`). Every wait is
bounded. Under SHAREGROUP_BENCH_SMOKE=1 or `--benchmark-disable` every row is a fraction of a second of
traffic and one round.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from bench_e2e import _SPAWN, MockPeer, ServePeer, Unavailable, _kafka
from bench_e2e import timing_disabled

FULL_SECONDS = 3.0
SMOKE_SECONDS = 0.3
TIMEOUT_S = 60.0
MARKER = b"marker"
VALUE_BYTES = 100
COMMIT_BATCHES = 200  # commit-sync: batches polled, acknowledged and committed (full run)
RELEASES = 200  # release-redelivery: records released and awaited (full run)
SMOKE_REPEATS = 10


@dataclass
class RowResult:
    """The latencies (seconds) one run of a row measured, and how many of its records arrived."""

    latencies_s: list[float]
    expected: int
    received: int
    extra: dict[str, Any] = field(default_factory=dict)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def delivered_fraction(self) -> float:
        return self.received / self.expected if self.expected else 1.0


def _create_topic(peer: Any, topic: str, partitions: int) -> None:
    """A topic of `partitions` partitions on serve; on the mock, auto-created by a produce (its default
    4 partitions; the rows use the first `partitions`)."""
    ck = _kafka()
    if peer.name == "mock":
        producer = ck.Producer({"bootstrap.servers": peer.bootstrap})
        producer.produce(topic, value=MARKER, partition=0)
        assert producer.flush(TIMEOUT_S) == 0, "mock topic not created"
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        request_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)


def _paced(rate_per_s: float, count: int, send: Callable[[int], None], poll: Callable[[float], Any]) -> None:
    """Call send(i) for i in range(count) at `rate_per_s` (a schedule, not a sleep per record: a late
    send is made at once), serving delivery reports in between: it polls while a millisecond or more
    is left and sleeps for less (librdkafka's poll timeout is in whole milliseconds: polling for less
    would spin a core that the broker under test needs on a small machine). So a delivery report is
    seen at most about a millisecond late at 100 records/s, and at most one send interval late at
    2,000 records/s and more."""
    start = time.perf_counter()
    interval = 1.0 / rate_per_s
    for i in range(count):
        send(i)
        poll(0)
        due = start + (i + 1) * interval
        while (wait := due - time.perf_counter()) > 0:
            if wait >= 0.001:
                poll(wait)
            else:
                time.sleep(wait)
                poll(0)


# -- producer rows ----------------------------------------------------------------------------------


def produce_row(peer: Any, rate_per_s: float, seconds: float, *, idempotent: bool) -> RowResult:
    """Records produced one at a time at `rate_per_s` to partition 0; each one's latency is its
    delivery report's arrival minus its produce() call."""
    ck = _kafka()
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    _create_topic(peer, topic, 1)
    config: dict[str, Any] = {"bootstrap.servers": peer.bootstrap, "linger.ms": 0}
    if idempotent:
        config.update({"enable.idempotence": True, "acks": "all"})
    else:
        config.update({"enable.idempotence": False, "acks": 1})
    producer = ck.Producer(config)
    latencies: list[float] = []
    errors: list[Any] = []
    value = b"x" * VALUE_BYTES

    def send(_i: int) -> None:
        sent = time.perf_counter()

        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                latencies.append(time.perf_counter() - sent)

        producer.produce(topic, value=value, partition=0, on_delivery=report)

    for _ in range(5):  # warm up: connections and the producer id
        send(0)
        producer.flush(TIMEOUT_S)
    latencies.clear()
    count = max(1, int(rate_per_s * seconds))
    _paced(rate_per_s, count, send, producer.poll)
    producer.flush(TIMEOUT_S)
    return RowResult(latencies, count, len(latencies), {"errors": len(errors)})


# -- delivery rows (produce -> ShareConsumer) ---------------------------------------------------------


def _share_member(bootstrap: str, group: str, topic: str, index: int, shared: Any) -> None:
    """A ShareConsumer process: marks `seen[index]` when it got a marker; for every measured record (value
    b"<seq> <perf_counter at produce>") stores its latency at `latency[seq]`."""
    import confluent_kafka

    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 2 * TIMEOUT_S
    try:
        while not shared["stop"].value and time.monotonic() < deadline:
            messages = consumer.poll(0.05)
            now = time.perf_counter()
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                value = message.value()
                if value == MARKER:
                    shared["seen"][index] = 1
                    continue
                seq, sent = value.split(b" ", 1)
                shared["latency"][int(seq)] = now - float(sent)
    finally:
        consumer.close()


def delivery_row(peer: Any, rate_per_s: float, seconds: float, partitions: int = 3, consumers: int = 3) -> RowResult:
    """Records produced round-robin over `partitions` at `rate_per_s`; each one's latency is the moment a
    ShareConsumer's poll() returned it minus its produce() call."""
    ck = _kafka()
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    _create_topic(peer, topic, partitions)
    count = max(1, int(rate_per_s * seconds))
    shared = {"stop": _SPAWN.Value("i", 0, lock=False), "seen": _SPAWN.Array("i", consumers, lock=False),
              "latency": _SPAWN.Array("d", count, lock=False)}
    members = [_SPAWN.Process(target=_share_member, daemon=True,
                              args=(peer.bootstrap, f"g-{topic}", topic, i, shared)) for i in range(consumers)]
    for member in members:
        member.start()
    producer = ck.Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 0, "enable.idempotence": True,
                            "acks": "all"})
    try:
        # Markers on every partition (the mock's 4 included) until the consumers that get partitions
        # received one: every member is assigned and fetching.
        deadline = time.monotonic() + TIMEOUT_S
        total = len(producer.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)
        working = min(consumers, total)
        if peer.name == "mock":  # its range assignor: 4 partitions over 3 members is 2 + 2 + 0
            per_member = -(-total // consumers)
            working = min(consumers, -(-total // per_member))
        while sum(1 for s in shared["seen"] if s) < working:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{peer.name}: consumers not assigned")
            if any(m.exitcode not in (None, 0) for m in members):
                raise RuntimeError(f"{peer.name}: a consumer failed")
            for partition in range(total):
                producer.produce(topic, value=MARKER, partition=partition)
            producer.flush(TIMEOUT_S)
            time.sleep(0.3)

        def send(i: int) -> None:
            producer.produce(topic, value=b"%d %.9f" % (i, time.perf_counter()), partition=i % partitions)

        _paced(rate_per_s, count, send, producer.poll)
        producer.flush(TIMEOUT_S)
        latency = shared["latency"]
        deadline = time.monotonic() + TIMEOUT_S
        while sum(1 for x in latency if x > 0) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        latencies = [x for x in latency if x > 0]
        return RowResult(latencies, count, len(latencies))
    finally:
        shared["stop"].value = 1
        for member in members:
            member.join(TIMEOUT_S)
            if member.is_alive():
                member.kill()
                member.join(TIMEOUT_S)


# -- acknowledgement rows ----------------------------------------------------------------------------


class _OneConsumer:
    """One explicit-acknowledgement ShareConsumer on a fresh 1-partition topic, fetching (a marker
    received) before any measured record is produced."""

    def __init__(self, peer: Any) -> None:
        ck = _kafka()
        self.ck = ck
        self.topic = f"lat-{uuid.uuid4().hex[:8]}"
        _create_topic(peer, self.topic, 1)
        self.producer = ck.Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 0})
        self.consumer = ck.ShareConsumer({"bootstrap.servers": peer.bootstrap, "group.id": f"g-{self.topic}",
                                          "share.acknowledgement.mode": "explicit"})
        self.consumer.subscribe([self.topic])
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            self.produce([MARKER])
            messages = self.poll_until(lambda m: True, 0.5)
            if any(m.value() == MARKER for m in messages):
                for m in messages:
                    self.consumer.acknowledge(m)
                self.consumer.commit_sync(TIMEOUT_S)
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{peer.name}: the share consumer got no marker")

    def produce(self, values: list[bytes]) -> None:
        for value in values:
            self.producer.produce(self.topic, value=value, partition=0)
        assert self.producer.flush(TIMEOUT_S) == 0

    def poll_until(self, wanted: Callable[[Any], bool], timeout_s: float = TIMEOUT_S) -> list[Any]:
        """Poll until a poll returns a message `wanted` accepts (every message of that poll returned), or
        `timeout_s` passes (an empty list)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            messages = self.consumer.poll(0.05)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
            if any(wanted(m) for m in messages):
                return messages
        return []

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(TIMEOUT_S)


def commit_row(peer: Any, repeats: int) -> RowResult:
    """`repeats` times: 10 records produced, polled, each ACCEPTed, then commit_sync() timed."""
    one = _OneConsumer(peer)
    latencies: list[float] = []
    received = 0
    try:
        for i in range(repeats):
            one.produce([b"c%d-%d" % (i, j) for j in range(10)])
            got: list[Any] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 10 and time.monotonic() < deadline:
                got += [m for m in one.poll_until(lambda m: True, 1.0) if m.value() != MARKER]
                for message in got:
                    one.consumer.acknowledge(message)
                if len(got) < 10:  # more of the batch to come: acknowledge what came so far
                    one.consumer.commit_sync(TIMEOUT_S)
            received += min(10, len(got))
            started = time.perf_counter()
            one.consumer.commit_sync(TIMEOUT_S)
            latencies.append(time.perf_counter() - started)
    finally:
        one.close()
    return RowResult(latencies, 10 * repeats, received)


def release_row(peer: Any, repeats: int) -> RowResult:
    """`repeats` times: one record polled and RELEASEd; timed from the release to the poll that returns
    the same offset again (which then ACCEPTs it)."""
    one = _OneConsumer(peer)
    latencies: list[float] = []
    received = 0
    try:
        for i in range(repeats):
            value = b"r%d" % i
            one.produce([value])
            first = [m for m in one.poll_until(lambda m: m.value() == value) if m.value() == value]
            if not first:
                continue
            offset = first[0].offset()
            one.consumer.acknowledge(first[0], one.ck.AcknowledgeType.RELEASE)
            started = time.perf_counter()
            again = one.poll_until(lambda m: m.offset() == offset)
            if again:
                latencies.append(time.perf_counter() - started)
                received += 1
            for message in again:
                one.consumer.acknowledge(message)
            one.consumer.commit_sync(TIMEOUT_S)
    finally:
        one.close()
    return RowResult(latencies, repeats, received)


# -- the rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    run: Callable[[Any, float], RowResult]  # (peer, seconds of traffic) -> result
    quantiles: tuple[float, ...] = (0.5, 0.99)


def _repeats(seconds: float, full: int) -> int:
    return SMOKE_REPEATS if seconds <= SMOKE_SECONDS else full


ROWS: dict[str, Row] = {
    "produce-idempotent-100": Row("one record, idempotent acks=all, 100 records/s: produce → delivery report",
                                  lambda p, s: produce_row(p, 100, max(s, 1.0), idempotent=True)),
    "produce-idempotent-2000": Row("idempotent acks=all, 2,000 records/s, linger.ms=0: delivery report",
                                   lambda p, s: produce_row(p, 2000, s, idempotent=True)),
    "produce-acks1-2000": Row("acks=1, 2,000 requests/s on one connection, linger.ms=0: delivery report",
                              lambda p, s: produce_row(p, 2000, s, idempotent=False)),
    "delivery-2000": Row("produce → ShareConsumer delivery, 2,000 records/s (3 partitions, 3 consumers)",
                         lambda p, s: delivery_row(p, 2000, s)),
    "delivery-20000": Row("the same at 20,000 records/s", lambda p, s: delivery_row(p, 20000, s)),
    "commit-sync": Row("commit_sync after acknowledging a batch of 10",
                       lambda p, s: commit_row(p, _repeats(s, COMMIT_BATCHES))),
    "release-redelivery": Row("redelivery after RELEASE", lambda p, s: release_row(p, _repeats(s, RELEASES)),
                              (0.5,)),
}


def compare(peers: dict[str, Any], row: str, seconds: float, rounds: int) -> dict[str, list[RowResult]]:
    """`rounds` runs of `row` on each peer, alternated (serve, mock, serve, mock, ...)."""
    results: dict[str, list[RowResult]] = {name: [] for name in peers}
    for _ in range(rounds):
        for name, peer in peers.items():
            results[name].append(ROWS[row].run(peer, seconds))
    return results


def merged(results: list[RowResult]) -> RowResult:
    """The rounds of one peer taken together (their latencies pooled)."""
    return RowResult([x for r in results for x in r.latencies_s], sum(r.expected for r in results),
                     sum(r.received for r in results))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def describe(row: str, result: RowResult) -> str:
    quantiles = " / ".join(_ms(result.quantile(q)) for q in ROWS[row].quantiles)
    return f"{quantiles} ({result.delivered_fraction:.0%})"


def table(results: dict[str, dict[str, list[RowResult]]], seconds: float, rounds: int) -> str:
    load = os.getloadavg()
    out = [f"latency: {seconds:g} s of traffic a run, {rounds} alternated rounds, {os.cpu_count()} CPUs, "
           f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; p50 / p99 (median only where one number), "
           f"(delivered)",
           f"{'row':<26} {'serve':>28} {'mock':>28}"]
    for row, by_peer in results.items():
        out.append(f"{row:<26} {describe(row, merged(by_peer['serve'])):>28} {describe(row, merged(by_peer['mock'])):>28}")
    return "\n".join(out)


def extra_info(row: str, results: dict[str, list[RowResult]], seconds: float, rounds: int) -> dict[str, Any]:
    info: dict[str, Any] = {"row": row, "label": ROWS[row].label, "seconds": seconds, "rounds": rounds}
    for peer, runs in results.items():
        pooled = merged(runs)
        for q in ROWS[row].quantiles:
            info[f"{peer}_p{round(q * 100)}_ms"] = round(pooled.quantile(q) * 1e3, 3)
        info[f"{peer}_delivered"] = pooled.received
        info[f"{peer}_expected"] = pooled.expected
    return info


def traffic_seconds(disabled: bool = False) -> float:
    if os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1" or disabled:
        return SMOKE_SECONDS
    return float(os.environ.get("SHAREGROUP_BENCH_LATENCY_SECONDS", FULL_SECONDS))


def open_peers() -> dict[str, Any]:
    made: dict[str, Any] = {"serve": ServePeer()}
    try:
        made["mock"] = MockPeer()
    except BaseException:
        made["serve"].close()
        raise
    return made


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
        made = open_peers()
        try:
            yield made
        finally:
            for peer in made.values():
                peer.close()

    @pytest.mark.parametrize("row", list(ROWS))
    @pytest.mark.benchmark(group="latency: serve vs librdkafka mock")
    def test_latency_serve_vs_mock(request, benchmark, capsys, peers, row):
        """One row, alternated on both peers; its percentiles (ms) and delivered counts go to
        `benchmark.extra_info` (the pytest-benchmark timing is the whole comparison, set-up included).
        Every record must arrive on both peers."""
        config = request.config
        disabled = timing_disabled(config)
        seconds = traffic_seconds(disabled)
        rounds = 1 if disabled else 2
        results = benchmark.pedantic(compare, args=(peers, row, seconds, rounds), rounds=1, iterations=1)
        benchmark.extra_info.update(extra_info(row, results, seconds, rounds))
        with capsys.disabled():
            print("\n" + table({row: results}, seconds, rounds))
        for peer, runs in results.items():
            pooled = merged(runs)
            assert pooled.received == pooled.expected, (peer, pooled.received, pooled.expected)
            assert all(r.extra.get("errors", 0) == 0 for r in runs), peer


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=traffic_seconds())
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--row", choices=list(ROWS), action="append")
    args = parser.parse_args(argv)
    try:
        peers = open_peers()
    except Unavailable as exc:
        print(f"bench_latency: {exc}", file=sys.stderr)
        return 2
    try:
        results = {row: compare(peers, row, args.seconds, args.rounds) for row in args.row or ROWS}
    finally:
        for peer in peers.values():
            peer.close()
    print(table(results, args.seconds, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
