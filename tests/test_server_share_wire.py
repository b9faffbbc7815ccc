"""Raw kio requests for the share APIs of `sharegroup serve`: what real clients never get wrong.

Session epochs, acknowledgement errors, member epochs on the heartbeat, unknown topic ids, the exact
bytes and fields of a ShareFetch answer, and a closed connection releasing its session's records.
"""

from __future__ import annotations

import time
import uuid

import pytest

from sharegroup.server.codec import ZERO_UUID, build, request_class
from tests.server_harness import BrokerThread, RawClient, batch_bytes, stored_batches

HEARTBEAT, FETCH, ACK, DESCRIBE = 76, 78, 79, 77
NONE, INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 0, 42, 25, 110
UNKNOWN_TOPIC_ID, INVALID_RECORD_STATE, SESSION_NOT_FOUND, INVALID_SESSION_EPOCH = 100, 121, 122, 123
GROUP_ID_NOT_FOUND = 69
ACCEPT, RELEASE = 1, 2
MEMBER_A, MEMBER_B = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, share=True,
                     overrides={"group.share.min.record.lock.duration.ms": 1000},
                     group_configs={"share.record.lock.duration.ms": 2000, "share.auto.offset.reset": "earliest"})
    yield b
    b.stop()



def topic_with_records(broker: BrokerThread, name: str = "t", count: int = 3) -> uuid.UUID:
    """A topic of one partition holding one batch of `count` records, subscribed by group g (a member
    joining is what makes the coordinator initialize the group's share-partition state)."""
    info = broker.call(broker.store.create_topic(name, 1))
    broker.call(broker.store.append(info.topic_id, 0, batch_bytes(count), acks=-1))
    joiner = RawClient(broker.broker.port)
    try:
        assert heartbeat(joiner, "JJJJJJJJJJJJJJJJJJJJJJ", 0, [name]).error_code == NONE
    finally:
        joiner.close()
    return info.topic_id


def fetch(client: RawClient, epoch: int, topics=(), member: str = MEMBER_A, version: int = 1, max_wait_ms: int = 0,
          forgotten=(), group: str = "g"):
    body = build(request_class(FETCH, version), {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": max_wait_ms,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": acks}
                                                    for p, acks in parts]} for tid, parts in topics],
        "forgotten_topics_data": list(forgotten),
    })
    return client.request(FETCH, version, body)


def acknowledge(client: RawClient, epoch: int, topic_id: uuid.UUID, acks, member: str = MEMBER_A, version: int = 1):
    body = build(request_class(ACK, version), {
        "group_id": "g", "member_id": member, "share_session_epoch": epoch,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}],
    })
    return client.request(ACK, version, body)


def heartbeat(client: RawClient, member: str, epoch: int, topics=None, group: str = "g"):
    body = build(request_class(HEARTBEAT, 1), {"group_id": group, "member_id": member, "member_epoch": epoch,
                                                 "rack_id": None, "subscribed_topic_names": topics})
    return client.request(HEARTBEAT, 1, body)


def ack(first: int, last: int, kind: int) -> dict:
    return {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}


def partitions(response) -> list:
    return [p for t in response.responses for p in t.partitions]


