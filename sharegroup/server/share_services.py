"""The share-group services `sharegroup serve` embeds, wired together over the topic store.

- the `LocalPersister` (share-partition state, durable under `DIR/share-state`, in segment files of
  `share.coordinator.state.topic.segment.bytes`), or a `KafkaPersister` with `--share-state kafka://...`;
- share-state maintenance (`share_state_maintenance`): Kafka's prune job every
  `share.coordinator.state.topic.prune.interval.ms` and cold-partition snapshots every
  `share.coordinator.cold.partition.snapshot.interval.ms`, so the state log stays bounded by live state;
- the `GroupCoordinator`, its records durable under `DIR/groups` (`group_records.FileRecordSink`,
  replayed at start), its topics read from the topic store;
- the `SharePartitionManager` over the topic store (its `PartitionLogs`), the persister and the
  per-group configs; it is the coordinator's listener, hears every append, and its lock timer and long
  polls run on the real clock;
- a timer that expires members whose session timed out (their records are released, their partitions
  reassigned);
- the classic-group deadlines (join and sync phases, sessions) run as they come due, and committed
  offsets expire every `offsets.retention.check.interval.ms`;
- share sessions tied to the connection that opened them (the manager's session cache records the
  owner when the session opens): when that connection closes, the session closes and its member's
  acquired records are released at once (Kafka's disconnect rule), unless the member re-opened the
  session on another connection meanwhile, even one whose epoch-0 fetch is still long-polling.

Dead-letter queues (KIP-1191): the manager hands share-partitions' rejected and exhausted records to a
`dead_letter.DeadLetterWriter`, which appends Kafka's DLQ records to the group's DLQ topic in the store.

Configs: the broker's `group.share.*` keys and the `--group-config share.*` defaults become the
`BrokerConfig`, the default `ShareGroupConfig` of every group, and the coordinator's `GroupConfig`.
Values set on one group (IncrementalAlterConfigs, `group_configs.GroupConfigStore`, durable under
`DIR/groups`) are the manager's per-group config source (new share-partitions of the group use them)
and the coordinator's per-group session timeout and heartbeat interval.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from ..clock import Clock, SystemClock
from ..config import BrokerConfig, ShareGroupConfig
from ..coordinator import GroupConfig, GroupCoordinator, TopicInfo
from ..coordinator.classic.config import ClassicGroupConfig
from ..errors import Errors, ShareError
from ..manager import SharePartitionManager
from ..metrics import REGISTRY as METRICS_REGISTRY
from .broker_config import ServeConfig, consumer_group_config
from .dead_letter import DeadLetterWriter
from .dynamic_broker_configs import DynamicBrokerConfigs
from .group_configs import GroupConfigStore
from .group_records import FileRecordSink
from .share_state_maintenance import ShareStateMaintenance

__all__ = ["ShareServices", "StoreTopics", "broker_share_config", "group_share_config", "coordinator_config",
           "classic_config"]

log = logging.getLogger("sharegroup.server")

_BROKER_KEYS = (
    "group.share.max.share.sessions", "group.share.partition.max.record.locks",
    "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
    "group.share.max.record.lock.duration.ms", "group.share.delivery.count.limit",
)
_GROUP_KEYS = ("share.record.lock.duration.ms", "share.delivery.count.limit", "share.auto.offset.reset",
               "share.isolation.level")


def broker_share_config(config: ServeConfig) -> BrokerConfig:
    return BrokerConfig.from_properties({key: config[key] for key in _BROKER_KEYS})


def group_share_config(config: ServeConfig) -> ShareGroupConfig:
    """Every group's share-partition settings: the broker keys, with `--group-config` defaults on top."""
    properties: dict[str, Any] = {key: config[key] for key in (
        "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
        "group.share.partition.max.record.locks")}
    properties.update({k: v for k, v in config.group_defaults.items() if k in _GROUP_KEYS})
    return ShareGroupConfig.from_properties(properties)


