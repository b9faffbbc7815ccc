"""Raw kio requests for DeleteTopics and DeleteRecords on `sharegroup serve`, and what share groups see:
a deleted topic's share state is deleted through the persister; a log start move reaches the loaded
share-partitions."""

from __future__ import annotations

import uuid

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient
from tests.test_server_share_wire import fetch, topic_with_records

DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_OFFSETS = 20, 21, 90
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 0, 1, 3, 42, 100


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, group_configs={"share.auto.offset.reset": "earliest"})
    yield b
    b.stop()



def request(client: RawClient, key: int, version: int, data: dict):
    return client.request(key, version, build(request_class(key, version), data))


def offsets_of_group(client: RawClient, group: str = "g"):
    return request(client, DESCRIBE_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]}).groups[0]


def test_delete_topics_by_name_and_by_id(broker, client):
    a = broker.call(broker.store.create_topic("a", 1))
    b = broker.call(broker.store.create_topic("b", 2))
    by_name = request(client, DELETE_TOPICS, 5, {"topic_names": ["a", "nope"], "timeout": 1000})
    assert [(r.name, r.error_code) for r in by_name.responses] == [("a", NONE), ("nope", UNKNOWN_TOPIC_OR_PARTITION)]
    missing = uuid.uuid4()
    by_id = request(client, DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": None, "topic_id": b.topic_id}, {"name": None, "topic_id": missing},
        {"name": "x", "topic_id": missing}]})
    assert [(r.name, r.topic_id, r.error_code) for r in by_id.responses] == [
        ("b", b.topic_id, NONE), (None, missing, UNKNOWN_TOPIC_ID), ("x", missing, INVALID_REQUEST)]
    assert by_id.responses[2].error_message == "You may not specify both topic name and topic id."
    neither = request(client, DELETE_TOPICS, 6, {"timeout": 1000, "topics": [{"name": None, "topic_id": None}]})
    assert [(r.error_code, r.error_message) for r in neither.responses] == [
        (INVALID_REQUEST, "Neither topic name nor id were specified.")]
    assert broker.store.topic_by_name("a") is None and broker.store.topic_by_id(b.topic_id) is None
    assert a.topic_id != b.topic_id


def test_delete_topic_deletes_the_share_state_of_every_group(broker, client):
    topic_id = topic_with_records(broker, "t", count=3)
    assert [(a.first_offset, a.last_offset) for t in fetch(client, 0, [(topic_id, [(0, [])])]).responses
            for p in t.partitions for a in p.acquired_records] == [(0, 2)]
    assert [t.topic_id for t in offsets_of_group(client).topics] == [topic_id]
    before = broker.call(broker.share.persister.read_summary("g", topic_id, 0, leader_epoch=0))
    assert before.state_epoch >= 1  # initialized by the member joining
    deleted = request(client, DELETE_TOPICS, 6, {"timeout": 1000, "topics": [{"name": "t", "topic_id": None}]})
    assert [(r.name, r.topic_id, r.error_code) for r in deleted.responses] == [("t", topic_id, NONE)]
    described = offsets_of_group(client)
    assert (described.error_code, described.topics) == (NONE, ())
    summary = broker.call(broker.share.persister.read_summary("g", topic_id, 0, leader_epoch=0))
    assert (summary.state_epoch, summary.start_offset) == (0, -1)  # the persister holds nothing for it any more


