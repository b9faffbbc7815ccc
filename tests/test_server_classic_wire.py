"""Raw kio requests for the classic group and committed-offset APIs of `sharegroup serve`: shapes per
version, exact error codes, group types clashing, and Kafka's authorization checks in Kafka's order."""

from __future__ import annotations

import pytest

from sharegroup.coordinator.classic.consumer_protocol import encode_assignment, encode_subscription
from sharegroup.server.authorization import AclOperation, ResourceType
from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient

OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE_GROUPS, OFFSET_DELETE = (
    8, 9, 11, 12, 13, 14, 15, 16, 42, 47)
SHARE_HEARTBEAT = 76
NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION = 0, 3, 12, 22
INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 23, 25, 26, 27
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, GROUP_NOT_EMPTY, GROUP_ID_NOT_FOUND = 29, 30, 68, 69
MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID, GROUP_SUBSCRIBED_TO_TOPIC = 79, 82, 86
SUBSCRIPTION = encode_subscription(["t"])


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True, overrides={"group.initial.rebalance.delay.ms": "0",
                                                      "group.min.session.timeout.ms": "1000",
                                                      "offset.metadata.max.bytes": "8"})
    b.call(b.store.create_topic("t", 2))
    yield b
    b.stop()


def request(client: RawClient, key: int, version: int, data: dict):
    return client.request(key, version, build(request_class(key, version), data))


def join(client: RawClient, version: int = 9, member_id: str = "", group: str = "g", instance=None,
         protocol_type: str = "consumer", session_ms: int = 10_000, protocols=(("range", SUBSCRIPTION),)):
    return request(client, JOIN, version, {
        "group_id": group, "session_timeout": session_ms, "rebalance_timeout": 10_000, "member_id": member_id,
        "group_instance_id": instance, "protocol_type": protocol_type, "reason": None,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols]})


def sync(client: RawClient, member_id: str, generation: int, assignments=None, version: int = 5, group: str = "g",
         instance=None):
    return request(client, SYNC, version, {
        "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})


def stable_member(client: RawClient, group: str = "g", instance=None) -> tuple[str, int]:
    """One member that joined (v9: MEMBER_ID_REQUIRED first) and synced; (member id, generation)."""
    first = join(client, group=group, instance=instance)
    member_id = first.member_id
    if instance is None:
        assert (first.error_code, first.generation_id) == (MEMBER_ID_REQUIRED, -1)
        first = join(client, member_id=member_id, group=group)
    assert first.error_code == NONE and first.leader == first.member_id
    member_id = first.member_id
    synced = sync(client, member_id, first.generation_id, {member_id: encode_assignment({"t": [0, 1]})}, group=group)
    assert synced.error_code == NONE
    return member_id, first.generation_id


def commit(client: RawClient, version: int, group: str = "g", generation: int = -1, member_id: str = "",
           topic: str = "t", partitions=((0, 5, "meta"),)):
    return request(client, OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "retention_time": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 3, "committed_metadata": m}
            for p, o, m in partitions]}]})


def codes(response) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


def test_join_sync_heartbeat_leave_round_trip_v9(client):
    member_id, generation = stable_member(client)
    assert generation == 1
    assert request(client, HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": member_id,
                                          "group_instance_id": None}).error_code == NONE
    assert request(client, HEARTBEAT, 4, {"group_id": "g", "generation_id": 2, "member_id": member_id,
                                          "group_instance_id": None}).error_code == ILLEGAL_GENERATION
    again = sync(client, member_id, 1)
    assert (again.error_code, again.protocol_type, again.protocol_name) == (NONE, "consumer", "range")
    assert again.assignment == encode_assignment({"t": [0, 1]})
    left = request(client, LEAVE, 5, {"group_id": "g", "members": [
        {"member_id": member_id, "group_instance_id": None, "reason": "bye"},
        {"member_id": "ghost", "group_instance_id": None, "reason": None}]})
    assert left.error_code == NONE
    assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, NONE), ("ghost", UNKNOWN_MEMBER_ID)]