def acquired(response) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) of every acquired range of the answer."""
    return [(a.first_offset, a.last_offset, a.delivery_count) for p in partitions(response) for a in p.acquired_records]


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_ships_the_stored_batch_bytes_and_acquired_ranges(broker, client, version):
    topic_id = topic_with_records(broker, count=3)
    response = fetch(client, 0, [(topic_id, [(0, [])])], version=version)
    assert (response.error_code, response.acquisition_lock_timeout.total_seconds()) == (NONE, 2.0)
    assert response.node_endpoints == ()
    (topic,) = response.responses
    assert topic.topic_id == topic_id
    (part,) = topic.partitions
    assert (part.partition_index, part.error_code, part.acknowledge_error_code) == (0, NONE, NONE)
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records] == [(0, 2, 1)]
    assert bytes(part.records) == b"".join(stored_batches(broker.store, topic_id, 0))


def test_an_empty_answer_carries_empty_records_never_null(broker, client):
    topic_id = topic_with_records(broker, count=1)
    fetch(client, 0, [(topic_id, [(0, [])])])
    response = fetch(client, 1, [(topic_id, [(0, [])])])  # nothing left to acquire
    assert response.error_code == NONE
    assert all(p.records == b"" and p.acquired_records == () for p in partitions(response))


def test_session_epochs_of_share_fetch(broker, client):
    topic_id = topic_with_records(broker)
    assert fetch(client, 5, [(topic_id, [(0, [])])]).error_code == SESSION_NOT_FOUND
    assert fetch(client, 0, [(topic_id, [(0, [ack(0, 0, ACCEPT)])])]).error_code == INVALID_REQUEST  # acks at 0
    opened = fetch(client, 0, [(topic_id, [(0, [])])])
    assert opened.error_code == NONE
    wrong = fetch(client, 2)  # the next epoch is 1
    assert (wrong.error_code, wrong.responses, wrong.acquisition_lock_timeout.total_seconds()) == (
        INVALID_SESSION_EPOCH, (), 0)
    assert fetch(client, 1).error_code == NONE
    assert acknowledge(client, 2, topic_id, [ack(0, 2, ACCEPT)]).error_code == NONE  # ShareAcknowledge bumps too
    assert fetch(client, 3).error_code == NONE


def test_session_epochs_of_share_acknowledge(broker, client):
    topic_id = topic_with_records(broker)
    assert acknowledge(client, 0, topic_id, [ack(0, 0, ACCEPT)]).error_code == INVALID_SESSION_EPOCH
    assert acknowledge(client, 1, topic_id, [ack(0, 0, ACCEPT)]).error_code == SESSION_NOT_FOUND
    assert acknowledge(client, -1, topic_id, [ack(0, 0, ACCEPT)]).error_code == SESSION_NOT_FOUND
    fetch(client, 0, [(topic_id, [(0, [])])])
    closed = acknowledge(client, -1, topic_id, [ack(0, 2, ACCEPT)], version=2)  # the final epoch: ack, then close
    assert closed.error_code == NONE
    assert [(p.partition_index, p.error_code) for p in partitions(closed)] == [(0, NONE)]
    assert closed.acquisition_lock_timeout.total_seconds() == 2.0  # a v2 field
    assert fetch(client, 1).error_code == SESSION_NOT_FOUND
    assert broker.share.manager.share_partition("g", topic_id, 0).start_offset == 3  # the acks counted


def test_acknowledging_records_another_member_holds_is_invalid_record_state(broker, client):
    topic_id = topic_with_records(broker)
    other = RawClient(broker.broker.port)
    try:
        fetch(client, 0, [(topic_id, [(0, [])])])  # A holds 0-2
        fetch(other, 0, [(topic_id, [(0, [])])], member=MEMBER_B)
        response = acknowledge(other, 1, topic_id, [ack(0, 2, ACCEPT)], member=MEMBER_B)
        assert response.error_code == NONE
        assert [(p.partition_index, p.error_code) for p in partitions(response)] == [(0, INVALID_RECORD_STATE)]
        piggy = fetch(client, 1, [(topic_id, [(0, [ack(0, 2, ACCEPT)])])])  # the holder's own ack works
        assert [(p.partition_index, p.acknowledge_error_code) for p in partitions(piggy)] == [(0, NONE)]
    finally:
        other.close()


def test_ack_ranges_out_of_order_are_invalid_request(broker, client):
    topic_id = topic_with_records(broker)
    fetch(client, 0, [(topic_id, [(0, [])])])
    response = acknowledge(client, 1, topic_id, [ack(2, 2, ACCEPT), ack(0, 1, ACCEPT)])
    assert [p.error_code for p in partitions(response)] == [INVALID_REQUEST]


def test_unknown_topic_id_is_a_partition_error(broker, client):
    unknown = uuid.uuid4()
    response = fetch(client, 0, [(unknown, [(0, [])])])
    assert response.error_code == NONE
    got = [(t.topic_id, p.partition_index, p.error_code, p.records) for t in response.responses for p in t.partitions]
    assert got == [(unknown, 0, UNKNOWN_TOPIC_ID, b"")]


def test_a_closed_connection_releases_its_session_records(broker, client):
    topic_id = topic_with_records(broker)
    first = fetch(client, 0, [(topic_id, [(0, [])])])
    assert acquired(first) == [(0, 2, 1)]
    client.close()  # no acknowledgement, no final epoch: the broker releases A's records
    other = RawClient(broker.broker.port)
    try:
        again = fetch(other, 0, [(topic_id, [(0, [])])], member=MEMBER_B, max_wait_ms=5000)
        assert acquired(again) == [(0, 2, 2)]
        assert broker.share.manager.sessions.get("g", MEMBER_A) is None
    finally:
        other.close()


def test_heartbeat_member_epochs(broker, client):
    info = broker.call(broker.store.create_topic("hb", 2))
    joined = heartbeat(client, MEMBER_A, 0, ["hb"])
    assert (joined.error_code, joined.member_id) == (NONE, MEMBER_A)
    assert joined.member_epoch >= 1 and joined.heartbeat_interval.total_seconds() == 5.0
    assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(info.topic_id, (0, 1))]
    epoch = joined.member_epoch
    steady = heartbeat(client, MEMBER_A, epoch)
    assert (steady.error_code, steady.member_epoch, steady.assignment) == (NONE, epoch, None)
    fenced = heartbeat(client, MEMBER_A, epoch + 5)
    assert (fenced.error_code, fenced.member_id, fenced.member_epoch, fenced.assignment) == (
        FENCED_MEMBER_EPOCH, None, 0, None)
    assert heartbeat(client, MEMBER_B, 3).error_code == UNKNOWN_MEMBER_ID
    assert heartbeat(client, MEMBER_A, 0, ["hb"], group="").error_code == INVALID_REQUEST
    assert heartbeat(client, MEMBER_A, 1, None, group="nope").error_code == GROUP_ID_NOT_FOUND
    left = heartbeat(client, MEMBER_A, -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.heartbeat_interval.total_seconds(),
            left.assignment) == (NONE, MEMBER_A, -1, 0, None)
    assert heartbeat(client, MEMBER_A, epoch).error_code == UNKNOWN_MEMBER_ID


def test_share_group_describe(broker, client):
    info = broker.call(broker.store.create_topic("d", 1))
    epoch = heartbeat(client, MEMBER_A, 0, ["d"]).member_epoch
    body = build(request_class(DESCRIBE, 1), {"group_ids": ["g", "missing"], "include_authorized_operations": False})
    response = client.request(DESCRIBE, 1, body)
    described, missing = response.groups
    assert (described.error_code, described.group_id, described.group_state) == (NONE, "g", "Stable")
    (member,) = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (MEMBER_A, epoch, ("d",))
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [
        (info.topic_id, "d", (0,))]
    assert (missing.group_id, missing.error_code) == ("missing", GROUP_ID_NOT_FOUND)
    # an error entry leaves the other fields at the schema's defaults, as Kafka's does
    assert (missing.group_state, missing.group_epoch, missing.assignment_epoch, missing.assignor_name,
            missing.members, missing.authorized_operations) == ("", 0, 0, "", (), -(2**31))


def test_an_expired_member_has_its_records_released_and_its_session_closed(tmp_path):
    """Sessions of 1 s, locks of 30 s: only the member expiry timer can hand A's records to B in time."""
    broker = BrokerThread(tmp_path, share=True, overrides={
        "group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 1000,
        "group.share.min.heartbeat.interval.ms": 100, "group.share.heartbeat.interval.ms": 200},
        group_configs={"share.auto.offset.reset": "earliest"})
    a, b = RawClient(broker.broker.port), RawClient(broker.broker.port)
    try:
        topic_id = topic_with_records(broker)
        assert heartbeat(a, MEMBER_A, 0, ["t"]).error_code == NONE
        held = fetch(a, 0, [(topic_id, [(0, [])])])  # A never heartbeats again, and keeps its connection
        assert acquired(held) == [(0, 2, 1)]
        again = fetch(b, 0, [(topic_id, [(0, [])])], member=MEMBER_B, max_wait_ms=8000)
        assert acquired(again) == [(0, 2, 2)]
        assert broker.share.manager.sessions.get("g", MEMBER_A) is None
        assert fetch(a, 1).error_code == SESSION_NOT_FOUND
    finally:
        a.close()
        b.close()
        broker.stop()


