"""Prometheus metrics of the share-partition leader (layer 4): acquisitions, acknowledgements by type,
lock expiries, archived records by reason and in-flight records, the SharePartitionManager's
request metrics under Kafka's share metric names (`ShareManagerMetrics`), and a metrics endpoint.

The leader itself (`sharegroup.manager.share_partition`, layer 3) never imports prometheus_client: the edges that
drive it (the demo today, the broker later) count what they asked for and what came back through a
`SharePartitionMetrics`, one per share-partition. As in `persister.state_log_metrics`, the metric families are
created once per `CollectorRegistry`, so two drivers in one process share them without a
duplicate-registration error, and every series is labelled with the share-partition (group, topic,
partition) it describes. `serve_metrics` exposes one registry over HTTP on the loopback interface.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from persister.state_log_metrics import PerRegistry  # an edge may use the persister's helpers

from .types import AcknowledgeType, AcknowledgementBatch, AcquiredRecords

__all__ = [
    "ARCHIVE_REASONS",
    "REGISTRY",
    "LeaderMetrics",
    "MetricsServer",
    "SharePartitionMetrics",
    "ShareManagerMetrics",
    "bind_manager_metrics",
    "manager_metrics_for",
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


# -- the SharePartitionManager ---------------------------------------------------------------------------

# Kafka's acknowledge type tag values (ShareGroupMetrics RecordAcknowledgementsPerSec{ackType}).
_KAFKA_ACK_TYPES = {0: "Gap", 1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}
_TIME_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class ManagerMetricFamilies:
    """The manager's metric families in one registry. Names are Kafka's share metric names in snake
    case, prefixed `sharegroup_` (Kafka's MBean in each help text); a `PerSec` meter becomes a counter."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.total_share_fetch_requests = Counter(
            "sharegroup_total_share_fetch_requests",
            "ShareFetch requests, once per distinct topic they fetched "
            "(BrokerTopicMetrics TotalShareFetchRequestsPerSec).",
            ("topic",), registry=registry)
        self.failed_share_fetch_requests = Counter(
            "sharegroup_failed_share_fetch_requests",
            "ShareFetch requests with an error, per distinct failed topic "
            "(BrokerTopicMetrics FailedShareFetchRequestsPerSec).",
            ("topic",), registry=registry)
        self.total_share_acknowledgement_requests = Counter(
            "sharegroup_total_share_acknowledgement_requests",
            "ShareAcknowledge requests per distinct topic "
            "(BrokerTopicMetrics TotalShareAcknowledgementRequestsPerSec).",
            ("topic",), registry=registry)
        self.failed_share_acknowledgement_requests = Counter(
            "sharegroup_failed_share_acknowledgement_requests",
            "ShareAcknowledge requests with an error, per distinct failed topic "
            "(BrokerTopicMetrics FailedShareAcknowledgementRequestsPerSec).",
            ("topic",), registry=registry)
        self.request_total_time_ms = Histogram(
            "sharegroup_request_total_time_ms",
            "Time from receiving a share request to answering it, long poll included (RequestMetrics TotalTimeMs).",
            ("request",), buckets=_TIME_MS_BUCKETS, registry=registry)
        self.record_acknowledgements = Counter(
            "sharegroup_record_acknowledgements",
            "Records acknowledged durably, by Kafka ackType (ShareGroupMetrics RecordAcknowledgementsPerSec).",
            ("ack_type",), registry=registry)
        self.records_acquired = Counter(
            "sharegroup_records_acquired",
            "Records acquired by share consumers and shipped in ShareFetch responses, per group.",
            ("group",), registry=registry)
        self.acquisition_lock_timeouts = Counter(
            "sharegroup_acquisition_lock_timeout",
            "Records whose acquisition lock expired (SharePartitionMetrics AcquisitionLockTimeoutPerSec).",
            ("group",), registry=registry)
        self.partition_load_time_ms = Histogram(
            "sharegroup_partition_load_time_ms",
            "Time to initialize a share-partition from the persister (ShareGroupMetrics PartitionLoadTimeMs).",
            buckets=_TIME_MS_BUCKETS, registry=registry)
        self.delayed_share_fetch_expires = Counter(
            "sharegroup_delayed_share_fetch_expires",
            "Waiting ShareFetch requests answered at their MaxWaitMs (DelayedShareFetchMetrics ExpiresPerSec).",
            registry=registry)
        self.share_sessions_count = Gauge(
            "sharegroup_share_sessions_count", "Share sessions in the cache (ShareSessionCache ShareSessionsCount).",
            registry=registry)
        self.share_partitions_count = Gauge(
            "sharegroup_share_partitions_count",
            "Partitions over all share sessions (ShareSessionCache SharePartitionsCount).", registry=registry)
        self.purgatory_size = Gauge(
            "sharegroup_purgatory_size",
            "ShareFetch requests waiting for records "
            "(DelayedOperationPurgatory PurgatorySize, delayedOperation=ShareFetch).",
            registry=registry)
        self.in_flight_message_count = Gauge(
            "sharegroup_in_flight_message_count",
            "Records in the in-flight windows of every share-partition "
            "(SharePartitionMetrics InFlightMessageCount, summed).",
            registry=registry)


