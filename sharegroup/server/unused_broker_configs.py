"""Real Kafka broker configs that a one-node `sharegroup serve` has no use for: accepted with a warning
(serve takes a real broker's properties file). `broker_config.KNOWN_UNUSED` is their union minus
every key serve does read, so a key can move into `CONFIG_DEFS` without being removed here."""

from __future__ import annotations

__all__ = ["UNUSED_BEFORE_KAFKA_4_3", "UNUSED_SINCE_KAFKA_4_3", "KNOWN_UNUSED_PREFIXES"]

# Real Kafka broker configs that a one-node broker has no use for: accepted with a warning.
UNUSED_BEFORE_KAFKA_4_3: frozenset[str] = frozenset(
    """
    advertised.listeners alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
    auto.include.jmx.reporter auto.leader.rebalance.enable background.threads broker.id
    broker.rack client.quota.callback.class compression.gzip.level compression.lz4.level compression.type
    compression.zstd.level connection.failed.authentication.delay.ms connections.max.reauth.ms
    controlled.shutdown.enable controller.listener.names controller.quorum.append.linger.ms
    controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
    controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
    controller.quorum.retry.backoff.ms controller.quorum.voters controller.socket.timeout.ms
    create.topic.policy.class.name delegation.token.expiry.time.ms delegation.token.master.key
    delegation.token.max.lifetime.ms delegation.token.secret.key delete.records.purgatory.purge.interval.requests
    delete.topic.enable early.start.listeners eligible.leader.replicas.version fetch.max.bytes
    fetch.purgatory.purge.interval.requests group.consumer.assignors group.consumer.assignment.interval.ms
    group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms group.consumer.max.session.timeout.ms
    group.consumer.max.size group.consumer.migration.policy group.consumer.min.heartbeat.interval.ms
    group.consumer.min.session.timeout.ms group.consumer.session.timeout.ms group.coordinator.append.linger.ms
    group.coordinator.rebalance.protocols group.coordinator.threads group.streams.heartbeat.interval.ms
    fetch.purgatory.purge.interval.requests group.consumer.assignment.interval.ms
    group.consumer.migration.policy group.coordinator.append.linger.ms
    group.coordinator.rebalance.protocols group.coordinator.threads group.initial.rebalance.delay.ms
    group.max.session.timeout.ms group.max.size group.min.session.timeout.ms group.streams.heartbeat.interval.ms
    group.streams.max.heartbeat.interval.ms group.streams.max.session.timeout.ms group.streams.max.size
    group.streams.min.heartbeat.interval.ms group.streams.min.session.timeout.ms group.streams.num.standby.replicas
    group.streams.session.timeout.ms initial.broker.registration.timeout.ms inter.broker.listener.name
    inter.broker.protocol.version kafka.metrics.polling.interval.secs kafka.metrics.reporters leader.imbalance.check.interval.seconds
    leader.imbalance.per.broker.percentage listener.security.protocol.map listeners log.cleaner.backoff.ms
    log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms log.cleaner.enable log.cleaner.io.buffer.load.factor
    log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
    log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads log.cleanup.policy
    log.dir log.dirs log.dir.failure.timeout.ms log.flush.interval.ms log.message.timestamp.type
    producer.id.expiration.ms queued.max.requests group.share.enable group.share.assignors
    share.coordinator.append.linger.ms share.fetch.purgatory.purge.interval.requests log.flush.interval.messages log.flush.offset.checkpoint.interval.ms
    log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes
    log.index.size.max.bytes log.initial.task.delay.ms log.local.retention.bytes log.local.retention.ms
    log.message.downconversion.enable log.message.format.version
    log.message.timestamp.difference.max.ms log.preallocate log.roll.hours
    log.roll.jitter.hours log.roll.jitter.ms log.roll.ms log.segment.delete.delay.ms max.connection.creation.rate
    max.connections max.connections.per.ip max.connections.per.ip.overrides max.incremental.fetch.session.cache.slots
    max.request.partition.size.limit metadata.log.dir metadata.log.max.record.bytes.between.snapshots
    metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
    metadata.max.retention.bytes metadata.max.retention.ms metric.reporters metrics.num.samples metrics.recording.level
    metrics.sample.window.ms min.insync.replicas node.id num.io.threads num.network.threads num.recovery.threads.per.data.dir
    num.replica.alter.log.dirs.threads num.replica.fetchers offsets.commit.timeout.ms
    offsets.load.buffer.size offsets.topic.compression.codec
    offsets.topic.replication.factor offsets.topic.segment.bytes principal.builder.class
    process.roles producer.id.expiration.check.interval.ms producer.purgatory.purge.interval.requests
    queued.max.request.bytes quota.window.num quota.window.size.seconds remote.log.storage.system.enable
    replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes replica.fetch.response.max.bytes
    replica.fetch.wait.max.ms replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms
    replica.selector.class replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
    request.timeout.ms reserved.broker.max.id security.inter.broker.protocol security.providers
    server.max.startup.time.ms share.coordinator.load.buffer.size
    share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
    share.coordinator.state.topic.num.partitions share.coordinator.state.topic.replication.factor
    share.coordinator.threads share.coordinator.write.timeout.ms socket.connection.setup.timeout.max.ms
    socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes socket.send.buffer.bytes
    telemetry.max.bytes transaction.state.log.load.buffer.size
    transaction.state.log.min.isr transaction.state.log.num.partitions transaction.state.log.replication.factor
    transaction.state.log.segment.bytes unclean.leader.election.enable
    unstable.api.versions.enable unstable.feature.versions.enable zookeeper.connect zookeeper.connection.timeout.ms
    zookeeper.session.timeout.ms zookeeper.set.acl
    """.split()
)

# Newer broker keys, through Kafka 4.4 (group and share coordinators, KIP-1240 bounds, KIP-1263 assignor
# offload, transactions): real keys a one-node serve does not read, so accepted with
# the same warning. Kept apart from the list above so that list can move keys into CONFIG_DEFS freely.
UNUSED_SINCE_KAFKA_4_3: frozenset[str] = frozenset(
    """
    group.share.assignor.offload.enable group.consumer.assignor.offload.enable
    group.share.initialize.retry.interval.ms
    group.share.min.delivery.count.limit group.share.max.delivery.count.limit
    group.share.min.partition.max.record.locks group.share.max.partition.max.record.locks
    add.partitions.to.txn.retry.backoff.ms add.partitions.to.txn.retry.backoff.max.ms
    transaction.two.phase.commit.enable
    """.split()
)

# Families of real Kafka configs matched by prefix (per-listener overrides, TLS, SASL, remote storage).
KNOWN_UNUSED_PREFIXES: tuple[str, ...] = (
    "listener.name.", "ssl.", "sasl.", "remote.log.", "log.cleaner.", "confluent.", "metrics.", "ssl.principal.",
)