def coordinator_config(config: ServeConfig) -> GroupConfig:
    defaults = config.group_defaults
    return GroupConfig(
        max_size=config["group.share.max.size"],
        session_timeout_ms=defaults.get("share.session.timeout.ms", config["group.share.session.timeout.ms"]),
        heartbeat_interval_ms=defaults.get("share.heartbeat.interval.ms", config["group.share.heartbeat.interval.ms"]),
        assignment_interval_ms=config["group.share.assignment.interval.ms"],
        min_session_timeout_ms=config["group.share.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.share.max.session.timeout.ms"],
        min_heartbeat_interval_ms=config["group.share.min.heartbeat.interval.ms"],
        max_heartbeat_interval_ms=config["group.share.max.heartbeat.interval.ms"],
    )


def classic_config(config: ServeConfig) -> ClassicGroupConfig:
    """The classic-group and offset settings from the broker's `group.*` and `offset*` keys."""
    return ClassicGroupConfig.from_properties({key: config[key] for key in (
        "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
        "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
        "offset.metadata.max.bytes")})


class StoreTopics:
    """The coordinator's `TopicsLookup` over the topic store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def lookup(self, name: str) -> TopicInfo | None:
        topic = self.store.topic_by_name(name)
        return None if topic is None else TopicInfo(topic.topic_id, topic.name, topic.num_partitions)

    def lookup_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self.store.topic_by_id(topic_id)
        return None if topic is None else TopicInfo(topic.topic_id, topic.name, topic.num_partitions)

    def names(self) -> list[str]:
        return [topic.name for topic in self.store.topics()]

    def latest_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        if not self.store.has_partition(topic_id, partition):
            raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {partition} of topic {topic_id}")
        return self.store.log_end_offset(topic_id, partition)


class ShareServices:
    """Persister, coordinator and manager of one broker; `await ShareServices.open(...)`, then
    `await start()`, and `await close()` before the topic store closes."""

    def __init__(self, persister: Any, sink: FileRecordSink, coordinator: GroupCoordinator,
                 manager: SharePartitionManager, group_config: GroupConfig,
                 group_configs: GroupConfigStore, maintenance: ShareStateMaintenance, *,
                 dead_letters: DeadLetterWriter | None = None,
                 dynamic_broker_configs: DynamicBrokerConfigs | None = None) -> None:
        self.persister = persister
        self.dynamic_broker_configs = dynamic_broker_configs  # KIP-1191's broker keys, changeable at run time
        self.dead_letters = dead_letters  # the share groups' dead-letter queue writer (KIP-1191)
        self.maintenance = maintenance
        self.group_configs = group_configs
        self.sink = sink
        self.coordinator = coordinator
        self.manager = manager
        self.group_config = group_config
        self._expiry_task: asyncio.Task[None] | None = None
        self._classic_tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(cls, data_dir: Path | str, config: ServeConfig, store: Any,
                   share_state: str | None = None, *, clock: Clock | None = None) -> "ShareServices":
        """`share_state` None keeps share state under `data_dir`; a `kafka://host:port[/topic]` URL
        keeps it in a topic of that Kafka cluster (KafkaPersister, the `kafka` extra). `clock` (default:
        the system clock) times the share state: its checkpoints and the maintenance jobs."""
        from persister.local_persister import LocalPersister

        data_dir = Path(data_dir)
        clock = clock if clock is not None else SystemClock()
        options: dict[str, Any] = {
            "snapshot_update_records_per_snapshot": config["share.coordinator.snapshot.update.records.per.snapshot"],
            "cold_checkpoint_interval_ms": config["share.coordinator.cold.partition.snapshot.interval.ms"],
            "segment_bytes": config["share.coordinator.state.topic.segment.bytes"],
            "clock": clock,
        }
        persister: Any
        if share_state is not None:
            from persister.kafka_persister import KafkaPersister

            persister = await KafkaPersister.open_url(share_state, **options)
        else:
            # The state log's metrics join serve's registry, so --metrics-port shows them beside the rest.
            persister = await LocalPersister.open(data_dir / "share-state", metrics_registry=METRICS_REGISTRY,
                                                  **options)
        maintenance = ShareStateMaintenance(
            persister.coordinator, prune_interval_ms=config["share.coordinator.state.topic.prune.interval.ms"],
            clock=clock)
        sink = None
        try:
            sink = FileRecordSink.open(data_dir / "groups")
            group_config = coordinator_config(config)
            group_configs = GroupConfigStore(data_dir / "groups", config, group_share_config(config))
            dynamic_broker_configs = DynamicBrokerConfigs(data_dir / "groups", config)
            dead_letters = DeadLetterWriter(store, dynamic_broker_configs, group_configs, clock=clock)
            manager = SharePartitionManager(persister=persister, logs=store, config=broker_share_config(config),
                                            coordinator=group_configs, dead_letters=dead_letters)
            coordinator = GroupCoordinator(persister=persister, topics=StoreTopics(store), config=group_config,
                                           record_sink=sink, listener=manager, group_timing=group_configs.timing,
                                           classic_config=classic_config(config),
                                           consumer_config=consumer_group_config(config.values),
                                           consumer_group_timing=group_configs.consumer_timing)
            await coordinator.load()  # ValueError for a record that does not fit: never skipped silently
        except BaseException:
            if sink is not None:
                sink.close()
            await persister.close()
            raise
        store.subscribe(manager.on_append)
        return cls(persister, sink, coordinator, manager, group_config, group_configs, maintenance,
                   dead_letters=dead_letters, dynamic_broker_configs=dynamic_broker_configs)

    async def start(self) -> None:
        await self.manager.start()
        self.maintenance.start()
        self._expiry_task = asyncio.create_task(self._expire_members(), name="share member expiry")
        self._classic_tasks = [
            asyncio.create_task(self._run_classic_timers(), name="classic group timers"),
            asyncio.create_task(self._expire_offsets(), name="offset retention"),
        ]

    async def _run_classic_timers(self) -> None:
        """Run the classic groups' deadlines (join/sync phases, sessions) as they come due."""
        while True:
            await self.coordinator.wait_for_timers()
            try:
                await self.coordinator.run_timers()
            except Exception:  # a failing pass must not stop later ones (logged, retried next deadline)
                log.exception("classic group timers failed")
                await asyncio.sleep(0.1)

    async def _expire_offsets(self) -> None:
        """Every `offsets.retention.check.interval.ms`, expire committed offsets past their retention."""
        interval_s = self.coordinator.classic_config.offsets_retention_check_interval_ms / 1000
        async for expired in _every(interval_s, self.coordinator.expire_offsets, "offset retention"):
            if expired:
                log.info("committed offsets expired: %d", expired)

    async def _expire_members(self) -> None:
        """Expire members whose session (or, in consumer groups, rebalance) timed out, a few times per
        session timeout (at most 1 s apart)."""
        # A consumer group may set its own consumer.session.timeout.ms down to the broker's minimum.
        shortest_ms = min(self.group_config.session_timeout_ms, self.coordinator.consumer_config.min_session_timeout_ms)
        interval_s = max(0.05, min(1.0, shortest_ms / 4000))
        async for gone in _every(interval_s, self.coordinator.expire_members, "group member expiry"):
            if gone:
                log.info("group members expired: %s", ", ".join(gone))

    async def close(self) -> None:
        await self.maintenance.close()  # before the persister: a run in progress finishes first
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        for task in self._classic_tasks:
            task.cancel()
        await asyncio.gather(*self._classic_tasks, return_exceptions=True)
        await self.manager.close()
        await self.persister.close()
        self.sink.close()

    # -- share sessions and connections ---------------------------------------------------------------

    async def connection_closed(self, connection_id: str) -> None:
        """Close the share sessions this connection opened and still owns, and release their members'
        records; sessions re-opened on another connection are left alone."""
        await self.manager.on_connection_closed(connection_id)

    def log_start_moved(self, topic_id: uuid.UUID, partition: int) -> None:
        """Retention moved a log start: push it into the loaded share-partitions of that partition (they
        read the new start from the log)."""
        self.manager.on_log_start_moved(topic_id, partition)


async def _every(interval_s: float, step: Callable[[], Awaitable[Any]], what: str) -> AsyncIterator[Any]:
    """Run `step` every `interval_s` seconds and yield what it returns; a failing pass is logged and
    skipped, so it never stops the later ones."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            result = await step()
        except Exception:
            log.exception("%s failed", what)
            continue
        yield result
