"""End to end: one `confluent_kafka` ShareConsumer over SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT, one run.

    python bench/bench_security.py [--records N] [--rounds R]          # prints a table
    python -m pytest bench/bench_security.py --benchmark-enable -q      # the same (`make bench`)

One `sharegroup serve` subprocess with two listeners (SASL_SSL first, PLAINTEXT second; certificates
made by trustme in a temporary directory; one SCRAM-SHA-512 user from `--add-scram`). For each run a
fresh topic gets N records of 100 B (produced over PLAINTEXT before the clock starts), then one
implicit-acknowledgement ShareConsumer of a fresh group reads them all through one listener. The time
runs from the first record received to the return of the final `commit_sync`; the login happens before
(the consumer joins on a marker-free topic, so the first fetch already carries records). Runs alternate
SASL_SSL, PLAINTEXT, ... and the best of each is compared. N is 200,000 (2,000 under
SHAREGROUP_BENCH_SMOKE=1 or `--benchmark-disable`). Every wait is bounded.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench_e2e import SERVE_ARGS, ServePeer  # the same serve subprocess as the end-to-end benchmark
from bench_e2e import timing_disabled
from bench_e2e import record_count as e2e_record_count

RECORD_BYTES = 100
FULL_RECORDS = 200_000  # at ~1M records/s a shorter span is tens of ms: too short to compare
FULL_ROUNDS = 3
SMOKE_RECORDS = 2_000
RUN_TIMEOUT_S = 180.0
USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"


class Unavailable(Exception):
    """confluent-kafka (with ShareConsumer) or trustme is missing."""


def _modules() -> tuple[Any, Any]:
    try:
        import confluent_kafka
        import trustme
    except ImportError as exc:
        raise Unavailable(f"the security benchmark needs confluent-kafka and trustme ({exc})") from None
    if not hasattr(confluent_kafka, "ShareConsumer"):
        raise Unavailable("confluent-kafka has no ShareConsumer (needs >= 2.16)")
    return confluent_kafka, trustme


class SecuredServe(ServePeer):
    """`sharegroup serve` with a SASL_SSL and a PLAINTEXT listener on free ports (certificates made by
    trustme, one SCRAM-SHA-512 user), stopped with SIGTERM."""

    def __init__(self) -> None:
        _ck, trustme = _modules()
        self._certs = tempfile.TemporaryDirectory(prefix="sharegroup-bench-certs-")
        base = pathlib.Path(self._certs.name)
        ca = trustme.CA()
        (base / "server.pem").write_bytes(ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes())
        (base / "ca.pem").write_bytes(ca.cert_pem.bytes())
        self.ca_pem = str(base / "ca.pem")
        try:
            super().__init__((
                "--override", "listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                "--override", "ssl.keystore.type=PEM", "--override", f"ssl.keystore.location={base / 'server.pem'}",
                "--override", f"sasl.enabled.mechanisms={MECHANISM}",
                "--add-scram", f"{MECHANISM}=[name={USER},password={PASSWORD}]",
                *SERVE_ARGS, "--group-config", "share.auto.offset.reset=earliest"))
        except BaseException:
            self._certs.cleanup()
            raise

    def client_config(self, listener: str) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.listeners[listener]}
        if listener == "SASL_SSL":
            config.update({"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": USER,
                           "sasl.password": PASSWORD, "ssl.ca.location": self.ca_pem})
        return config

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._certs.cleanup()


@dataclass
class RunResult:
    listener: str
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def run_once(serve: SecuredServe, listener: str, records: int) -> RunResult:
    ck, _trustme = _modules()
    topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer({**serve.client_config("PLAINTEXT"), "linger.ms": 20, "batch.num.messages": 10_000})
    payload = b"x" * RECORD_BYTES
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=payload)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(RUN_TIMEOUT_S) == 0, "records not delivered"
    consumer = ck.ShareConsumer({**serve.client_config(listener), "group.id": f"g-{topic}", "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    received, first = 0, None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while received < records:
            assert time.monotonic() < deadline, f"{listener}: {received}/{records} records within {RUN_TIMEOUT_S}s"
            for message in consumer.poll(0.5):
                if message.error() is None:
                    if first is None:
                        first = time.perf_counter()
                    received += 1
        consumer.commit_sync()
        seconds = time.perf_counter() - first
    finally:
        consumer.close()
    return RunResult(listener, received, seconds)


def compare(serve: SecuredServe, records: int, rounds: int) -> dict[str, list[RunResult]]:
    results: dict[str, list[RunResult]] = {"SASL_SSL": [], "PLAINTEXT": []}
    for _ in range(rounds):
        for listener in results:
            results[listener].append(run_once(serve, listener, records))
    return results


def table(results: dict[str, list[RunResult]], records: int, rounds: int) -> str:
    load = os.getloadavg()
    secured = max(r.records_per_s for r in results["SASL_SSL"])
    plain = max(r.records_per_s for r in results["PLAINTEXT"])
    return "\n".join([
        f"security: 1 ShareConsumer, {records} records of {RECORD_BYTES} B, best of {rounds} alternated runs, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"{'listener':<32} {'records/s':>12}",
        f"{'SASL_SSL (SCRAM-SHA-512, TLS)':<32} {secured:>12,.0f}",
        f"{'PLAINTEXT':<32} {plain:>12,.0f}",
        f"{'SASL_SSL / PLAINTEXT':<32} {secured / plain:>11.2f}x",
    ])


def extra_info(results: dict[str, list[RunResult]], records: int, rounds: int) -> dict[str, Any]:
    """What the table prints, as numbers: the best run over each listener, their ratio, every run's rate."""
    secured = max(r.records_per_s for r in results["SASL_SSL"])
    plain = max(r.records_per_s for r in results["PLAINTEXT"])
    return {"records": records, "record_bytes": RECORD_BYTES, "rounds": rounds,
            "sasl_ssl_records_per_s": round(secured), "plaintext_records_per_s": round(plain),
            "sasl_ssl_over_plaintext": round(secured / plain, 3),
            "sasl_ssl_runs_records_per_s": [round(r.records_per_s) for r in results["SASL_SSL"]],
            "plaintext_runs_records_per_s": [round(r.records_per_s) for r in results["PLAINTEXT"]]}


