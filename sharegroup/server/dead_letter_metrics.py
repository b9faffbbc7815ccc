"""Prometheus metrics of share-group dead-letter queues (KIP-1191) in `sharegroup serve`.

Kafka's three ShareGroupMetrics meters, per group, as counters (a `PerSec` meter becomes a counter):
records written, produce requests (one per DLQ batch appended or tried) and failed produce requests
(an append that failed). Kafka counts neither validation nor topic-creation failures in the last; the
fourth counter, ours, counts every dead-letter write that failed, by reason, so each failure a record is
archived without its DLQ record shows somewhere. Created once per `CollectorRegistry`, in the engine's
registry by default, so `sharegroup serve --metrics-port` exposes them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from ..metrics import REGISTRY, PerRegistry

__all__ = ["FAILURE_REASONS", "DeadLetterMetrics", "dead_letter_metrics_for"]

# Why a dead-letter write failed (the record is archived anyway): the group names no topic (cleared
# meanwhile), an internal `__` name, a topic that did not opt in with errors.deadletterqueue.group.enable,
# a name without the broker's prefix, a missing topic without auto-creation, a failed auto-creation, a
# failed append.
FAILURE_REASONS = ("no_topic", "internal_topic", "not_enabled", "prefix", "topic_missing", "create_failed",
                   "produce_failed")


class DeadLetterMetrics:
    """The dead-letter metric families in one registry, labelled by share group."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Counter(
            "sharegroup_dead_letter_queue_records",
            "Dead-letter records written to the group's DLQ topic "
            "(ShareGroupMetrics DeadLetterQueueRecordCount).",
            ("group",), registry=registry)
        self.produce_requests = Counter(
            "sharegroup_dead_letter_queue_produce_requests",
            "Dead-letter batches appended or tried (ShareGroupMetrics DeadLetterQueueTotalProduceRequestsPerSec).",
            ("group",), registry=registry)
        self.failed_produce_requests = Counter(
            "sharegroup_dead_letter_queue_failed_produce_requests",
            "Dead-letter appends that failed (ShareGroupMetrics DeadLetterQueueFailedProduceRequestsPerSec).",
            ("group",), registry=registry)
        self.write_failures = Counter(
            "sharegroup_dead_letter_queue_write_failures",
            "Dead-letter writes that failed, by reason; their records were archived without a DLQ record.",
            ("group", "reason"), registry=registry)


_dead_letter_metrics_for = PerRegistry(DeadLetterMetrics, REGISTRY)


def dead_letter_metrics_for(registry: CollectorRegistry | None = None) -> DeadLetterMetrics:
    """The dead-letter metrics in `registry` (default: the engine's REGISTRY), created on first use."""
    return _dead_letter_metrics_for(registry)
