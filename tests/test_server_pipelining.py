"""A connection's Produce requests overlap: the next one's appends are placed while the previous one's
fsync is in flight, answers go out in request order, at most MAX_IN_FLIGHT_REQUESTS of them are begun,
nothing is answered before it is durable, and a refused fsync refuses every request that shared it.

The topic store's fsync is held at a gate (fault injection) so that what happens while one is in flight
is seen without timing: every wait is bounded (`wait_until`, the raw client's I/O timeout).
"""

from __future__ import annotations

import datetime
import errno
import os
import select
import threading

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from sharegroup.server.codec import build
from sharegroup.server.connection import MAX_IN_FLIGHT_REQUESTS
from tests.server_harness import IO_TIMEOUT_S, BrokerThread, RawClient, batch_bytes
from tests.test_server_limits import connections_of, wait_until

PRODUCE, METADATA = 0, 3
RECORDS_PER_BATCH = 2
BATCH = batch_bytes(RECORDS_PER_BATCH)


class FsyncGate:
    """The store's fsync: passes until `arm()`, then the next fsync waits until `open()` (and fails with
    EIO when armed with `fail=True`)."""

    def __init__(self) -> None:
        self._armed = threading.Event()
        self.entered = threading.Event()  # an fsync is held at the gate
        self._opened = threading.Event()
        self.fail = False

    def arm(self, *, fail: bool = False) -> None:
        self.fail = fail
        self._armed.set()

    def open(self) -> None:
        self._opened.set()

    def __call__(self, fd: int) -> None:
        if self._armed.is_set() and not self._opened.is_set():
            self.entered.set()
            assert self._opened.wait(IO_TIMEOUT_S), "the test never opened the fsync gate"
            if self.fail:
                raise OSError(errno.EIO, "injected fsync failure")
        os.fdatasync(fd)


@pytest.fixture
def gated(tmp_path, monkeypatch):
    """A broker whose topic store fsyncs through a FsyncGate, with topic "t" (one partition) holding one
    batch already (its segment exists, so only data fsyncs are left to hold)."""
    gate = FsyncGate()
    monkeypatch.setattr("sharegroup.topics.topic_store.os_fsync", gate)
    b = BrokerThread(tmp_path)
    try:
        info = b.call(b.store.create_topic("t", 1))
        b.call(b.store.append(info.topic_id, 0, BATCH, acks=-1))
        yield b, gate, info.topic_id
    finally:
        gate.open()
        b.stop()


def _produce_frame(client: RawClient, acks: int = -1) -> bytes:
    body = build(load_request_schema(PRODUCE, 9), {
        "transactional_id": None, "acks": acks, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]})
    return client.frame(PRODUCE, 9, body)


