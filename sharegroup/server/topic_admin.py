"""Topic administration for the wire handlers: one way in for Metadata, Produce and CreateTopics.

The durable topic store owns the topics and their rules (Kafka's: a legal name of 1..249 characters of
`[a-zA-Z0-9._-]`, partitions >= 1 or -1 for `num.partitions`, replication factor 1 or -1 on one node,
known topic configs; auto-creation only when `auto.create.topics.enable`). This module adds what is the
wire's business: manual replica assignments (refused), null config values (INVALID_CONFIG), Kafka's
message for a replication factor this one node cannot reach, and a uniform `TopicInfo` view.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import Errors, ShareError
from .broker_config import ServeConfig
from ..topics.topic_store import TopicStore, check_topic_name

__all__ = ["TopicAdmin", "TopicInfo"]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the wire needs to know of a topic: name, id, partition count, configs."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: Mapping[str, str]


class TopicAdmin:
    """Topic look-ups and creation over the durable topic store, with Kafka's validation."""

    def __init__(self, store: TopicStore, config: ServeConfig) -> None:
        self.store = store
        self.config = config

    def _info(self, topic: Any) -> TopicInfo:
        """The store's topic (name, topic_id, num_partitions) with its config overrides."""
        configs = self.store.topic_configs(topic.name) or {}
        return TopicInfo(name=topic.name, topic_id=topic.topic_id, num_partitions=topic.num_partitions,
                         configs=dict(configs))

    def all(self) -> list[TopicInfo]:
        return sorted((self._info(t) for t in self.store.topics()), key=lambda t: t.name)

    def by_name(self, name: str) -> TopicInfo | None:
        topic = self.store.topic_by_name(name)
        return None if topic is None else self._info(topic)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self.store.topic_by_id(topic_id)
        return None if topic is None else self._info(topic)

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
        """Create a topic (CreateTopics semantics); raises `ShareError` with the Kafka code of a refusal.

        Kafka's controller order decides which refusal a topic gets: its name, then whether it exists
        (or collides with one when '.' and '_' are taken as equal), then its configs (null values, unknown
        keys, bad values), then a manual assignment, the replication factor, the partition count, and
        last whether this one node can hold that many replicas."""
        check_topic_name(name)
        if self.store.topic_by_name(name) is not None:
            raise ShareError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        for other in self.store.topics():
            if other.name.replace(".", "_") == folded:
                raise ShareError(Errors.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other.name}")
        nulls = [key for key, value in (configs or {}).items() if value is None]
        if nulls:
            raise ShareError(Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
        self.store.log_config.for_topic(dict(configs or {}))  # INVALID_CONFIG naming the key
        if assignments:
            if replication_factor != -1:
                raise ShareError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                         "replication factor was not set to -1.")
            if num_partitions != -1:
                raise ShareError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                         "numPartitions was not set to -1.")
            raise ShareError(Errors.INVALID_REPLICA_ASSIGNMENT, "manual replica assignment is not supported")
        if replication_factor < -1 or replication_factor == 0:
            raise ShareError(Errors.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise ShareError(Errors.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor > 1:
            raise ShareError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
            )
        topic = await self.store.create_topic(
            name, num_partitions, dict(configs or {}), replication_factor=replication_factor,
            validate_only=validate_only)
        if validate_only:  # nothing was stored: answer from what was asked
            return TopicInfo(name=topic.name, topic_id=topic.topic_id, num_partitions=topic.num_partitions,
                             configs={k: v for k, v in (configs or {}).items() if v is not None})
        return self._info(topic)

    async def get_or_create(self, name: str) -> TopicInfo | None:
        """The topic, auto-created when `auto.create.topics.enable` allows; None when absent and not created.

        Raises `ShareError(INVALID_TOPIC_EXCEPTION)` for an illegal name (nothing is created).
        """
        topic = self.by_name(name)
        if topic is not None:
            return topic
        created = await self.store.auto_create_topic(name)
        return None if created is None else self._info(created)