def test_delete_records_moves_the_log_start_and_the_share_partition_start(broker, client):
    topic_id = topic_with_records(broker, "t", count=5)
    fetch(client, 0, [(topic_id, [(0, [])])])  # loads the share-partition (acquires 0..4)
    moved = request(client, DELETE_RECORDS, 2, {"timeout": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 3}, {"partition_index": 1, "offset": 0}]},
        {"name": "nope", "partitions": [{"partition_index": 0, "offset": 0}]}]})
    assert [(t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
            for t in moved.topics] == [
        ("t", [(0, 3, NONE), (1, -1, UNKNOWN_TOPIC_OR_PARTITION)]), ("nope", [(0, -1, UNKNOWN_TOPIC_OR_PARTITION)])]
    assert broker.store.log_start_offset(topic_id, 0) == 3
    assert broker.share.manager.share_partition("g", topic_id, 0).start_offset == 3


def test_delete_records_beyond_the_high_watermark_is_out_of_range_and_minus_one_is_the_high_watermark(
        broker, client):
    topic_id = topic_with_records(broker, "t", count=5)
    beyond = request(client, DELETE_RECORDS, 0, {"timeout": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 6}]}]})
    assert [(p.low_watermark, p.error_code) for p in beyond.topics[0].partitions] == [(-1, OFFSET_OUT_OF_RANGE)]
    assert broker.store.log_start_offset(topic_id, 0) == 0
    to_end = request(client, DELETE_RECORDS, 1, {"timeout": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": -1}]}]})
    assert [(p.low_watermark, p.error_code) for p in to_end.topics[0].partitions] == [(5, NONE)]


CREATE_PARTITIONS, INVALID_PARTITIONS = 37, 37


def test_create_partitions_grows_topics_and_checks_each(broker, client):
    info = broker.call(broker.store.create_topic("t", 1))
    broker.call(broker.store.create_topic("u", 3))
    grown = request(client, CREATE_PARTITIONS, 3, {"timeout": 1000, "validate_only": False, "topics": [
        {"name": "t", "count": 3, "assignments": None}, {"name": "u", "count": 2, "assignments": None},
        {"name": "nope", "count": 2, "assignments": None},
        {"name": "d", "count": 2, "assignments": None}, {"name": "d", "count": 3, "assignments": None}]})
    assert [(r.name, r.error_code) for r in grown.results] == [
        ("t", NONE), ("u", INVALID_PARTITIONS), ("nope", UNKNOWN_TOPIC_OR_PARTITION), ("d", INVALID_REQUEST)]
    assert broker.store.topic_by_name("t").num_partitions == 3 and broker.store.topic_by_name("u").num_partitions == 3
    assert [broker.store.log_end_offset(info.topic_id, p) for p in range(3)] == [0, 0, 0]
    checked = request(client, CREATE_PARTITIONS, 0, {"timeout": 1000, "validate_only": True, "topics": [
        {"name": "t", "count": 5, "assignments": None}]})
    assert [(r.name, r.error_code) for r in checked.results] == [("t", NONE)]
    assert broker.store.topic_by_name("t").num_partitions == 3


def test_new_partitions_start_at_zero_for_a_share_group_and_survive_a_restart(tmp_path):
    from tests.test_server_share_wire import heartbeat
    from tests.server_harness import batch_bytes

    broker = BrokerThread(tmp_path, share=True, group_configs={"share.auto.offset.reset": "latest"})
    try:
        client = RawClient(broker.broker.port)
        info = broker.call(broker.store.create_topic("t", 1))
        member = "AAAAAAAAAAAAAAAAAAAAAA"
        joined = heartbeat(client, member, 0, ["t"])
        assert joined.error_code == NONE
        request(client, CREATE_PARTITIONS, 3, {"timeout": 1000, "validate_only": False, "topics": [
            {"name": "t", "count": 2, "assignments": None}]})
        broker.call(broker.store.append(info.topic_id, 1, batch_bytes(2), acks=-1))
        beat = heartbeat(client, member, joined.member_epoch, ["t"])
        assert beat.error_code == NONE
        summary = broker.call(broker.share.persister.read_summary("g", info.topic_id, 1, leader_epoch=0))
        assert summary.start_offset == 0  # a new partition of a consumed topic: from 0, not "latest"
        client.close()
    finally:
        broker.stop()
    reopened = BrokerThread(tmp_path)
    try:
        assert reopened.store.topic_by_name("t").num_partitions == 2
        assert reopened.store.log_end_offset(info.topic_id, 1) == 2
    finally:
        reopened.stop()


def test_a_member_loses_a_deleted_topic_from_its_assignment_on_its_next_heartbeat(broker, client):
    from tests.test_server_share_wire import heartbeat

    info = broker.call(broker.store.create_topic("t", 1))
    member = "AAAAAAAAAAAAAAAAAAAAAA"
    joined = heartbeat(client, member, 0, ["t"])
    assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(info.topic_id, (0,))]
    request(client, DELETE_TOPICS, 6, {"timeout": 1000, "topics": [{"name": "t", "topic_id": None}]})
    after = heartbeat(client, member, joined.member_epoch, ["t"])
    assert (after.error_code, after.assignment.topic_partitions) == (NONE, ())


def test_delete_topics_named_twice_are_invalid_request_and_not_deleted(broker, client):
    """Kafka refuses a topic named twice, or given twice by id, or by name and by its id, in one
    DeleteTopics request: INVALID_REQUEST once for it, and the topic stays (the id given alone is deleted)."""
    a = broker.call(broker.store.create_topic("a", 1))
    b = broker.call(broker.store.create_topic("b", 1))
    c = broker.call(broker.store.create_topic("c", 1))
    by_name = request(client, DELETE_TOPICS, 5, {"topic_names": ["a", "a", "a"], "timeout": 1000})
    assert [(r.name, r.error_code, r.error_message) for r in by_name.responses] == [
        ("a", INVALID_REQUEST, "Duplicate topic name.")]
    by_id = request(client, DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": None, "topic_id": b.topic_id}, {"name": None, "topic_id": b.topic_id},
        {"name": None, "topic_id": c.topic_id}, {"name": "c", "topic_id": None}]})
    assert sorted((r.name or "", r.topic_id, r.error_code, r.error_message) for r in by_id.responses) == sorted([
        ("", b.topic_id, INVALID_REQUEST, "Duplicate topic id."), ("c", c.topic_id, NONE, None),
        ("c", c.topic_id, INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")])
    assert [t.name for t in broker.store.topics()] == ["a", "b"]
    assert broker.store.topic_by_id(a.topic_id) is not None


def test_create_partitions_checks_existence_and_count_before_assignments_and_takes_this_node(broker, client):
    """Kafka's order: the topic must exist, the count must grow it, then the manual assignments must be one
    per new partition on registered brokers (INVALID_REPLICA_ASSIGNMENT); assignments naming this node are
    valid on a one-node cluster."""
    broker.call(broker.store.create_topic("t", 2))

    def grow(name, count, assignments):
        return request(client, CREATE_PARTITIONS, 3, {"timeout": 1000, "validate_only": False, "topics": [
            {"name": name, "count": count, "assignments": assignments}]}).results[0]

    one = [{"broker_ids": [1]}]
    assert (grow("nope", 3, one).error_code, grow("t", 2, one).error_code) == (
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS)
    assert (grow("t", 2, None).error_message, grow("t", 1, None).error_message) == (
        "Topic already has 2 partition(s).", "The topic t currently has 2 partition(s); 1 would not be an increase.")
    assert grow("t", 4, one).error_code == 39  # INVALID_REPLICA_ASSIGNMENT: 2 new partitions, 1 assignment
    assert grow("t", 3, [{"broker_ids": [2]}]).error_code == 39
    assert broker.store.topic_by_name("t").num_partitions == 2
    assert grow("t", 4, one * 2).error_code == NONE
    assert broker.store.topic_by_name("t").num_partitions == 4


def test_delete_records_of_a_partition_listed_twice_applies_the_last_offset_once(broker, client):
    """Kafka collects a DeleteRecords request into one offset per partition (the last listed wins) and
    answers each partition once."""
    topic_id = topic_with_records(broker, "t", count=5)
    moved = request(client, DELETE_RECORDS, 2, {"timeout": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 3}, {"partition_index": 0, "offset": 1}]}]})
    assert [(p.partition_index, p.low_watermark, p.error_code) for t in moved.topics for p in t.partitions] == [
        (0, 1, NONE)]
    assert broker.store.log_start_offset(topic_id, 0) == 1
