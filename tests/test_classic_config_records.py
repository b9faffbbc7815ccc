"""Classic-group settings (Kafka's keys, defaults, bounds), their broker configs, the consumer protocol
codec, and classic records through the durable group record file (bytes included)."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup.coordinator.classic.config import ClassicGroupConfig
from sharegroup.coordinator.classic.records import (
    ClassicMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from sharegroup.coordinator.classic.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from sharegroup.coordinator.records import Record
from sharegroup.server.broker_config import ServeConfig
from sharegroup.server.group_records import FileRecordSink, decode_records, encode_records
from sharegroup.server.share_services import classic_config
from tests.classic_env import G, ClassicEnv


def test_defaults_are_kafkas():
    config = ClassicGroupConfig()
    assert config.to_properties() == {
        "group.min.session.timeout.ms": "6000", "group.max.session.timeout.ms": "1800000",
        "group.initial.rebalance.delay.ms": "3000", "group.max.size": "2147483647",
        "offsets.retention.minutes": "10080", "offsets.retention.check.interval.ms": "600000",
        "offset.metadata.max.bytes": "4096"}
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000


@pytest.mark.parametrize("properties, fragment", [
    ({"group.max.size": "0"}, "group.max.size"),
    ({"group.min.session.timeout.ms": "7000", "group.max.session.timeout.ms": "6000"}, "must not exceed"),
    ({"group.initial.rebalance.delay.ms": "-1"}, "group.initial.rebalance.delay.ms"),
    ({"group.max.sise": "3"}, "unknown classic group property"),
])
def test_bad_settings_are_refused_naming_the_key(properties, fragment):
    with pytest.raises(ValueError) as info:
        ClassicGroupConfig.from_properties(properties)
    assert fragment in str(info.value)


def test_broker_configs_reach_the_coordinator_and_are_validated():
    config = ServeConfig.build({"group.initial.rebalance.delay.ms": "0", "offsets.retention.minutes": "5"})
    assert not config.warnings
    derived = classic_config(config)
    assert (derived.initial_rebalance_delay_ms, derived.offsets_retention_minutes) == (0, 5)
    with pytest.raises(ValueError) as info:
        ServeConfig.build({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"})
    assert "group.min.session.timeout.ms" in str(info.value)


def test_consumer_protocol_round_trip_and_garbage():
    assert subscribed_topics(encode_subscription(["a", "bé"], b"u")) == ["a", "bé"]
    assert decode_assignment(encode_assignment({"a": [0, 2], "b": []})) == {"a": [0, 2], "b": []}
    assert decode_assignment(b"") == {}
    for garbage in (b"", b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"):
        with pytest.raises(ValueError):
            subscribed_topics(garbage)


def test_classic_records_round_trip_through_the_record_file(tmp_path):
    member = ClassicMemberMetadata("m-1", "i-1", "client", "/127.0.0.1", 30_000, 10_000, b"\x00\x01sub", b"\xffassign")
    records = [
        Record(GroupMetadataKey(G), GroupMetadataValue("consumer", 3, "range", "m-1", 1234, (member,))),
        Record(OffsetCommitKey(G, "t", 0), OffsetCommitValue(42, 7, "meta", 1234, -1)),
        Record(OffsetCommitKey(G, "t", 0), None),
    ]
    assert decode_records(encode_records(records)[8:]) == records

    async def main():
        sink = FileRecordSink.open(tmp_path)
        await sink.append(records[:2])
        sink.close()
        reopened = FileRecordSink.open(tmp_path)
        assert reopened.read_all() == records[:2]
        await reopened.append(records[2:])  # the offset's tombstone: the file keeps no record of it
        reopened.close()
        again = FileRecordSink.open(tmp_path)
        assert again.read_all() == records[:1]
        again.close()
    asyncio.run(main())


def test_a_record_file_with_bad_bytes_is_refused(tmp_path):
    payload = encode_records([Record(GroupMetadataKey(G), GroupMetadataValue("consumer", 1, "range", "m", 1, (
        ClassicMemberMetadata("m", None, "c", "h", 1, 1, b"x", b"y"),)))])[8:]
    broken = payload.replace(b'"b":"eA=="', b'"b":"e!=="', 1)
    assert broken != payload
    with pytest.raises(ValueError):
        decode_records(broken)


def test_a_classic_group_and_its_offsets_survive_a_restart_through_the_record_file(tmp_path):
    async def main():
        env = await ClassicEnv().start()
        generation, (leader, follower) = await env.stable_group(2)
        from sharegroup.coordinator.offsets import CommitRequest

        await env.gc.offset_commit(G, generation, leader, [CommitRequest("t", 1, 77, 2, "m")])
        sink = FileRecordSink.open(tmp_path)  # what the coordinator wrote, through the durable file
        for record in env.sink.read_all():
            await sink.append([record])
        sink.close()
        reopened = FileRecordSink.open(tmp_path)
        restarted = await ClassicEnv(sink=reopened, clock=env.clock).start()
        described = restarted.gc.describe_groups([G])[0]
        assert described.state == "Stable" and {m.member_id for m in described.members} == {leader, follower}
        assert {m.member_id: m.assignment for m in described.members} == {
            leader: leader.encode(), follower: follower.encode()}
        assert (await restarted.gc.offset_fetch(G, [("t", 1)]))[("t", 1)].offset == 77
        restarted.gc._check(replay=True)
        reopened.close()
    asyncio.run(main())