def _metadata_frame(client: RawClient) -> bytes:
    body = build(load_request_schema(METADATA, 12), {
        "topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return client.frame(METADATA, 12, body)


def _read(client: RawClient, api_key: int, version: int) -> tuple[int, object]:
    cls = load_response_schema(api_key, version)
    frame = client.read_frame()
    header, at = entity_reader(cls.__header_schema__)(frame, 0)
    return header.correlation_id, entity_reader(cls)(frame, at)[0]


def _partition_answer(client: RawClient) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of the next Produce answer."""
    cid, body = _read(client, PRODUCE, 9)
    part = body.responses[0].partition_responses[0]
    return cid, part.error_code, part.base_offset


def _begun(b: BrokerThread, topic_id) -> int:
    """Produce requests whose batches are placed and on their way to the disk (not yet written)."""
    async def read() -> int:
        return b.store.partition_log(topic_id, 0).stats()["queued_bytes"] // len(BATCH)

    return b.call(read())


def _nothing_to_read(client: RawClient) -> bool:
    return not select.select([client.sock], [], [], 0)[0]


def test_the_next_produce_is_appended_while_the_previous_ones_fsync_is_in_flight(gated):
    """Three Produce requests sent at once: while the first one's fsync is held, the other two are
    placed too (they will share the next fsync), nothing is answered, and once the disk answers the
    three answers come in request order with their offsets in that order."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm()
    frames = [_produce_frame(client) for _ in range(3)]
    client.send_raw(b"".join(frames))
    wait_until(lambda: gate.entered.is_set() and _begun(b, topic_id) == 3, "three Produce requests begun")
    assert _nothing_to_read(client)  # the first is not durable yet: no answer, and none overtakes it
    gate.open()
    answers = [_partition_answer(client) for _ in range(3)]
    first = RECORDS_PER_BATCH  # after the batch the fixture appended
    assert answers == [(i + 1, ErrorCode.none, first + RECORDS_PER_BATCH * i) for i in range(3)]
    log = b.store.partition_log(topic_id, 0)
    assert log.log_end_offset == first + 3 * RECORDS_PER_BATCH
    client.close()


def test_answers_made_durable_by_one_group_commit_leave_in_one_send(gated):
    """While the first Produce's fsync is held, two more are placed (the next group commit); once the disk
    answers, the answers that became ready together are written to the socket together: fewer sends than
    answers, and still in request order."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm()
    client.send_raw(b"".join(_produce_frame(client) for _ in range(3)))
    wait_until(lambda: gate.entered.is_set() and _begun(b, topic_id) == 3, "three Produce requests begun")
    (conn,) = connections_of(b)
    sends: list[int] = []
    write = conn.writer.write

    def counted(data: bytes) -> None:
        sends.append(len(data))
        write(data)

    conn.writer.write = counted  # type: ignore[method-assign]
    gate.open()
    answers = [_partition_answer(client) for _ in range(3)]
    assert [cid for cid, _, _ in answers] == [1, 2, 3]
    assert all(code == ErrorCode.none for _, code, _ in answers)
    assert 1 <= len(sends) < 3, sends
    client.close()


def test_acks_1_waits_for_the_disk_too(gated):
    """acks=1 is answered after the fsync as well (serve's rule: every acknowledged produce is durable)."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm()
    client.send_raw(b"".join(_produce_frame(client, acks=1) for _ in range(2)))
    wait_until(lambda: gate.entered.is_set() and _begun(b, topic_id) == 2, "two Produce requests begun")
    assert _nothing_to_read(client)
    gate.open()
    assert [_partition_answer(client)[:2] for _ in range(2)] == [(1, ErrorCode.none), (2, ErrorCode.none)]
    client.close()


def test_at_most_max_in_flight_requests_are_begun(gated):
    """A producer pipelining three times the bound while the disk is held: exactly MAX_IN_FLIGHT_REQUESTS
    requests are read and begun, the connection is not read further, and every request is answered in
    order once the disk answers."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm()
    count = 3 * MAX_IN_FLIGHT_REQUESTS
    client.send_raw(b"".join(_produce_frame(client) for _ in range(count)))

    def stalled_at_the_bound() -> bool:
        conns = connections_of(b)
        return (len(conns) == 1 and conns[0].in_flight == MAX_IN_FLIGHT_REQUESTS and conns[0].reads_paused >= 1
                and _begun(b, topic_id) == MAX_IN_FLIGHT_REQUESTS)

    wait_until(stalled_at_the_bound, "the connection stalled at the bound")
    (conn,) = connections_of(b)
    assert _begun(b, topic_id) == MAX_IN_FLIGHT_REQUESTS  # the reader stopped: no sixth request begun
    assert conn.requests_handled == 0 and _nothing_to_read(client)
    gate.open()
    answers = [_partition_answer(client) for _ in range(count)]
    first = RECORDS_PER_BATCH
    assert answers == [(i + 1, ErrorCode.none, first + RECORDS_PER_BATCH * i) for i in range(count)]
    assert conn.max_in_flight == MAX_IN_FLIGHT_REQUESTS
    client.close()


def test_a_refused_fsync_refuses_every_request_begun_behind_it(gated):
    """The held fsync fails: the request it carried and the ones placed meanwhile are all answered
    KAFKA_STORAGE_ERROR, in order, and none of their records is readable."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm(fail=True)
    client.send_raw(b"".join(_produce_frame(client) for _ in range(3)))
    wait_until(lambda: gate.entered.is_set() and _begun(b, topic_id) == 3, "three Produce requests begun")
    gate.open()
    answers = [_partition_answer(client)[:2] for _ in range(3)]
    assert answers == [(i + 1, ErrorCode.kafka_storage_error) for i in range(3)]
    assert b.store.log_end_offset(topic_id, 0) == RECORDS_PER_BATCH  # only the fixture's batch
    client.close()


def test_another_request_behind_a_produce_is_answered_after_it(gated):
    """Produce, Metadata, Produce sent at once while the first fsync is held: the Metadata answer does
    not overtake the first Produce's, and the three come back in request order."""
    b, gate, topic_id = gated
    client = RawClient(b.broker.port)
    gate.arm()
    client.send_raw(_produce_frame(client) + _metadata_frame(client) + _produce_frame(client))
    wait_until(gate.entered.is_set, "the first Produce's fsync held")
    assert _nothing_to_read(client)
    gate.open()
    assert _partition_answer(client) == (1, ErrorCode.none, RECORDS_PER_BATCH)
    cid, metadata = _read(client, METADATA, 12)
    assert (cid, metadata.controller_id) == (2, 1)
    assert _partition_answer(client) == (3, ErrorCode.none, 2 * RECORDS_PER_BATCH)
    client.close()


def test_a_produce_places_every_partition_before_it_waits(gated):
    """A Produce to two partitions places both appends before either is durable (they share the fsync
    round trip instead of taking one each), and answers both once the disk does."""
    b, gate, _topic_id = gated
    info = b.call(b.store.create_topic("u", 2))
    client = RawClient(b.broker.port)
    gate.arm()
    body = build(load_request_schema(PRODUCE, 9), {
        "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": "u", "partition_data": [{"index": 0, "records": BATCH},
                                                         {"index": 1, "records": BATCH}]}]})
    client.send_raw(client.frame(PRODUCE, 9, body))

    def placed(partition: int) -> int:
        async def read() -> int:
            return b.store.partition_log(info.topic_id, partition).stats()["queued_bytes"] // len(BATCH)

        return b.call(read())

    wait_until(lambda: gate.entered.is_set() and placed(0) == 1 and placed(1) == 1, "both partitions placed")
    assert _nothing_to_read(client)
    gate.open()
    cid, answer = _read(client, PRODUCE, 9)
    parts = sorted((p.index, p.error_code, p.base_offset) for p in answer.responses[0].partition_responses)
    assert (cid, parts) == (1, [(0, ErrorCode.none, 0), (1, ErrorCode.none, 0)])
    client.close()
