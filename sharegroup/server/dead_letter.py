"""The dead-letter queue writer of `sharegroup serve` (KIP-1191): the `DeadLetterSink` the share-partitions
hand their ARCHIVING records to.

The gate (`enabled`) is Kafka's: `share.version` >= 2 (finalized at 2 here) and a non-empty
`errors.deadletterqueue.topic.name` on the group, read at every transition. A write checks the topic in
Kafka's order, every time (configs change at any time): a name starting with `__` is refused; an existing
topic must have opted in with `errors.deadletterqueue.group.enable=true`; the name must start with the
broker's `errors.deadletterqueue.topic.name.prefix` (unless that is empty); a missing topic is created
(broker default partitions, opted in, CreateTime) only when `errors.deadletterqueue.auto.create.topics.enable`
is on (the two broker keys are read at every write: they are dynamic, `dynamic_broker_configs`). Then one DLQ record per source offset (`dead_letter_records`) is appended with acks=all to partition
`source partition % DLQ partitions` through the broker's own topic store, and the write returns once the
records are durable. A write that cannot be made is logged (ERROR) and counted, and returns all the same:
the share-partition archives the records either way. Appends are made once (the store is local: an error
is a refusal or a failed disk, which a retry does not mend), are not idempotent, and are repeated for
records a new leader finds still ARCHIVING: at-least-once into the DLQ, duplicates possible, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Sequence

from ..clock import Clock, SystemClock
from ..errors import Errors, ShareError
from ..manager.dead_letters import DeadLetterBatch
from ..topics.topic_store import TopicInfo, TopicStore
from .broker_config import ServeConfig
from .dynamic_broker_configs import DynamicBrokerConfigs
from .dead_letter_metrics import dead_letter_metrics_for
from .dead_letter_records import dead_letter_records, encode_batches, read_source_records
from .features import SHARE_VERSION
from .group_configs import GroupConfigStore

__all__ = ["DeadLetterWriter", "OPT_IN"]

log = logging.getLogger("sharegroup.server.dead_letter")

OPT_IN = "errors.deadletterqueue.group.enable"
PREFIX = "errors.deadletterqueue.topic.name.prefix"
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"


class _Refused(Exception):
    """A dead-letter write that cannot be made: `reason` is one of `dead_letter_metrics.FAILURE_REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class DeadLetterWriter:
    """Writes share groups' dead-letter records into topics of the broker's own store."""

    def __init__(self, store: TopicStore, config: ServeConfig | DynamicBrokerConfigs, group_configs: GroupConfigStore, *,
                 clock: Clock | None = None) -> None:
        self._store = store
        self._config = config
        self._group_configs = group_configs
        self._clock = clock if clock is not None else SystemClock()
        self._metrics = dead_letter_metrics_for()

    def enabled(self, group_id: str) -> bool:
        return SHARE_VERSION >= 2 and bool(self._group_configs.dead_letter_topic(group_id))

    def topic_of(self, group_id: str) -> str:
        """The group's DLQ topic name ("" for none): what share-group describe shows."""
        return self._group_configs.dead_letter_topic(group_id)

    async def write(self, batches: Sequence[DeadLetterBatch]) -> None:
        by_group: dict[str, list[DeadLetterBatch]] = {}
        for b in batches:
            by_group.setdefault(b.group_id, []).append(b)
        for group_id, group_batches in by_group.items():
            await self._write_group(group_id, group_batches)

    async def _write_group(self, group_id: str, batches: list[DeadLetterBatch]) -> None:
        name = self._group_configs.dead_letter_topic(group_id)
        records = sum(b.last_offset - b.first_offset + 1 for b in batches)
        try:
            topic = await self._topic(name)
        except _Refused as exc:
            self._failed(group_id, exc.reason, records, name, str(exc))
            return
        copy = self._group_configs.dead_letter_copy_record(group_id)
        max_bytes = self._max_message_bytes(name)
        for b in batches:
            source = self._store.topic_by_id(b.topic_id)
            sources = None
            if copy:
                sources = read_source_records(self._store, b.topic_id, b.partition, b.first_offset, b.last_offset)
            dlq_records = dead_letter_records(b, source.name if source is not None else str(b.topic_id), sources)
            partition = b.partition % topic.num_partitions
            for data in encode_batches(dlq_records, self._clock.now_ms(), max_bytes):
                self._metrics.produce_requests.labels(group=group_id).inc()
                try:
                    result = await self._store.append(topic.topic_id, partition, data, acks=-1)
                except ShareError as exc:
                    self._metrics.failed_produce_requests.labels(group=group_id).inc()
                    self._failed(group_id, "produce_failed", b.last_offset - b.first_offset + 1, name,
                                 f"append to {name}-{partition} failed: {exc.error.name} {exc.message}")
                    break
                self._metrics.records.labels(group=group_id).inc(result.last_offset - result.base_offset + 1)

    async def _topic(self, name: str) -> TopicInfo:
        """The DLQ topic after Kafka's checks (in Kafka's order), created when missing and allowed."""
        if not name:
            raise _Refused("no_topic", "the group has no errors.deadletterqueue.topic.name")
        if name.startswith("__"):
            raise _Refused("internal_topic", f"dead-letter queue topic {name} is an internal topic")
        topic = self._store.topic_by_name(name)
        if topic is not None:
            configs = self._store.topic_configs(name) or {}
            if configs.get(OPT_IN, "false").strip().lower() != "true":
                raise _Refused("not_enabled", f"dead-letter queue topic {name} does not have {OPT_IN}=true")
        prefix = self._config[PREFIX]
        if prefix and not name.startswith(prefix):
            raise _Refused("prefix", f"dead-letter queue topic {name} does not start with the prefix {prefix!r} "
                                     f"({PREFIX})")
        if topic is not None:
            return topic
        if not self._config[AUTO_CREATE]:
            raise _Refused("topic_missing", f"dead-letter queue topic {name} does not exist and {AUTO_CREATE} "
                                            "is false")
        try:
            created = await self._store.create_topic(name, -1, {OPT_IN: "true", "message.timestamp.type": "CreateTime"})
        except ShareError as exc:
            existing = self._store.topic_by_name(name)
            if exc.error == Errors.TOPIC_ALREADY_EXISTS and existing is not None:
                return await self._topic(name)  # created meanwhile: checked again
            raise _Refused("create_failed", f"creating dead-letter queue topic {name} failed: {exc.error.name} "
                                            f"{exc.message}") from None
        log.info("created dead-letter queue topic %s (%d partitions)", name, created.num_partitions)
        return created

    def _max_message_bytes(self, name: str) -> int:
        config = self._store.topic_log_config(name)
        return config.max_message_bytes if config is not None else self._config["message.max.bytes"]

    def _failed(self, group_id: str, reason: str, records: int, name: str, message: str) -> None:
        self._metrics.write_failures.labels(group=group_id, reason=reason).inc()
        log.error("share group %s: %d dead-letter record(s) not written to %r (%s); the records proceed to "
                  "ARCHIVED anyway", group_id, records, name, message)
