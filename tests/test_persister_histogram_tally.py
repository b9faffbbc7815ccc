"""`persister.state_log_metrics.HistogramTally`: counting a group commit's latencies locally and adding them at
once exports exactly the series that one `observe` per value exports."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from persister.state_log_metrics import HistogramTally

BUCKETS = (0.001, 0.01, 0.1, 1.0)
# Values below, on and between the bounds, and above the last one (the +Inf bucket).
VALUES = [0.0, 0.0005, 0.001, 0.0010001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 30.0, 0.001]


def histogram(registry: CollectorRegistry):
    return Histogram("latency_seconds", "test", ["log"], buckets=BUCKETS, registry=registry).labels(log="a")


def samples(registry: CollectorRegistry) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for metric in registry.collect() for s in metric.samples if not s.name.endswith("_created")}


def test_a_flushed_tally_exports_what_one_observe_per_value_exports():
    observed, tallied = CollectorRegistry(), CollectorRegistry()
    direct = histogram(observed)
    for value in VALUES:
        direct.observe(value)
    tally = HistogramTally(histogram(tallied))
    for value in VALUES[:5]:
        tally.add(value)
    tally.flush()
    for value in VALUES[5:]:
        tally.add(value)
    assert samples(tallied) != samples(observed)  # nothing of the second group is visible before flush
    tally.flush()
    tally.flush()  # an empty flush adds nothing
    assert samples(tallied) == samples(observed)
    assert samples(tallied)[("latency_seconds_bucket", (("le", "0.001"), ("log", "a")))] == 4
    assert samples(tallied)[("latency_seconds_count", (("log", "a"),))] == len(VALUES)


def test_a_histogram_without_the_expected_internals_is_observed_value_by_value():
    class Plain:
        def __init__(self) -> None:
            self.values: list[float] = []

        def observe(self, value: float) -> None:
            self.values.append(value)

    plain = Plain()
    tally = HistogramTally(plain)
    for value in VALUES:
        tally.add(value)
    assert plain.values == []
    tally.flush()
    assert plain.values == VALUES
