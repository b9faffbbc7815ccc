"""Bad input on the wire: a frame that is too large or does not decode closes that connection only.

Every case checks both sides: the offending connection is closed by the broker (EOF), and a second
connection opened before the bad input keeps being served afterwards.
"""

from __future__ import annotations

import datetime
import logging
import struct

import pytest
from kio.schema.errors import ErrorCode

from sharegroup.server.codec import ZERO_UUID, build
from tests.server_harness import BrokerThread, RawClient, batch_bytes


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path, overrides={"socket.request.max.bytes": "4096"})
    try:
        yield b
    finally:
        b.stop()


def _metadata(version: int = 13):
    from kio.index import load_request_schema

    return build(load_request_schema(3, version), {
        "topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        "include_cluster_authorized_operations": False})


def _still_serving(client: RawClient) -> bool:
    resp = client.request(3, 13, _metadata())
    return resp.controller_id == 1 and len(resp.brokers) == 1


def _header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """A request header v1 (int16 key, int16 version, int32 correlation id, int16-length client id)."""
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"x"


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(struct.pack(">i", 2**31 - 1), id="huge-size-prefix-no-body"),
        pytest.param(struct.pack(">i", 4097) + b"\0" * 16, id="one-byte-over-the-limit"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(_frame(b"\xff\xfe\xfd"), id="shorter-than-a-header"),
        pytest.param(_frame(b"\x00\x03\x00\x0d\x00\x00\x00\x01\x7f\xff"), id="client-id-longer-than-frame"),
        pytest.param(_frame(_header(3, 13) + b"\x00"), id="header-v1-where-v2-expected"),
        pytest.param(_frame(_header(0, 9) + b"\x05\x01"), id="truncated-produce-body"),
        pytest.param(_frame(_header(999, 0)), id="unknown-api-key"),
        pytest.param(_frame(_header(50, 0)), id="api-key-not-served"),
        pytest.param(_frame(_header(3, 14)), id="metadata-v14"),
        pytest.param(_frame(_header(0, 2)), id="produce-v2"),
        pytest.param(_frame(_header(1, 3)), id="fetch-v3"),
        pytest.param(_frame(bytes(range(256)) * 8), id="garbage"),
    ],
)
def test_bad_frame_closes_only_its_connection(broker, bad, caplog):
    caplog.set_level(logging.INFO, logger="sharegroup.server")
    other = RawClient(broker.broker.port)
    assert _still_serving(other)
    offender = RawClient(broker.broker.port)
    offender.send_raw(bad)
    assert offender.is_closed_by_peer()
    assert _still_serving(other)
    assert any("closing connection" in r.getMessage() for r in caplog.records)
    offender.close()
    other.close()


def test_a_frame_over_the_limit_is_refused_before_its_body_arrives(broker, caplog):
    caplog.set_level(logging.INFO, logger="sharegroup.server")
    offender = RawClient(broker.broker.port)
    offender.send_raw(struct.pack(">i", 100 * 1024 * 1024))  # 100 MiB announced, nothing sent
    assert offender.is_closed_by_peer()
    assert any("exceeds socket.request.max.bytes 4096" in r.getMessage() for r in caplog.records)


def test_a_truncated_frame_from_a_client_that_left_does_not_stall_others(broker):
    other = RawClient(broker.broker.port)
    for _ in range(5):
        leaver = RawClient(broker.broker.port)
        leaver.send_raw(struct.pack(">i", 1000) + b"\0" * 10)  # 10 of 1000 bytes, then gone
        leaver.close()
    assert _still_serving(other)
    other.close()


def test_a_client_stuck_mid_frame_does_not_block_others(broker):
    stuck = RawClient(broker.broker.port)
    stuck.send_raw(struct.pack(">i", 2000) + b"\0" * 100)  # stays connected, never finishes the frame
    other = RawClient(broker.broker.port)
    for _ in range(3):
        assert _still_serving(other)
    stuck.close()
    other.close()


def test_requests_pipelined_before_a_bad_frame_are_answered_first(broker):
    client = RawClient(broker.broker.port)
    good = [client.frame(3, 13, _metadata()) for _ in range(3)]
    client.send_raw(b"".join(good) + _frame(_header(999, 0)))
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    cls = load_response_schema(3, 13)
    cids = []
    for _ in range(3):
        frame = client.read_frame()
        header, _ = entity_reader(cls.__header_schema__)(frame, 0)
        cids.append(header.correlation_id)
    assert cids == [1, 2, 3]
    assert client.is_closed_by_peer()


def test_wrong_api_versions_version_keeps_the_connection(broker):
    client = RawClient(broker.broker.port)
    client.send_raw(client.frame(18, 127, None, header_version=2))
    cid, body = client.read_v0_response(18)
    assert (cid, body.error_code) == (client.correlation_id, ErrorCode.unsupported_version)
    assert _still_serving(client)


async def _disk_on_fire(topic_id, partition, records, *, acks):
    raise RuntimeError("disk on fire")


async def _disk_on_fire_later(topic_id, partition, records, *, acks):
    async def answer():
        raise RuntimeError("disk on fire")
    return answer()


@pytest.mark.parametrize("begin_append", [_disk_on_fire, _disk_on_fire_later], ids=["placing", "waiting"])
def test_a_handler_failure_answers_unknown_server_error_and_keeps_serving(tmp_path, caplog, monkeypatch,
                                                                         begin_append):
    """A Produce that fails unexpectedly, while its appends are placed or while its answer waits for the
    disk, is answered UNKNOWN_SERVER_ERROR (logged) and the connection goes on."""
    caplog.set_level(logging.ERROR, logger="sharegroup.server")
    b = BrokerThread(tmp_path)
    monkeypatch.setattr(b.store, "begin_append", begin_append)  # the store fails every append
    try:
        from kio.index import load_request_schema

        b.call(b.store.create_topic("t", 1))

        client = RawClient(b.broker.port)
        body = build(load_request_schema(0, 9), {
            "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch_bytes()}]}]})
        resp = client.request(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.unknown_server_error
        assert _still_serving(client)
        assert any("Produce v9" in r.getMessage() for r in caplog.records)
    finally:
        b.stop()


def test_metadata_by_zero_topic_id_is_unknown_topic_id(broker):
    from kio.index import load_request_schema

    client = RawClient(broker.broker.port)
    body = build(load_request_schema(3, 12), {"topics": [{"name": None, "topic_id": ZERO_UUID}],
                                              "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    resp = client.request(3, 12, body)
    assert [t.error_code for t in resp.topics] == [ErrorCode.unknown_topic_id]


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path):
    b = BrokerThread(tmp_path, overrides={"connections.max.idle.ms": "100"})
    try:
        idle = RawClient(b.broker.port)
        assert _still_serving(idle)
        assert idle.is_closed_by_peer()  # within the client's bounded I/O timeout
        fresh = RawClient(b.broker.port)
        assert _still_serving(fresh)
    finally:
        b.stop()


def test_read_ahead_is_bounded_by_socket_request_max_bytes(broker):
    """A client pipelining big frames without reading responses: the broker stops reading, then resumes."""
    from kio.index import load_request_schema

    conn = broker.broker
    broker.call(broker.store.create_topic("t", 1))
    client = RawClient(conn.port)
    body = build(load_request_schema(0, 9), {
        "transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch_bytes(1, value=b"v" * 1500)}]}]})
    frames = [client.frame(0, 9, body) for _ in range(6)]  # ~1.6 KB each; the limit is 4096 bytes
    client.send_raw(b"".join(frames))
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    cls = load_response_schema(0, 9)
    offsets = []
    for _ in range(6):
        frame = client.read_frame()
        _header, at = entity_reader(cls.__header_schema__)(frame, 0)
        offsets.append(entity_reader(cls)(frame, at)[0].responses[0].partition_responses[0].base_offset)
    assert offsets == [0, 1, 2, 3, 4, 5]
    client.close()