def test_join_v0_joins_directly_and_answers_non_null_protocol_names(client):
    joined = join(client, version=0)
    assert joined.error_code == NONE and joined.member_id and joined.protocol_name == "range"
    refused = join(client, version=0, session_ms=999)
    assert (refused.error_code, refused.protocol_name, refused.generation_id) == (INVALID_SESSION_TIMEOUT, "", -1)
    left = request(client, LEAVE, 0, {"group_id": "g", "member_id": "nobody"})
    assert left.error_code == UNKNOWN_MEMBER_ID


def test_static_member_rejoin_on_the_wire_and_fencing(client):
    member_id, generation = stable_member(client, instance="i1")
    rejoined = join(client, instance="i1")
    assert rejoined.error_code == NONE and rejoined.member_id != member_id
    assert rejoined.skip_assignment and rejoined.generation_id == generation  # the static leader came back
    fenced = request(client, HEARTBEAT, 4, {"group_id": "g", "generation_id": generation, "member_id": member_id,
                                            "group_instance_id": "i1"})
    assert fenced.error_code == FENCED_INSTANCE_ID
    assert sync(client, rejoined.member_id, generation, instance="i1").assignment == encode_assignment({"t": [0, 1]})
    left = request(client, LEAVE, 3, {"group_id": "g", "members": [{"member_id": "", "group_instance_id": "i1"}]})
    assert [(m.group_instance_id, m.error_code) for m in left.members] == [("i1", NONE)]


def test_describe_groups_by_version(client):
    member_id, _ = stable_member(client)
    described = request(client, DESCRIBE, 5, {"groups": ["g", "missing"], "include_authorized_operations": True})
    g, missing = described.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.member_metadata) for m in g.members] == [(member_id, "raw-test", SUBSCRIPTION)]
    assert g.members[0].member_assignment == encode_assignment({"t": [0, 1]})
    everything = sum(1 << op for op in (3, 8, 6, 10, 11))  # READ, DESCRIBE, DELETE, DESCRIBE/ALTER_CONFIGS
    assert g.authorized_operations == everything
    assert (missing.error_code, missing.group_state) == (NONE, "Dead")
    v6 = request(client, DESCRIBE, 6, {"groups": ["missing"], "include_authorized_operations": False})
    assert (v6.groups[0].error_code, v6.groups[0].group_state) == (GROUP_ID_NOT_FOUND, "Dead")