_manager_metrics_for = PerRegistry(ManagerMetricFamilies, REGISTRY)


def manager_metrics_for(registry: CollectorRegistry | None = None) -> ManagerMetricFamilies:
    """The manager's metric families in `registry` (default: this module's REGISTRY), created on first use."""
    return _manager_metrics_for(registry)


class ShareManagerMetrics:
    """A SharePartitionManager observer (it implements every event of `sharegroup.manager.ManagerObserver`)
    that counts into Prometheus. Each event costs O(partitions of the request) or O(1)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.families = manager_metrics_for(registry)
        f = self.families
        self._fetch_time = f.request_total_time_ms.labels(request="ShareFetch")
        self._ack_time = f.request_total_time_ms.labels(request="ShareAcknowledge")
        self._acks = {t: f.record_acknowledgements.labels(ack_type=name) for t, name in _KAFKA_ACK_TYPES.items()}

    def _count_topics(self, request_topics, response, total: Counter, failed: Counter) -> None:
        topics = {t.topic_id for t in request_topics} | {t.topic_id for t in response.responses}
        failed_topics = set(topics) if response.error_code else {
            t.topic_id for t in response.responses for d in t.partitions if d.error_code}
        for topic in topics:
            total.labels(topic=str(topic)).inc()
        for topic in failed_topics:
            failed.labels(topic=str(topic)).inc()

    def share_fetch_done(self, request, response, latency_ms: int) -> None:
        f = self.families
        self._count_topics(request.topics, response, f.total_share_fetch_requests, f.failed_share_fetch_requests)
        self._fetch_time.observe(latency_ms)

    def share_acknowledge_done(self, request, response, latency_ms: int) -> None:
        f = self.families
        self._count_topics(request.topics, response, f.total_share_acknowledgement_requests,
                           f.failed_share_acknowledgement_requests)
        self._ack_time.observe(latency_ms)

    def records_acquired(self, group_id, topic_id, partition, records) -> None:
        n = sum(last - first + 1 for first, last, _dc in records)
        if n:
            self.families.records_acquired.labels(group=group_id).inc(n)

    def records_acknowledged(self, group_id, topic_id, partition, counts_by_type) -> None:
        for t, n in counts_by_type.items():
            self._acks[t].inc(n)

    def locks_expired(self, group_id, topic_id, partition, records: int) -> None:
        if records:
            self.families.acquisition_lock_timeouts.labels(group=group_id).inc(records)

    def partition_loaded(self, group_id, topic_id, partition, load_time_ms: int) -> None:
        self.families.partition_load_time_ms.observe(load_time_ms)

    def fetches_expired(self, count: int) -> None:
        self.families.delayed_share_fetch_expires.inc(count)


def bind_manager_metrics(manager, registry: CollectorRegistry | None = None) -> ShareManagerMetrics:
    """Count `manager`'s events into `registry` and read its gauges (sessions, session partitions,
    waiting fetches, in-flight records) at scrape time. One manager per registry: binding another one
    moves the gauges to it."""
    metrics = ShareManagerMetrics(registry)
    manager.observer = metrics
    f = metrics.families
    f.share_sessions_count.set_function(lambda: manager.session_count)
    f.share_partitions_count.set_function(lambda: manager.session_partition_count)
    f.purgatory_size.set_function(lambda: manager.waiting_fetch_count)
    f.in_flight_message_count.set_function(lambda: manager.in_flight_count)
    return metrics


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
