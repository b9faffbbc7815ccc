"""`KafkaPersister`: the Persister protocol over an embedded ShareCoordinator over a KafkaRecordLog.

The replicated twin of LocalPersister: the same coordinator (every rule lives there), but its records
go to one partition of a Kafka topic set up like `__share_group_state` and are read back from it on
open. Needs the optional `kafka` extra (confluent-kafka).
"""

from __future__ import annotations

from sharegroup.clock import Clock, SystemClock

from .coordinator_persister import CoordinatorPersister
from .kafka_state_log import KafkaRecordLog
from .share_coordinator import ShareCoordinator

__all__ = ["KafkaPersister", "parse_kafka_url"]


def parse_kafka_url(url: str) -> tuple[str, str | None]:
    """`kafka://host:port[,host:port...][/topic]` as (bootstrap servers, topic or None); ValueError
    for anything else (the form `sharegroup serve --share-state` and `sharegroup audit` accept)."""
    prefix = "kafka://"
    if not isinstance(url, str) or not url.startswith(prefix):
        raise ValueError(f"not a kafka:// URL: {url!r}")
    servers, _, topic = url[len(prefix) :].partition("/")
    hosts = servers.split(",")
    for host in hosts:
        name, colon, port = host.rpartition(":")
        if not name or not colon or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not host:port in {url!r}: {host!r}")
    if "/" in topic:
        raise ValueError(f"a topic name has no '/': {url!r}")
    return servers, topic or None


class KafkaPersister(CoordinatorPersister):
    """A Persister whose state is durable on a Kafka cluster; build it with `await KafkaPersister.open(...)`.

    Every call is answered only after the transaction holding its record was committed (`acks=all`);
    concurrent calls share transactions (group commit). Opening fences any earlier owner of the shard.
    """

    def __init__(self, coordinator: ShareCoordinator) -> None:
        if not isinstance(coordinator.log, KafkaRecordLog):
            raise TypeError("a KafkaPersister runs over a KafkaRecordLog; use `await KafkaPersister.open(...)`")
        self.coordinator = coordinator

    @classmethod
    async def open_url(cls, url: str, **options) -> KafkaPersister:
        """`open` for a `kafka://host:port[/topic]` URL (the topic defaults to the log's default)."""
        servers, topic = parse_kafka_url(url)
        if topic is not None:
            options["topic"] = topic
        return await cls.open(servers, **options)

    @classmethod
    async def open(
        cls,
        bootstrap_servers: str,
        *,
        snapshot_update_records_per_snapshot: int = 500,
        cold_checkpoint_interval_ms: int = 300_000,
        clock: Clock = SystemClock(),
        **log_options,
    ) -> KafkaPersister:
        """Open the state log (`log_options` go to `KafkaRecordLog.open`: topic, partition,
        num_partitions, create_topic, replication_factor, min_insync_replicas, transactional_id,
        client_config, timeout_s) and replay it into a new coordinator."""
        log = await KafkaRecordLog.open(bootstrap_servers, **log_options)
        try:
            coordinator = await ShareCoordinator.open(
                log,
                snapshot_update_records_per_snapshot=snapshot_update_records_per_snapshot,
                cold_checkpoint_interval_ms=cold_checkpoint_interval_ms,
                clock=clock,
            )
        except BaseException:
            await log.close()
            raise
        return cls(coordinator)

    @property
    def log(self) -> KafkaRecordLog:
        return self.coordinator.log  # type: ignore[return-value]

    async def close(self) -> None:
        """Let writes in flight finish, then close the coordinator and the log."""
        await self.coordinator.close()
        await self.log.close()
