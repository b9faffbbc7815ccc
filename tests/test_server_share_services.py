"""The share services of `sharegroup serve`: configs flowing from broker keys and `--group-config`, group
records surviving a restart, and retention reaching loaded share-partitions (the group record file itself:
tests/test_group_records_store.py)."""

from __future__ import annotations

import uuid

import pytest

from sharegroup.coordinator import GroupConfig
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.share_services import broker_share_config, coordinator_config, group_share_config
from tests.server_harness import BrokerThread, RawClient, batch_bytes
from tests.test_server_share_wire import MEMBER_A, fetch, heartbeat


def test_broker_keys_and_group_config_defaults_reach_every_service():
    config = ServeConfig.build(
        {}, [("group.share.min.record.lock.duration.ms", "1000"), ("group.share.delivery.count.limit", "4"),
             ("group.share.min.session.timeout.ms", "1000"), ("group.share.session.timeout.ms", "3000"),
             ("group.share.min.heartbeat.interval.ms", "100"), ("group.share.heartbeat.interval.ms", "500"),
             ("group.share.max.share.sessions", "300"), ("group.share.max.size", "7")],
        [("share.record.lock.duration.ms", "2500"), ("share.auto.offset.reset", "earliest"),
         ("share.isolation.level", "read_committed"), ("share.session.timeout.ms", "2000")])
    broker = broker_share_config(config)
    assert (broker.max_share_sessions, broker.delivery_count_limit,
            broker.min_record_lock_duration_ms) == (300, 4, 1000)
    group = group_share_config(config)
    assert (group.record_lock_duration_ms, group.delivery_count_limit, group.auto_offset_reset,
            group.isolation_level) == (2500, 4, "earliest", "read_committed")
    assert coordinator_config(config) == GroupConfig(
        max_size=7, session_timeout_ms=2000, heartbeat_interval_ms=500, assignment_interval_ms=1000,
        min_session_timeout_ms=1000, max_session_timeout_ms=60_000, min_heartbeat_interval_ms=100,
        max_heartbeat_interval_ms=15_000)


def test_group_config_bounds_follow_the_configured_min_and_max():
    assert GroupConfig(session_timeout_ms=2000, heartbeat_interval_ms=200, min_session_timeout_ms=1000,
                       min_heartbeat_interval_ms=100).session_timeout_ms == 2000
    with pytest.raises(ValueError,
                       match=r"group.share.session.timeout.ms \(session_timeout_ms\) must be in \[45000, 60000\]"):
        GroupConfig(session_timeout_ms=2000, heartbeat_interval_ms=200, min_heartbeat_interval_ms=100)


def test_retention_moving_the_log_start_reaches_loaded_share_partitions(tmp_path):
    broker = BrokerThread(tmp_path, share=True, group_configs={"share.auto.offset.reset": "earliest"})
    client = RawClient(broker.broker.port)
    try:
        info = broker.call(broker.store.create_topic("r", 1))
        for _ in range(3):
            broker.call(broker.store.append(info.topic_id, 0, batch_bytes(2), acks=-1))
        assert heartbeat(client, MEMBER_A, 0, ["r"]).error_code == 0
        assert fetch(client, 0, [(info.topic_id, [(0, [])])]).error_code == 0  # loads the share-partition
        share_partition = broker.share.manager.share_partition("g", info.topic_id, 0)
        assert share_partition.start_offset == 0
        broker.call(broker.store.delete_records(info.topic_id, 0, 4))
        broker.call(_moved(broker, info.topic_id))
        assert share_partition.start_offset == 4
    finally:
        client.close()
        broker.stop()


async def _moved(broker: BrokerThread, topic_id: uuid.UUID) -> None:
    broker.share.log_start_moved(topic_id, 0)


def test_group_membership_survives_a_broker_restart(tmp_path):
    """The coordinator's records are replayed from DIR/groups: a member heartbeats on with its epoch."""
    broker = BrokerThread(tmp_path, share=True)
    client = RawClient(broker.broker.port)
    try:
        info = broker.call(broker.store.create_topic("s", 2))
        joined = heartbeat(client, MEMBER_A, 0, ["s"])
        assert joined.error_code == 0
    finally:
        client.close()
        broker.stop()
    broker = BrokerThread(tmp_path, share=True)
    client = RawClient(broker.broker.port)
    try:
        (member,) = broker.share.coordinator.describe_group("g").members
        assert (member.member_id, member.member_epoch, member.assignment) == (
            MEMBER_A, joined.member_epoch, {info.topic_id: [0, 1]})
        again = heartbeat(client, MEMBER_A, joined.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, joined.member_epoch)
    finally:
        client.close()
        broker.stop()