def record_count(disabled: bool = False) -> int:
    return e2e_record_count(disabled, variable="SHAREGROUP_BENCH_SECURITY_RECORDS", full=FULL_RECORDS,
                            smoke=SMOKE_RECORDS)


try:
    import pytest
except ImportError:  # the script needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="module")
    def secured_serve():
        try:
            _modules()
        except Unavailable as exc:
            pytest.skip(str(exc))
        serve = SecuredServe()
        yield serve
        serve.close()

    @pytest.mark.benchmark(group="security: SASL_SSL vs PLAINTEXT")
    def test_share_consume_sasl_ssl_vs_plaintext(request, benchmark, capsys, secured_serve):
        """Alternated runs over both listeners; prints records/s for both and the ratio, and keeps them in
        `benchmark.extra_info`, so `make bench`'s JSON holds them.

        The rates are not the pytest-benchmark timing: the span measured is inside the consume loop (first
        record to the final commit). The timing (one round) is the whole alternated comparison, producing
        included; only `extra_info` carries the numbers. `--benchmark-disable` (the smoke run) uses a
        small record count and one round.
        """
        config = request.config
        disabled = timing_disabled(config)
        records = record_count(disabled)
        rounds = 1 if disabled else FULL_ROUNDS
        results = benchmark.pedantic(compare, args=(secured_serve, records, rounds), rounds=1, iterations=1)
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
        _modules()
    except Unavailable as exc:
        print(f"skipped: {exc}")
        return 0
    serve = SecuredServe()
    try:
        results = compare(serve, args.records, args.rounds)
    finally:
        serve.close()
    print(table(results, args.records, args.rounds))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