def test_list_groups_shows_classic_and_share_groups_with_type_filter(client):
    stable_member(client, group="classic-g")
    request(client, SHARE_HEARTBEAT, 1, {"group_id": "share-g", "member_id": "M" * 22, "member_epoch": 0,
                                         "rack_id": None, "subscribed_topic_names": ["t"]})
    listed = request(client, LIST, 5, {"states_filter": [], "types_filter": []})
    assert sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups) == [
        ("classic-g", "consumer", "Stable", "classic"), ("share-g", "share", "Stable", "share")]
    classic = request(client, LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert [g.group_id for g in classic.groups] == ["classic-g"]
    v0 = request(client, LIST, 0, {})
    assert sorted(g.group_id for g in v0.groups) == ["classic-g", "share-g"]


def test_group_types_clash_on_the_wire(client):
    request(client, SHARE_HEARTBEAT, 1, {"group_id": "share-g", "member_id": "M" * 22, "member_epoch": 0,
                                         "rack_id": None, "subscribed_topic_names": ["t"]})
    assert join(client, group="share-g").error_code == INCONSISTENT_GROUP_PROTOCOL
    stable_member(client, group="classic-g")
    hb = request(client, SHARE_HEARTBEAT, 1, {"group_id": "classic-g", "member_id": "N" * 22, "member_epoch": 0,
                                              "rack_id": None, "subscribed_topic_names": ["t"]})
    assert hb.error_code == GROUP_ID_NOT_FOUND and "not a share group" in hb.error_message
    deleted = request(client, DELETE_GROUPS, 2, {"groups_names": ["classic-g"]})
    assert deleted.results[0].error_code == GROUP_NOT_EMPTY
    commit(client, 9, group="simple")
    deleted = request(client, DELETE_GROUPS, 2, {"groups_names": ["simple"]})
    assert deleted.results[0].error_code == NONE


def test_offset_commit_and_fetch_across_versions(client):
    committed = commit(client, 2, partitions=((0, 5, "meta"), (1, 6, "x" * 9), (7, 1, "")))
    assert codes(committed) == [("t", 0, NONE), ("t", 1, OFFSET_METADATA_TOO_LARGE), ("t", 7, UNKNOWN_TOPIC_OR_PARTITION)]
    assert codes(commit(client, 9, topic="nope")) == [("nope", 0, UNKNOWN_TOPIC_OR_PARTITION)]
    assert codes(commit(client, 9, group="ghost", generation=3, member_id="m")) == [("t", 0, GROUP_ID_NOT_FOUND)]
    assert codes(commit(client, 8, group="ghost", generation=3, member_id="m")) == [("t", 0, ILLEGAL_GENERATION)]
    v1 = request(client, OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in v1.topics[0].partitions] == [
        (0, 5, "meta", NONE), (1, -1, "", NONE)]
    v7 = request(client, OFFSET_FETCH, 7, {"group_id": "g", "topics": None, "require_stable": True})
    assert v7.error_code == NONE
    assert [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch)
            for t in v7.topics for p in t.partitions] == [("t", 0, 5, -1)]
    v8 = request(client, OFFSET_FETCH, 8, {"require_stable": False, "groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
        {"group_id": "missing", "topics": None}]})
    assert [(g.group_id, g.error_code, [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions])
            for g in v8.groups] == [("g", NONE, [(0, 5)]), ("missing", NONE, [])]
    commit(client, 9, partitions=((1, 40, ""),))
    v9 = request(client, OFFSET_FETCH, 9, {"require_stable": True, "groups": [
        {"group_id": "g", "member_id": None, "member_epoch": -1, "topics": [{"name": "t", "partition_indexes": [1]}]}]})
    assert [(p.committed_offset, p.committed_leader_epoch) for t in v9.groups[0].topics for p in t.partitions] == [(40, 3)]


def test_offset_commit_member_checks_of_a_classic_group(client):
    member_id, generation = stable_member(client)
    assert codes(commit(client, 9, generation=generation, member_id=member_id)) == [("t", 0, NONE)]
    assert codes(commit(client, 9, generation=generation + 1, member_id=member_id)) == [("t", 0, ILLEGAL_GENERATION)]
    assert codes(commit(client, 9, generation=generation, member_id="other")) == [("t", 0, UNKNOWN_MEMBER_ID)]
    assert codes(commit(client, 9)) == [("t", 0, UNKNOWN_MEMBER_ID)]  # a simple commit while members exist
    join(client, member_id=member_id)  # the leader rejoins: PreparingRebalance, then CompletingRebalance
    assert codes(commit(client, 9, generation=generation + 1, member_id=member_id)) == [("t", 0, REBALANCE_IN_PROGRESS)]


