"""Prometheus metrics of share-state maintenance in `sharegroup serve`: runs, failures and duration of the
prune job and the cold-partition snapshot job, what the prune released (records, segment files, bytes),
the snapshots written and Kafka's `last-redundant-offset`.

Created once per `CollectorRegistry` (as the wire and engine metrics are), in the engine's registry by
default, so `sharegroup serve --metrics-port` exposes them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..metrics import REGISTRY, PerRegistry

__all__ = ["JOBS", "ShareStateMetrics", "share_state_metrics_for"]

JOBS = ("prune", "cold_snapshot")
# A prune deletes files and writes one small file (fsync'd); a cold round appends one record per idle key.
_DURATION_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ShareStateMetrics:
    """The maintenance metric families in one registry; the job ones are labelled `job` (one of JOBS)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            "sharegroup_share_state_maintenance_runs",
            "Runs of a share-state maintenance job (prune, cold_snapshot) that completed.",
            ("job",), registry=registry)
        self.failures = Counter(
            "sharegroup_share_state_maintenance_failures",
            "Runs of a share-state maintenance job that failed (logged; the job runs again next interval).",
            ("job",), registry=registry)
        self.duration_seconds = Histogram(
            "sharegroup_share_state_maintenance_duration_seconds",
            "Time one run of a share-state maintenance job took, failed runs included.",
            ("job",), buckets=_DURATION_BUCKETS_S, registry=registry)
        self.pruned_records = Counter(
            "sharegroup_share_state_pruned_records",
            "State log records below the log start: how far prunes moved it.", registry=registry)
        self.pruned_segments = Counter(
            "sharegroup_share_state_pruned_segments",
            "State log segment files deleted by prunes (the Kafka-topic backend has none of its own).",
            registry=registry)
        self.pruned_bytes = Counter(
            "sharegroup_share_state_pruned_bytes",
            "Bytes released by prunes: segment files deleted, or Kafka records deleted from the state topic "
            "(and from memory).", registry=registry)
        self.cold_snapshots = Counter(
            "sharegroup_share_state_cold_snapshots",
            "Snapshots (checkpoints) written for share-partitions not written for "
            "share.coordinator.cold.partition.snapshot.interval.ms.", registry=registry)
        self.last_redundant_offset = Gauge(
            "sharegroup_share_state_last_redundant_offset",
            "Everything below this state log offset was redundant at the latest prune (Kafka's "
            "last-redundant-offset).", registry=registry)


_share_state_metrics_for = PerRegistry(ShareStateMetrics, REGISTRY)


def share_state_metrics_for(registry: CollectorRegistry | None = None) -> ShareStateMetrics:
    """The maintenance metrics in `registry` (default: the engine's REGISTRY), created on first use."""
    return _share_state_metrics_for(registry)
