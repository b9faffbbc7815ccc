"""Committed offsets of KIP-848 consumer groups: member-epoch fencing on the wire, ListGroups with all
three group types, deletion of a consumer group with its offsets, and a real `group.protocol=consumer`
Consumer that commits, survives a broker SIGKILL and resumes at its committed offset.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.server_harness import BrokerThread, RawClient, ServeProcess
from tests.test_server_classic_wire import commit, request, stable_member
from tests.test_server_consumer_group_wire import OVERRIDES, heartbeat

OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DELETE_GROUPS, SHARE_HEARTBEAT = 8, 9, 16, 42, 76
NONE, UNSUPPORTED_VERSION, UNKNOWN_MEMBER_ID, GROUP_NOT_EMPTY, STALE_MEMBER_EPOCH = 0, 35, 25, 68, 113


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides=OVERRIDES)
    b.call(b.store.create_topic("t", 2))
    yield b
    b.stop()


def fetch(client: RawClient, group: str, member_id: str | None, epoch: int):
    """OffsetFetch v9 of partitions 0 and 1 of topic t: (group error, [(partition, offset, error)])."""
    r = request(client, OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": epoch,
                                                       "topics": [{"name": "t", "partition_indexes": [0, 1]}]}],
                                          "require_stable": False})
    (g,) = r.groups
    return g.error_code, [(p.partition_index, p.committed_offset, p.error_code) for t in g.topics for p in t.partitions]


def test_offset_commit_and_fetch_of_a_consumer_group_check_the_member_epoch(client):
    joined = heartbeat(client, "m1", 0, ["t"], group="cg")
    assert (joined.error_code, joined.member_epoch) == (NONE, 1)
    assert commit(client, 9, group="cg", generation=1, member_id="m1", partitions=((0, 7, ""),)).topics[0].partitions[
        0].error_code == NONE
    stale = commit(client, 9, group="cg", generation=0, member_id="m1")
    ahead = commit(client, 9, group="cg", generation=2, member_id="m1")  # Kafka: any other epoch is stale
    stranger = commit(client, 9, group="cg", generation=1, member_id="nobody")
    outsider = commit(client, 9, group="cg", generation=-1, member_id="")  # an admin commit while members exist
    assert [r.topics[0].partitions[0].error_code for r in (stale, ahead, stranger, outsider)] == [
        STALE_MEMBER_EPOCH, STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]
    assert fetch(client, "cg", "m1", 1) == (NONE, [(0, 7, NONE), (1, -1, NONE)])
    assert fetch(client, "cg", "m1", 0)[0] == STALE_MEMBER_EPOCH
    assert fetch(client, "cg", None, -1) == (NONE, [(0, 7, NONE), (1, -1, NONE)])  # an outside read


def test_an_offset_fetch_refused_for_the_group_lists_no_topics(client):
    # From v2 on Kafka answers a group-level refusal with the group's error code and no topics.
    assert heartbeat(client, "m1", 0, ["t"], group="cg").member_epoch == 1
    assert fetch(client, "cg", "m1", 0) == (STALE_MEMBER_EPOCH, [])
    assert fetch(client, "cg", "ghost", 1) == (UNKNOWN_MEMBER_ID, [])


def test_a_kip848_member_must_commit_with_offset_commit_v9(client):
    assert heartbeat(client, "m1", 0, ["t"], group="cg").member_epoch == 1
    old = commit(client, 8, group="cg", generation=1, member_id="m1", partitions=((0, 7, ""),))
    assert old.topics[0].partitions[0].error_code == UNSUPPORTED_VERSION
    assert commit(client, 8, group="cg", generation=1, member_id="ghost").topics[0].partitions[0].error_code \
        == UNKNOWN_MEMBER_ID  # the member is looked up first
    assert fetch(client, "cg", "m1", 1) == (NONE, [(0, -1, NONE), (1, -1, NONE)])  # nothing was committed


def test_list_groups_shows_consumer_classic_and_share_groups(client):
    assert heartbeat(client, "m1", 0, ["t"], group="consumer-g").error_code == NONE
    stable_member(client, group="classic-g")
    request(client, SHARE_HEARTBEAT, 1, {"group_id": "share-g", "member_id": "M" * 22, "member_epoch": 0,
                                         "rack_id": None, "subscribed_topic_names": ["t"]})
    listed = request(client, LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert sorted((g.group_id, g.protocol_type, g.group_type) for g in listed.groups) == [
        ("classic-g", "consumer", "classic"), ("consumer-g", "consumer", "consumer"), ("share-g", "share", "share")]
    only = request(client, LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [g.group_id for g in only.groups] == ["consumer-g"]


def test_deleting_an_empty_consumer_group_deletes_its_offsets(broker, client):
    assert heartbeat(client, "m1", 0, ["t"], group="cg").error_code == NONE
    assert commit(client, 9, group="cg", generation=1, member_id="m1").topics[0].partitions[0].error_code == NONE
    busy = request(client, DELETE_GROUPS, 2, {"groups_names": ["cg"]})
    assert busy.results[0].error_code == GROUP_NOT_EMPTY
    assert heartbeat(client, "m1", -1, group="cg").error_code == NONE  # leaves: the group is empty
    done = request(client, DELETE_GROUPS, 2, {"groups_names": ["cg"]})
    assert done.results[0].error_code == NONE
    assert "cg" not in broker.share.coordinator.group_types()
    assert fetch(client, "cg", None, -1) == (NONE, [(0, -1, NONE), (1, -1, NONE)])


def test_a_kip848_consumer_commits_survives_a_sigkill_and_resumes_at_its_committed_offset(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from tests.share_clients import SERVE_ARGS, WAIT_S, produce

    args = [*SERVE_ARGS, *(x for k, v in OVERRIDES.items() for x in ("--override", f"{k}={v}"))]

    def consumer(bootstrap: str):
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "resume", "group.protocol": "consumer",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["ledger"])
        return c

    def poll_until(c, count: int) -> list:
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count} records"
            message = c.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        return got

    server = ServeProcess(tmp_path, *args)
    try:
        produce(server.bootstrap, "ledger", [(None, b"v%d" % i, None) for i in range(20)])
        first = consumer(server.bootstrap)
        seen = poll_until(first, 12)
        assert [m.offset() for m in seen] == list(range(12))
        first.commit(message=seen[-1], asynchronous=False)  # commits offset 12 with the member epoch
        first.close()
    finally:
        server.terminate(signal.SIGKILL)
    server = ServeProcess(tmp_path, *args)
    try:
        second = consumer(server.bootstrap)
        rest = poll_until(second, 8)
        assert [m.offset() for m in rest] == list(range(12, 20))
        assert second.committed([confluent_kafka.TopicPartition("ledger", 0)], timeout=WAIT_S)[0].offset == 12
        second.close()
    finally:
        server.terminate()