def test_offset_delete(client):
    member_id, generation = stable_member(client)
    request(client, OFFSET_COMMIT, 9, {"group_id": "g", "generation_id_or_member_epoch": generation,
                                       "member_id": member_id, "group_instance_id": None, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                      "committed_metadata": None}]}]})
    deleted = request(client, OFFSET_DELETE, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "nope", "partitions": [{"partition_index": 0}]}]})
    assert deleted.error_code == NONE
    assert codes(deleted) == [("t", 0, GROUP_SUBSCRIBED_TO_TOPIC), ("nope", 0, UNKNOWN_TOPIC_OR_PARTITION)]
    missing = request(client, OFFSET_DELETE, 0, {"group_id": "missing", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert missing.error_code == GROUP_ID_NOT_FOUND


class Deny:
    """Allows everything except the listed (operation, resource type, name) triples; records the checks."""

    enabled = True

    def __init__(self, *denied: tuple[AclOperation, ResourceType, str]) -> None:
        self.denied = set(denied)
        self.asked: list[tuple[AclOperation, ResourceType, str]] = []

    def authorize(self, principal, host, operation, resource_type, name) -> bool:
        self.asked.append((operation, resource_type, name))
        return (operation, resource_type, name) not in self.denied


G, T = ResourceType.GROUP, ResourceType.TOPIC
READ, DESCRIBE_OP, DELETE_OP = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE


def test_group_apis_ask_read_on_the_group_first(broker, client):
    broker.broker.authorizer = Deny((READ, G, "g"))
    assert join(client).error_code == GROUP_AUTHORIZATION_FAILED
    assert sync(client, "m", 1).error_code == GROUP_AUTHORIZATION_FAILED
    assert request(client, HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                          "group_instance_id": None}).error_code == GROUP_AUTHORIZATION_FAILED
    assert request(client, LEAVE, 5, {"group_id": "g", "members": []}).error_code == GROUP_AUTHORIZATION_FAILED
    assert codes(commit(client, 9)) == [("t", 0, GROUP_AUTHORIZATION_FAILED)]
    assert broker.broker.authorizer.asked == [(READ, G, "g")] * 5  # nothing else was asked
    assert broker.share.coordinator.group_type("g") is None


def test_offset_apis_ask_for_topics_after_the_group(broker, client):
    deny = Deny((READ, T, "t"), (DESCRIBE_OP, T, "t"), (DESCRIBE_OP, G, "hidden"), (DELETE_OP, G, "locked"))
    broker.broker.authorizer = deny
    assert codes(commit(client, 9)) == [("t", 0, TOPIC_AUTHORIZATION_FAILED)]
    assert deny.asked == [(READ, G, "g"), (READ, T, "t")]
    assert broker.share.coordinator.group_type("g") is None  # nothing reached the coordinator
    fetched = request(client, OFFSET_FETCH, 8, {"require_stable": False, "groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
        {"group_id": "hidden", "topics": None}]})
    assert [(g.group_id, g.error_code, codes(g)) for g in fetched.groups] == [
        ("g", NONE, [("t", 0, TOPIC_AUTHORIZATION_FAILED)]), ("hidden", GROUP_AUTHORIZATION_FAILED, [])]
    locked = request(client, OFFSET_DELETE, 0, {"group_id": "locked", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert locked.error_code == GROUP_AUTHORIZATION_FAILED
    described = request(client, DESCRIBE, 5, {"groups": ["hidden", "g"], "include_authorized_operations": False})
    assert [(g.group_id, g.error_code) for g in described.groups] == [("hidden", GROUP_AUTHORIZATION_FAILED), ("g", NONE)]


def test_list_groups_filters_groups_the_client_may_not_describe(broker, client):
    commit(client, 9, group="visible")
    commit(client, 9, group="hidden")
    broker.broker.authorizer = Deny((DESCRIBE_OP, ResourceType.CLUSTER, "kafka-cluster"), (DESCRIBE_OP, G, "hidden"))
    listed = request(client, LIST, 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("visible", "classic", "", "Empty")]


def test_deleting_a_topic_deletes_its_committed_offsets(broker, client):
    assert codes(commit(client, 9, group="simple")) == [("t", 0, NONE)]
    deleted = request(client, 20, 5, {"topic_names": ["t"], "timeout": 1000})
    assert deleted.responses[0].error_code == NONE
    fetched = request(client, OFFSET_FETCH, 7, {"group_id": "simple", "topics": None, "require_stable": False})
    assert (fetched.error_code, fetched.topics) == (NONE, ())
