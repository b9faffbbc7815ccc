"""Prometheus metrics of the durable state log: write latency, group commit sizes, fsyncs, bytes
appended, recovery time and the prune offset.

The metric objects are created once per `CollectorRegistry` and shared by every log in the process
that uses that registry, so opening two logs (or one log twice) never raises a duplicate-registration
error; each series is labelled with the log directory so two logs do not blur together. Logs use the
module's own `REGISTRY` unless given another one; the edges (layer 4) expose it (for example with
`prometheus_client.generate_latest(persister.state_log_metrics.REGISTRY)`) and tests read it directly.
"""

from __future__ import annotations

import bisect
import threading
import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["REGISTRY", "PerRegistry", "PersisterMetrics", "metrics_for", "HistogramTally"]

REGISTRY = CollectorRegistry(auto_describe=True)

# An fsync on a local SSD takes 0.1-10 ms; a write waits for about two of them under load.
_LATENCY_BUCKETS_S = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
_GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
_RECOVERY_BUCKETS_S = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class PersisterMetrics:
    """The persister's metric families in one registry; each is labelled by `log` (the directory)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.write_latency_seconds = Histogram(
            "sharegroup_persister_write_latency_seconds",
            "Time from a state-log append being queued to its records being durable (fsync'd).",
            ["log"],
            buckets=_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.group_commit_records = Histogram(
            "sharegroup_persister_group_commit_records",
            "Records written and made durable together by one group commit (one fsync).",
            ["log"],
            buckets=_GROUP_BUCKETS,
            registry=registry,
        )
        self.fsyncs = Counter(
            "sharegroup_persister_fsyncs",
            "fsync calls made by the state log (segment files and the directory).",
            ["log"],
            registry=registry,
        )
        self.appended_bytes = Counter(
            "sharegroup_persister_appended_bytes",
            "Bytes of record frames appended durably to the state log.",
            ["log"],
            registry=registry,
        )
        self.failed_group_commits = Counter(
            "sharegroup_persister_failed_group_commits",
            "Group commits that failed (every append in them failed and the bytes were truncated back).",
            ["log"],
            registry=registry,
        )
        self.recovery_seconds = Histogram(
            "sharegroup_persister_recovery_seconds",
            "Time to recover on open: 'scan' checks the segment files, 'replay' rebuilds the coordinator.",
            ["log", "stage"],
            buckets=_RECOVERY_BUCKETS_S,
            registry=registry,
        )
        self.recovered_records = Gauge(
            "sharegroup_persister_recovered_records",
            "Records between the log start and the log end found by the latest recovery.",
            ["log"],
            registry=registry,
        )
        self.prune_offset = Gauge(
            "sharegroup_persister_prune_offset",
            "The state log's start offset: everything below it has been pruned.",
            ["log"],
            registry=registry,
        )


class HistogramTally:
    """Observations of one histogram series counted locally and added to it at once by `flush`.

    A group commit resolves hundreds of appends; observing each one's latency through
    `Histogram.observe` takes a lock and a linear bucket search per append. The tally finds each bucket
    by bisection and, on `flush`, adds each bucket's count and the sum once: the exported series is the
    same as with one `observe` per value. It uses the child's bucket bounds and values (attributes of
    prometheus_client's Histogram); a histogram without them is observed value by value instead.
    """

    __slots__ = ("_child", "_bounds", "_counts", "_sum", "_values")

    def __init__(self, child) -> None:
        self._child = child
        bounds = getattr(child, "_upper_bounds", None)
        buckets = getattr(child, "_buckets", None)
        exact = bounds is not None and buckets is not None and len(bounds) == len(buckets)
        self._bounds = list(bounds) if exact and hasattr(child, "_sum") else None
        self._counts = [0] * len(self._bounds) if self._bounds is not None else []
        self._sum = 0.0
        self._values: list[float] = []  # the fallback's values

    def add(self, value: float) -> None:
        """Count one observation (not visible in the histogram before `flush`)."""
        if self._bounds is None:
            self._values.append(value)
            return
        self._counts[bisect.bisect_left(self._bounds, value)] += 1  # the first bound >= value, as observe
        self._sum += value

    def flush(self) -> None:
        """Add what was counted since the last flush to the histogram."""
        child = self._child
        if self._bounds is None:
            values, self._values = self._values, []
            for value in values:
                child.observe(value)
            return
        counts = self._counts
        if not any(counts):
            return
        child._sum.inc(self._sum)
        for bucket, count in zip(child._buckets, counts):
            if count:
                bucket.inc(count)
        self._counts = [0] * len(counts)
        self._sum = 0.0


class PerRegistry:
    """Builds a metrics object once per CollectorRegistry and hands back the same one after, so two
    logs (or two leaders) in one process never register a metric name twice."""

    def __init__(self, factory, default_registry: CollectorRegistry) -> None:
        self._factory = factory
        self._default = default_registry
        self._by_registry: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, registry: CollectorRegistry | None = None):
        registry = self._default if registry is None else registry
        with self._lock:
            metrics = self._by_registry.get(registry)
            if metrics is None:
                metrics = self._by_registry[registry] = self._factory(registry)
            return metrics


_metrics_for = PerRegistry(PersisterMetrics, REGISTRY)


def metrics_for(registry: CollectorRegistry | None = None) -> PersisterMetrics:
    """The persister's metrics in `registry` (default: this module's REGISTRY), created on first use."""
    return _metrics_for(registry)
