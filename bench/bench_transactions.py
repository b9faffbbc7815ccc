"""Transactions: committed records/s of a `confluent_kafka` transactional producer (transactions of 100 and
of 1,000 records) vs an idempotent producer, against one `sharegroup serve`, in one run.

    python bench/bench_transactions.py [--records N] [--rounds R]      # prints a table
    python -m pytest bench/bench_transactions.py --benchmark-enable -q  # the same (`make bench`)

Each run writes N records of 100 B to a fresh one-partition topic. The idempotent producer (acks=all) is
timed from its first `produce` to the return of `flush` (every record acknowledged); a transactional
producer from its first `begin_transaction` to the return of its last `commit_transaction` (every
record committed: the coordinator's PrepareCommit and CompleteCommit are durable and the COMMIT marker
written). Before the clock starts each producer has delivered one warm-up record (the idempotent one) or
committed one warm-up transaction of one record (after `init_transactions`), so connections, producer
ids and the topic's metadata are not timed. The three producers alternate, best run
of each compared. N is 20,000 (2,000 under SHAREGROUP_BENCH_SMOKE=1 or `--benchmark-disable`). Every
wait is bounded.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench_e2e import SERVE_ARGS, ServePeer  # the same serve subprocess as the end-to-end benchmark
from bench_e2e import timing_disabled
from bench_e2e import record_count as e2e_record_count

RECORD_BYTES = 100
FULL_RECORDS = 20_000
SMOKE_RECORDS = 2_000
FULL_ROUNDS = 3
RUN_TIMEOUT_S = 180.0
# producer name -> records per transaction (0: the idempotent producer, no transactions)
PRODUCERS = {"idempotent": 0, "transactions-of-100": 100, "transactions-of-1000": 1000}


class Unavailable(Exception):
    """confluent-kafka is missing."""


def _kafka() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:
        raise Unavailable(f"the transactions benchmark needs confluent-kafka ({exc})") from None
    return confluent_kafka


@dataclass
class RunResult:
    producer: str
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def _create_topic(ck: Any, bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1)]).values():
        future.result(RUN_TIMEOUT_S)


def _produce(producer: Any, topic: str, payload: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=payload)
            return
        except BufferError:
            producer.poll(0.01)


def run_once(serve: ServePeer, name: str, records: int) -> RunResult:
    ck = _kafka()
    per_transaction = PRODUCERS[name]
    topic = f"bench-{name}-{uuid.uuid4().hex[:8]}"
    _create_topic(ck, serve.bootstrap, topic)
    config: dict[str, Any] = {"bootstrap.servers": serve.bootstrap, "linger.ms": 5, "batch.num.messages": 10_000,
                              "enable.idempotence": True}
    if per_transaction:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex}"
    producer = ck.Producer(config)
    payload = b"x" * RECORD_BYTES
    if per_transaction:
        producer.init_transactions(RUN_TIMEOUT_S)
        producer.begin_transaction()  # a warm-up transaction: the connection and the topic's metadata
        _produce(producer, topic, payload)
        producer.commit_transaction(RUN_TIMEOUT_S)
        start = time.perf_counter()
        for first in range(0, records, per_transaction):
            producer.begin_transaction()
            for _ in range(min(per_transaction, records - first)):
                _produce(producer, topic, payload)
            producer.commit_transaction(RUN_TIMEOUT_S)
    else:
        _produce(producer, topic, payload)  # a warm-up record: InitProducerId, the connection, the metadata
        assert producer.flush(RUN_TIMEOUT_S) == 0, "warm-up record not delivered"
        start = time.perf_counter()
        for _ in range(records):
            _produce(producer, topic, payload)
        assert producer.flush(RUN_TIMEOUT_S) == 0, "records not delivered"
    return RunResult(name, records, time.perf_counter() - start)


def compare(serve: ServePeer, records: int, rounds: int) -> dict[str, list[RunResult]]:
    results: dict[str, list[RunResult]] = {name: [] for name in PRODUCERS}
    for _ in range(rounds):
        for name in PRODUCERS:
            results[name].append(run_once(serve, name, records))
    return results


def best(results: dict[str, list[RunResult]], name: str) -> float:
    return max(r.records_per_s for r in results[name])


def table(results: dict[str, list[RunResult]], records: int, rounds: int) -> str:
    load = os.getloadavg()
    idempotent = best(results, "idempotent")
    lines = [f"transactions: {records} records of {RECORD_BYTES} B to 1 partition, best of {rounds} alternated runs, "
             f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
             f"{'producer':<24} {'committed records/s':>20} {'vs idempotent':>14}"]
    for name in PRODUCERS:
        lines.append(f"{name:<24} {best(results, name):>20,.0f} {best(results, name) / idempotent:>13.2f}x")
    return "\n".join(lines)


def extra_info(results: dict[str, list[RunResult]], records: int, rounds: int) -> dict[str, Any]:
    """What the table prints, as numbers: each producer's best rate, its ratio to the idempotent one, and
    every run's rate."""
    idempotent = best(results, "idempotent")
    info: dict[str, Any] = {"records": records, "record_bytes": RECORD_BYTES, "rounds": rounds}
    for name in PRODUCERS:
        key = name.replace("-", "_")
        info[f"{key}_records_per_s"] = round(best(results, name))
        info[f"{key}_over_idempotent"] = round(best(results, name) / idempotent, 3)
        info[f"{key}_runs_records_per_s"] = [round(r.records_per_s) for r in results[name]]
    return info


def record_count(disabled: bool = False) -> int:
    return e2e_record_count(disabled, variable="SHAREGROUP_BENCH_TXN_RECORDS", full=FULL_RECORDS,
                            smoke=SMOKE_RECORDS)


try:
    import pytest
except ImportError:  # the script needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="module")
    def serve():
        try:
            _kafka()
        except Unavailable as exc:
            pytest.skip(str(exc))
        peer = ServePeer(("--port", "0", *SERVE_ARGS))
        yield peer
        peer.close()

    @pytest.mark.benchmark(group="transactions: transactional vs idempotent producer")
    def test_transactional_vs_idempotent_producer(request, benchmark, capsys, serve):
        """Alternated runs of the three producers; prints committed records/s and the ratios to the
        idempotent producer, and keeps them in `benchmark.extra_info`, so `make bench`'s JSON holds them.

        The rates are not the pytest-benchmark timing (one round: the whole alternated comparison, topic
        creation included); only `extra_info` carries the numbers. `--benchmark-disable` (the smoke run)
        uses a small record count and one round.
        """
        config = request.config
        disabled = timing_disabled(config)
        records = record_count(disabled)
        rounds = 1 if disabled else FULL_ROUNDS
        results = benchmark.pedantic(compare, args=(serve, records, rounds), rounds=1, iterations=1)
        benchmark.extra_info.update(extra_info(results, records, rounds))
        with capsys.disabled():
            print("\n" + table(results, records, rounds))
        assert all(r.records == records for rs in results.values() for r in rs)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=record_count())
    parser.add_argument("--rounds", type=int, default=FULL_ROUNDS)
    args = parser.parse_args(argv)
    try:
        _kafka()
    except Unavailable as exc:
        print(f"skipped: {exc}")
        return 0
    serve = ServePeer(("--port", "0", *SERVE_ARGS))
    try:
        results = compare(serve, args.records, args.rounds)
    finally:
        serve.close()
    print(table(results, args.records, args.rounds))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
