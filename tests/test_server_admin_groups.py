"""Raw kio requests for the share-group admin APIs of `sharegroup serve`: ListGroups, DeleteGroups,
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (shapes and error codes)."""

from __future__ import annotations

import uuid

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient, batch_bytes

LIST, DELETE_GROUPS, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS, HEARTBEAT = 16, 42, 90, 91, 92, 76
NONE, UNKNOWN_TOPIC_OR_PARTITION, GROUP_NOT_EMPTY, GROUP_ID_NOT_FOUND = 0, 3, 68, 69
MEMBER = "MMMMMMMMMMMMMMMMMMMMMM"
ZERO = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, group_configs={"share.auto.offset.reset": "earliest"})
    yield b
    b.stop()



def request(client: RawClient, key: int, version: int, data: dict):
    return client.request(key, version, build(request_class(key, version), data))


def heartbeat(client: RawClient, epoch: int, topics=None, group: str = "g"):
    return request(client, HEARTBEAT, 1, {"group_id": group, "member_id": MEMBER, "member_epoch": epoch,
                                          "rack_id": None, "subscribed_topic_names": topics})


def group_with_state(broker: BrokerThread, client: RawClient, group: str = "g", records: int = 5,
                     leave: bool = True) -> uuid.UUID:
    """Topic t (2 partitions, `records` records in partition 0) and a share group holding state for
    partitions 0 and 1 at start offset 0 (AlterShareGroupOffsets on a missing group creates it); with
    `leave` False a member stays joined."""
    info = broker.store.topic_by_name("t") or broker.call(broker.store.create_topic("t", 2))
    broker.call(broker.store.append(info.topic_id, 0, batch_bytes(records), acks=-1))
    altered = request(client, ALTER_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 0, "start_offset": 0}, {"partition_index": 1, "start_offset": 0}]}]})
    assert altered.error_code == NONE
    if not leave:
        assert heartbeat(client, 0, ["t"], group).error_code == NONE
    return info.topic_id


def describe_offsets(client: RawClient, group: str = "g", topics=None, version: int = 1):
    return request(client, DESCRIBE_OFFSETS, version, {"groups": [{"group_id": group, "topics": topics}]}).groups[0]


def test_list_groups_lists_share_groups_with_state_and_filters(broker, client):
    group_with_state(broker, client, "empty-group")
    heartbeat(client, 0, ["t"], "busy-group")
    listed = request(client, LIST, 5, {"states_filter": [], "types_filter": []})
    assert listed.error_code == NONE
    assert sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups) == [
        ("busy-group", "share", "Stable", "share"), ("empty-group", "share", "Empty", "share")]
    stable = request(client, LIST, 5, {"states_filter": ["stable"], "types_filter": ["Share"]})
    assert [g.group_id for g in stable.groups] == ["busy-group"]
    classic = request(client, LIST, 5, {"states_filter": [], "types_filter": ["classic", "consumer"]})
    assert classic.groups == ()
    v4 = request(client, LIST, 4, {"states_filter": ["empty"]})
    assert [(g.group_id, g.group_state) for g in v4.groups] == [("empty-group", "Empty")]


def test_describe_offsets_of_all_topics_and_of_named_partitions(broker, client):
    topic_id = group_with_state(broker, client, records=5)
    group = describe_offsets(client)
    assert (group.group_id, group.error_code) == ("g", NONE)
    assert [(t.topic_name, t.topic_id) for t in group.topics] == [("t", topic_id)]
    assert [(p.partition_index, p.start_offset, p.lag, p.error_code) for p in group.topics[0].partitions] == [
        (0, 0, 5, NONE), (1, 0, 0, NONE)]
    named = describe_offsets(client, topics=[{"topic_name": "t", "partitions": [0, 7]},
                                             {"topic_name": "nope", "partitions": [0, 1]}])
    assert [(t.topic_name, t.topic_id) for t in named.topics] == [("t", topic_id), ("nope", None)]
    # a partition the topic does not have: the state summary's UNKNOWN_TOPIC_OR_PARTITION, with Kafka's
    # defaults for a failed partition (start offset -1, leader epoch 0, lag -1)
    assert [(p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code)
            for p in named.topics[0].partitions] == [(0, 0, 0, 5, NONE), (7, -1, 0, -1, UNKNOWN_TOPIC_OR_PARTITION)]
    # Kafka: a topic that does not exist is absence of data, not an error (start offset -1, as OffsetFetch)
    assert [(p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code)
            for p in named.topics[1].partitions] == [(0, -1, 0, -1, NONE), (1, -1, 0, -1, NONE)]


