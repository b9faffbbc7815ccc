"""Prometheus metrics of the topic store, read from `TopicStore.stats()` and the partition offsets at
scrape time (a custom collector: the append path counts in plain integers and never touches
prometheus_client).

Families (Kafka's LogEndOffset / LogStartOffset / Size are per partition; the rest are store totals):

- `sharegroup_topic_store_appended_batches_total`, `..._appended_bytes_total`: batches and bytes made
  durable by appends;
- `sharegroup_topic_store_group_commits_total`, `..._fsyncs_total`: write groups and fsyncs (their ratio
  to appended batches is the group-commit factor);
- `sharegroup_topic_store_expired_producers_total`: idle producer ids forgotten;
- `sharegroup_topic_store_storage_faults_total`: write, fsync and read errors (each logged at ERROR);
  `sharegroup_topic_store_offline_log_dirs`: 1 once a fault took the store's log dir offline (Kafka's
  OfflineLogDirectoryCount), until a restart;
- gauges `..._topics`, `..._partitions`, `..._segments`, `..._size_bytes`, `..._producers`,
  `..._queued_bytes`, `..._truncated_bytes` (torn tails and refused writes cut when the store opened);
- per partition (labels topic, partition): `sharegroup_topic_log_end_offset`,
  `sharegroup_topic_log_start_offset`, `sharegroup_topic_log_size_bytes`.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .topic_store import TopicStore

__all__ = ["TopicStoreCollector", "register_topic_store_metrics"]

_PREFIX = "sharegroup_topic_store_"
_COUNTERS = {
    "appended_batches": "Record batches appended and made durable.",
    "appended_bytes": "Bytes of record batches appended and made durable.",
    "group_commits": "Write groups (one write and fsync round for many appends).",
    "fsyncs": "fsync calls made by appends (data and directory).",
    "expired_producers": "Idle producer ids forgotten after producer.id.expiration.ms.",
    "storage_faults": "Write, fsync and read errors of the store's files (each logged at ERROR).",
}
_GAUGES = {
    "topics": "Topics in the store.",
    "partitions": "Partition logs in the store.",
    "segments": "Segment files held.",
    "size_bytes": "Bytes held in segment files.",
    "producers": "Idempotent producers tracked (summed over partitions).",
    "queued_bytes": "Bytes appended and waiting for their write and fsync.",
    "truncated_bytes": "Bytes cut when the store opened: torn tails, writes refused before a restart.",
    "offline_log_dirs": "Log dirs offline after a storage fault (1 until the broker restarts).",
}


class TopicStoreCollector:
    """Collects the store's metrics on every scrape."""

    def __init__(self, store: TopicStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        stats = self._store.stats()
        for name, doc in _COUNTERS.items():
            yield CounterMetricFamily(_PREFIX + name, doc, value=stats.get(name, 0))
        for name, doc in _GAUGES.items():
            yield GaugeMetricFamily(_PREFIX + name, doc, value=stats.get(name, 0))
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("sharegroup_topic_log_end_offset", "Log end offset (high watermark).", labels=labels)
        start = GaugeMetricFamily("sharegroup_topic_log_start_offset", "Log start offset.", labels=labels)
        size = GaugeMetricFamily("sharegroup_topic_log_size_bytes", "Bytes held by the partition log.", labels=labels)
        for info in self._store.topics():
            for partition in range(info.num_partitions):
                log = self._store.partition_log(info.topic_id, partition)
                key = [info.name, str(partition)]
                end.add_metric(key, log.log_end_offset)
                start.add_metric(key, log.log_start_offset)
                size.add_metric(key, log.size_bytes)
        yield end
        yield start
        yield size


def register_topic_store_metrics(store: TopicStore, registry: CollectorRegistry) -> TopicStoreCollector:
    """Expose `store`'s metrics in `registry` (unregister the returned collector when the store closes)."""
    collector = TopicStoreCollector(store)
    registry.register(collector)
    return collector
