"""Prometheus metrics of the share-partition leader (layer 4): acquisitions, acknowledgements by type,
lock expiries, archived records by reason and in-flight records (SPEC §8), and a metrics endpoint.

The leader itself (`sharegroup.partition`, layer 3) never imports prometheus_client: the edges that
drive it (the demo today, the broker later) count what they asked for and what came back through a
`SharePartitionMetrics`, one per share-partition. As in `persister.metrics`, the metric families are
created once per `CollectorRegistry`, so two drivers in one process share them without a
duplicate-registration error, and every series is labelled with the share-partition (group, topic,
partition) it describes. `serve_metrics` exposes one registry over HTTP on the loopback interface.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from persister.metrics import PerRegistry  # an edge may use the persister's helpers

from .types import AcknowledgeType, AcknowledgementBatch, AcquiredRecords

__all__ = [
    "ARCHIVE_REASONS",
    "REGISTRY",
    "LeaderMetrics",
    "MetricsServer",
    "SharePartitionMetrics",
    "metrics_for",
    "serve_metrics",
]

REGISTRY = CollectorRegistry(auto_describe=True)

# Why a record was archived: a consumer rejected it; it was released (or its member left) on its last
# allowed delivery; its acquisition lock expired on its last allowed delivery; retention moved the log
# start past it.
ARCHIVE_REASONS = ("rejected", "delivery_limit", "lock_expiry", "log_start")

_ACK_TYPE_LABELS = {int(t): t.name.lower() for t in AcknowledgeType}
_LABELS = ("group", "topic", "partition")


class LeaderMetrics:
    """The leader's metric families in one registry, each labelled by share-partition."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.acquisitions = Counter(
            "sharegroup_leader_acquisitions",
            "Acquire calls that handed at least one record to a share consumer.",
            _LABELS,
            registry=registry,
        )
        self.acquired_records = Counter(
            "sharegroup_leader_acquired_records",
            "Records acquired by share consumers; every delivery of a record counts once.",
            _LABELS,
            registry=registry,
        )
        self.redelivered_records = Counter(
            "sharegroup_leader_redelivered_records",
            "Records acquired with a delivery count above 1 (released, expired or crashed before).",
            _LABELS,
            registry=registry,
        )
        self.acknowledged_records = Counter(
            "sharegroup_leader_acknowledged_records",
            "Records acknowledged durably by their owner, by acknowledgement type.",
            (*_LABELS, "type"),
            registry=registry,
        )
        self.lock_expired_records = Counter(
            "sharegroup_leader_lock_expired_records",
            "Records whose acquisition lock expired (made available again, or archived at the limit).",
            _LABELS,
            registry=registry,
        )
        self.archived_records = Counter(
            "sharegroup_leader_archived_records",
            "Records archived, by reason: rejected, delivery_limit, lock_expiry, log_start.",
            (*_LABELS, "reason"),
            registry=registry,
        )
        self.in_flight_records = Gauge(
            "sharegroup_leader_in_flight_records",
            "Records in the in-flight window: end offset minus the share-partition start offset.",
            _LABELS,
            registry=registry,
        )


_metrics_for = PerRegistry(LeaderMetrics, REGISTRY)


def metrics_for(registry: CollectorRegistry | None = None) -> LeaderMetrics:
    """The leader's metrics in `registry` (default: this module's REGISTRY), created on first use."""
    return _metrics_for(registry)


class SharePartitionMetrics:
    """The leader's series of one share-partition; the driver calls these after each operation.

    Every method takes what the SharePartition call took or returned, so counting costs O(batches),
    not O(records), except per-offset acknowledgement types (one pass over the types tuple).
    """

    __slots__ = ("_acquisitions", "_acquired", "_redelivered", "_acked", "_expired", "_archived", "_in_flight")

    def __init__(self, group_id: str, topic: str, partition: int, *, registry: CollectorRegistry | None = None):
        metrics = metrics_for(registry)
        labels = {"group": group_id, "topic": topic, "partition": str(partition)}
        self._acquisitions = metrics.acquisitions.labels(**labels)
        self._acquired = metrics.acquired_records.labels(**labels)
        self._redelivered = metrics.redelivered_records.labels(**labels)
        self._acked = {t: metrics.acknowledged_records.labels(type=name, **labels)
                       for t, name in _ACK_TYPE_LABELS.items()}
        self._expired = metrics.lock_expired_records.labels(**labels)
        self._archived = {reason: metrics.archived_records.labels(reason=reason, **labels)
                          for reason in ARCHIVE_REASONS}
        self._in_flight = metrics.in_flight_records.labels(**labels)

    def acquired(self, records: Sequence[AcquiredRecords]) -> int:
        """Count one acquire call's result; returns the number of records acquired."""
        total = redelivered = 0
        for first, last, delivery_count in records:
            n = last - first + 1
            total += n
            if delivery_count > 1:
                redelivered += n
        if total:
            self._acquisitions.inc()
            self._acquired.inc(total)
            if redelivered:
                self._redelivered.inc(redelivered)
        return total

    def acknowledged(self, batches: Iterable[AcknowledgementBatch]) -> dict[int, int]:
        """Count a durable acknowledgement by type; returns records per acknowledge type."""
        counts: dict[int, int] = {}
        for first, last, types in batches:
            if len(types) == 1:
                counts[types[0]] = counts.get(types[0], 0) + last - first + 1
            else:
                for t in types:
                    counts[t] = counts.get(t, 0) + 1
        for t, n in counts.items():
            self._acked[t].inc(n)
        return counts

    def lock_expired(self, records: int) -> None:
        if records:
            self._expired.inc(records)

    def archived(self, reason: str, records: int) -> None:
        """Count records archived for `reason` (one of ARCHIVE_REASONS)."""
        if records:
            self._archived[reason].inc(records)

    def set_in_flight(self, records: int) -> None:
        self._in_flight.set(records)


class MetricsServer:
    """A running metrics endpoint: `url`, `host`, `port`; `close()` stops it (idempotent)."""

    def __init__(self, server, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.host, self.port = server.server_address[:2]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.shutdown()
        server.server_close()
        self._thread.join(timeout=5)


def serve_metrics(port: int, registry: CollectorRegistry | None = None, *, host: str = "127.0.0.1") -> MetricsServer:
    """Serve `registry` on http://host:port/metrics in a daemon thread (port 0: any free port).

    The default host is the loopback interface: the metrics describe one process and are not meant to
    be reachable from other machines. Raises OSError when the port cannot be bound.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"a metrics port must be an int in [0, 65535], got {port!r}")
    server, thread = start_http_server(port, addr=host, registry=REGISTRY if registry is None else registry)
    return MetricsServer(server, thread)