def test_describe_offsets_of_an_unknown_topic_answers_the_zero_topic_id_and_start_offset_minus_one(broker, client):
    """Kafka's GroupMetadataManager: a topic name the broker does not know is answered with topic id
    ZERO_UUID and start offset -1 per partition, no error. kio reads the zero id back as None, so the
    frame itself is checked: the topic name is followed by sixteen zero bytes."""
    group_with_state(broker, client)
    body = build(request_class(DESCRIBE_OFFSETS, 1), {"groups": [
        {"group_id": "g", "topics": [{"topic_name": "no-such-topic", "partitions": [0]}]}]})
    client.send_raw(client.frame(DESCRIBE_OFFSETS, 1, body))
    frame = client.read_frame()
    name = b"no-such-topic"
    at = frame.index(bytes([len(name) + 1]) + name) + 1 + len(name)  # compact string: length + 1, then bytes
    assert frame[at:at + 16] == ZERO.bytes
    topics = describe_offsets(client, topics=[{"topic_name": "no-such-topic", "partitions": [0]}]).topics
    assert [(p.partition_index, p.start_offset, p.lag, p.error_code) for p in topics[0].partitions] == [
        (0, -1, -1, NONE)]


def test_delete_offsets_of_an_unknown_topic_is_unknown_topic_or_partition_with_kafkas_message(broker, client):
    group_with_state(broker, client)
    deleted = request(client, DELETE_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "no-such-topic"}]})
    assert deleted.error_code == NONE
    assert [(r.topic_name, r.topic_id, r.error_code, r.error_message) for r in deleted.responses] == [
        ("no-such-topic", None, UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    assert len(describe_offsets(client).topics[0].partitions) == 2  # the group's own state is untouched


def test_describe_offsets_of_a_missing_group_is_group_id_not_found(client):
    group = describe_offsets(client, "missing", version=0)
    assert (group.group_id, group.error_code, group.topics) == ("missing", GROUP_ID_NOT_FOUND, ())


def test_alter_offsets_moves_start_offsets_of_an_empty_group(broker, client):
    topic_id = group_with_state(broker, client, records=5)
    altered = request(client, ALTER_OFFSETS, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 3},
                                           {"partition_index": 7, "start_offset": 0}]},
        {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
    assert altered.error_code == NONE
    assert [(r.topic_name, r.topic_id, [(p.partition_index, p.error_code) for p in r.partitions])
            for r in altered.responses] == [
        ("t", topic_id, [(0, NONE), (7, UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nope", None, [(0, UNKNOWN_TOPIC_OR_PARTITION)])]
    after = describe_offsets(client, topics=[{"topic_name": "t", "partitions": [0]}])
    assert [(p.start_offset, p.lag) for p in after.topics[0].partitions] == [(3, 2)]


def test_alter_offsets_of_a_group_with_members_is_group_not_empty(broker, client):
    group_with_state(broker, client, records=5, leave=False)
    altered = request(client, ALTER_OFFSETS, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 3}]}]})
    assert altered.error_code == GROUP_NOT_EMPTY
    assert [p.error_code for p in altered.responses[0].partitions] == [GROUP_NOT_EMPTY]
    after = describe_offsets(client, topics=[{"topic_name": "t", "partitions": [0]}])
    assert after.topics[0].partitions[0].start_offset == 0


def test_delete_offsets_removes_the_topics_state(broker, client):
    topic_id = group_with_state(broker, client)
    deleted = request(client, DELETE_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"},
                                                                                {"topic_name": "nope"}]})
    assert deleted.error_code == NONE
    assert [(r.topic_name, r.topic_id, r.error_code) for r in deleted.responses] == [
        ("t", topic_id, NONE), ("nope", None, UNKNOWN_TOPIC_OR_PARTITION)]
    assert describe_offsets(client).topics == ()
    again = request(client, DELETE_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"}]})
    assert [(r.topic_name, r.error_code, r.error_message) for r in again.responses] == [
        ("t", UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]  # Kafka's words


def test_delete_offsets_group_errors(broker, client):
    group_with_state(broker, client, leave=False)
    busy = request(client, DELETE_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"}]})
    assert (busy.error_code, busy.responses) == (GROUP_NOT_EMPTY, ())
    missing = request(client, DELETE_OFFSETS, 0, {"group_id": "missing", "topics": [{"topic_name": "t"}]})
    assert missing.error_code == GROUP_ID_NOT_FOUND
    assert len(describe_offsets(client).topics[0].partitions) == 2


def test_delete_groups_answers_per_group(broker, client):
    group_with_state(broker, client, "gone")
    heartbeat(client, 0, ["t"], "busy")
    result = request(client, DELETE_GROUPS, 2, {"groups_names": ["gone", "busy", "missing"]})
    assert [(r.group_id, r.error_code) for r in result.results] == [
        ("gone", NONE), ("busy", GROUP_NOT_EMPTY), ("missing", GROUP_ID_NOT_FOUND)]
    listed = request(client, LIST, 5, {"states_filter": [], "types_filter": []})
    assert [g.group_id for g in listed.groups] == ["busy"]
    assert describe_offsets(client, "gone").error_code == GROUP_ID_NOT_FOUND