def test_serve_metrics_count_share_requests_with_kafka_names(tmp_path):
    """`sharegroup serve --metrics-port 0` exposes the manager's share metrics (read at scrape time)."""
    import urllib.request

    from tests.server_harness import ServeProcess

    server = ServeProcess(tmp_path, "--metrics-port", "0", "--group-config", "share.auto.offset.reset=earliest")
    client = RawClient(server.port)
    try:
        url = server.proc.stderr.readline().split(" metrics on ", 1)[1].strip()
        assert heartbeat(client, MEMBER_A, 0, ["m"]).error_code == NONE  # the topic does not exist yet
        created = client.request(3, 12, build(request_class(3, 12), {  # as a producer does before producing
            "topics": [{"name": "m", "topic_id": ZERO_UUID}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}))
        assert created.topics[0].error_code == NONE
        produced = client.request(0, 9, build(request_class(0, 9), {
            "transactional_id": None, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": "m", "partition_data": [{"index": 0, "records": batch_bytes(2)}]}]}))
        topic_id, deadline = None, time.monotonic() + 15
        while topic_id is None and time.monotonic() < deadline:  # the heartbeat that sees the new topic assigns it
            answer = heartbeat(client, MEMBER_A, 0, ["m"])
            if answer.assignment and answer.assignment.topic_partitions:
                topic_id = answer.assignment.topic_partitions[0].topic_id
        assert topic_id is not None
        assert produced.responses[0].partition_responses[0].error_code == NONE
        assert acquired(fetch(client, 0, [(topic_id, [(0, [])])])) == [(0, 1, 1)]
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "sharegroup_share_sessions_count 1.0" in text
        assert f'sharegroup_total_share_fetch_requests_total{{topic="{topic_id}"}} 1.0' in text
    finally:
        client.close()
        code, _out, err = server.terminate()
    assert code == 0, err[-2000:]


def test_a_full_session_cache_refuses_new_sessions_until_the_final_epoch_frees_one(tmp_path):
    broker = BrokerThread(tmp_path, share=True, overrides={"group.share.max.share.sessions": 1},
                          group_configs={"share.auto.offset.reset": "earliest"})
    a, b = RawClient(broker.broker.port), RawClient(broker.broker.port)
    try:
        topic_id = topic_with_records(broker)
        assert fetch(a, 0, [(topic_id, [(0, [])])]).error_code == NONE
        full = fetch(b, 0, [(topic_id, [(0, [])])], member=MEMBER_B)
        assert (full.error_code, full.responses) == (133, ())  # SHARE_SESSION_LIMIT_REACHED
        assert fetch(a, -1).error_code == NONE  # closes A's session and releases its records
        assert fetch(a, 1).error_code == SESSION_NOT_FOUND
        reopened = fetch(b, 0, [(topic_id, [(0, [])])], member=MEMBER_B)
        assert (reopened.error_code, acquired(reopened)) == (NONE, [(0, 2, 2)])
    finally:
        a.close()
        b.close()
        broker.stop()


def test_a_heartbeat_member_id_must_be_set_by_the_client(broker, client):
    """ShareGroupHeartbeat v1: the client generates its member id; an empty one (even on a join) or one
    longer than 36 characters is INVALID_REQUEST, and no member joins."""
    broker.call(broker.store.create_topic("hb", 1))
    for member in ("", "x" * 37, "   "):
        refused = heartbeat(client, member, 0, ["hb"])
        assert (refused.error_code, refused.member_id, refused.member_epoch) == (INVALID_REQUEST, None, 0), member
    body = build(request_class(DESCRIBE, 1), {"group_ids": ["g"], "include_authorized_operations": False})
    (group,) = client.request(DESCRIBE, 1, body).groups
    assert group.error_code == GROUP_ID_NOT_FOUND  # nothing joined: the group was never created


def test_a_share_session_survives_its_member_reconnecting_quickly(broker):
    """Rule: closing a connection removes only the share sessions that connection owns. The member
    re-opens its session (epoch 0) on a new connection while that fetch long-polls, and only then does
    the broker handle the old connection's close: the new session (and the records the member still
    holds) must survive it, and the next ShareFetch at epoch 1 is served."""
    topic_id = topic_with_records(broker, count=3)
    old, new = RawClient(broker.broker.port), RawClient(broker.broker.port)
    try:
        assert acquired(fetch(old, 0, [(topic_id, [(0, [])])])) == [(0, 2, 1)]
        first_session = broker.share.manager.sessions.get("g", MEMBER_A)
        old_id = broker.connection_id_of(old.sock.getsockname()[1])
        body = build(request_class(FETCH, 1), {
            "group_id": "g", "member_id": MEMBER_A, "share_session_epoch": 0, "max_wait": 10000,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []})
        new.send_raw(new.frame(FETCH, 1, body))  # nothing acquirable: it long-polls
        deadline = time.monotonic() + 10
        while broker.share.manager.sessions.get("g", MEMBER_A) is first_session:
            assert time.monotonic() < deadline, "the epoch-0 fetch never reached the broker"
            time.sleep(0.01)
        old.close()
        broker.wait_until_closed(old_id)  # the old connection's close is fully handled
        broker.call(broker.store.append(topic_id, 0, batch_bytes(2), acks=-1))  # wakes the long poll
        reopened = new.read_response(FETCH, 1)
        assert (reopened.error_code, acquired(reopened)) == (NONE, [(3, 4, 1)])
        subsequent = fetch(new, 1, [(topic_id, [(0, [ack(0, 4, ACCEPT)])])])  # 0-2 are still the member's
        assert subsequent.error_code == NONE
        assert [(p.partition_index, p.acknowledge_error_code) for p in partitions(subsequent)] == [(0, NONE)]
        assert broker.share.manager.share_partition("g", topic_id, 0).start_offset == 5
    finally:
        old.close()
        new.close()
