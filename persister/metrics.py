"""Prometheus metrics of the durable state log: write latency, group commit sizes, fsyncs, bytes
appended, recovery time and the prune offset.

The metric objects are created once per `CollectorRegistry` and shared by every log in the process
that uses that registry, so opening two logs (or one log twice) never raises a duplicate-registration
error; each series is labelled with the log directory so two logs do not blur together. Logs use the
module's own `REGISTRY` unless given another one; the edges (layer 4) expose it (for example with
`prometheus_client.generate_latest(persister.metrics.REGISTRY)`) and tests read it directly.
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["REGISTRY", "PerRegistry", "PersisterMetrics", "metrics_for"]

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
