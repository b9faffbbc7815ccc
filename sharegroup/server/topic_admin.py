"""Topic administration for the wire handlers: Kafka's topic-name rules, creation, auto-creation.

The durable topic store owns the topics; this module is the one place the handlers go through to look
them up or create them, so Metadata, Produce and CreateTopics apply the same rules:
- a legal name is 1..249 characters of `[a-zA-Z0-9._-]`, not `.` or `..` (else INVALID_TOPIC_EXCEPTION);
- partitions >= 1 (or -1: `num.partitions`), replication factor 1 (or -1) on this one-node broker;
- topic configs must be known topic config names (else INVALID_CONFIG);
- auto-creation (`auto.create.topics.enable`) creates with `num.partitions` partitions.
"""

from __future__ import annotations

import inspect
import re
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import Errors, ShareError
from .broker_config import ServeConfig

__all__ = ["TopicAdmin", "TopicInfo", "TOPIC_CONFIG_NAMES", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

# Kafka's topic-level config names (TopicConfig); values are kept with the topic as given.
TOPIC_CONFIG_NAMES = frozenset(
    """
    cleanup.policy compression.type compression.gzip.level compression.lz4.level compression.zstd.level
    delete.retention.ms file.delete.delay.ms flush.messages flush.ms follower.replication.throttled.replicas
    index.interval.bytes leader.replication.throttled.replicas local.retention.bytes local.retention.ms
    max.compaction.lag.ms max.message.bytes message.downconversion.enable message.format.version
    message.timestamp.after.max.ms message.timestamp.before.max.ms message.timestamp.difference.max.ms
    message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms min.insync.replicas preallocate
    remote.storage.enable retention.bytes retention.ms segment.bytes segment.index.bytes segment.jitter.ms
    segment.ms unclean.leader.election.enable remote.log.copy.disable remote.log.delete.on.disable
    """.split()
)


def validate_topic_name(name: Any) -> None:
    """Kafka's `Topic.validate`; raises `ShareError(INVALID_TOPIC_EXCEPTION)` naming the problem."""
    if not isinstance(name, str) or not name:
        raise ShareError(Errors.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ShareError(Errors.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ShareError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL_NAME.match(name):
        raise ShareError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the wire needs to know of a topic: name, id, partition count, configs."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: Mapping[str, str]


def _info(topic: Any) -> TopicInfo:
    """Read a store topic into a `TopicInfo` (the only place that knows the store's attribute names)."""
    num = getattr(topic, "num_partitions", None)
    if num is None:
        partitions = getattr(topic, "partitions")
        num = partitions if isinstance(partitions, int) else len(partitions)
    return TopicInfo(
        name=topic.name,
        topic_id=topic.topic_id,
        num_partitions=int(num),
        configs=dict(getattr(topic, "configs", {}) or {}),
    )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class TopicAdmin:
    """Topic look-ups and creation over the durable topic store, with Kafka's validation."""

    def __init__(self, store: Any, config: ServeConfig) -> None:
        self.store = store
        self.config = config

    def all(self) -> list[TopicInfo]:
        return sorted((_info(t) for t in self.store.topics()), key=lambda t: t.name)

    def by_name(self, name: str) -> TopicInfo | None:
        topic = self.store.topic_by_name(name)
        return None if topic is None else _info(topic)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self.store.topic_by_id(topic_id)
        return None if topic is None else _info(topic)

    @property
    def auto_create(self) -> bool:
        return bool(self.config["auto.create.topics.enable"])

    async def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        assignments: bool = False,
    ) -> TopicInfo:
        """Create a topic (CreateTopics semantics); raises `ShareError` with the Kafka code of a refusal."""
        validate_topic_name(name)
        if self.by_name(name) is not None:
            raise ShareError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise ShareError(
                    Errors.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                )
            raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT, "manual replica assignment is not supported")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions < 1:
            raise ShareError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor < 1:
            raise ShareError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
        if replication_factor > 1:
            raise ShareError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
            )
        clean: dict[str, str] = {}
        for key, value in (configs or {}).items():
            if key not in TOPIC_CONFIG_NAMES:
                raise ShareError(Errors.INVALID_CONFIG, f"Unknown topic config name: {key}")
            if value is None:
                raise ShareError(Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {key}")
            clean[key] = value
        if validate_only:
            return TopicInfo(name=name, topic_id=uuid.UUID(int=0), num_partitions=num_partitions, configs=clean)
        topic = await _maybe_await(self.store.create_topic(name, num_partitions, clean))
        return _info(topic)

    async def get_or_create(self, name: str) -> TopicInfo | None:
        """The topic, auto-created when `auto.create.topics.enable` allows; None when absent and not created.

        Raises `ShareError(INVALID_TOPIC_EXCEPTION)` for an illegal name (nothing is created).
        """
        topic = self.by_name(name)
        if topic is not None or not self.auto_create:
            return topic
        validate_topic_name(name)
        try:
            return await self.create(name)
        except ShareError as exc:
            if exc.error == Errors.TOPIC_ALREADY_EXISTS:  # created meanwhile by another request
                return self.by_name(name)
            raise
