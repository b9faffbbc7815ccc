"""The wire limits of `sharegroup serve` with raw sockets: requests in flight per connection, Kafka's
connection quotas (`max.connections`, per listener, `max.connections.per.ip` and its overrides), request
bodies bounded in time by `connections.max.idle.ms`, memory of a huge announced frame, socket buffers.

Every wait is bounded (`wait_until`, the raw client's I/O timeout); short timings come from overrides.
"""

from __future__ import annotations

import datetime
import socket
import struct
import threading
import time
import tracemalloc

import pytest

from sharegroup.server.broker_config import ServeConfig, parse_connection_overrides
from sharegroup.server.codec import build
from sharegroup.server.connection import MAX_IN_FLIGHT_REQUESTS
from tests.server_harness import IO_TIMEOUT_S, BrokerThread, RawClient, batch_bytes, run_cli

METADATA, FETCH, PRODUCE = 3, 1, 0
REQUESTS = 20  # pipelined by the client that does not read
# One Fetch answer of this fills the kernel buffers (socket.send.buffer.bytes, Kafka's 100 KiB, and the
# client's receive buffer) and then the transport's send buffer past SEND_BUFFER_HIGH_BYTES.
BIG_RECORD_BYTES = 1_000_000
WAIT_S = 10.0


def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    """Return as soon as `predicate()` holds (checked every 10 ms); fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _metadata_body():
    from kio.index import load_request_schema

    return build(load_request_schema(METADATA, 12), {
        "topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})


def served(client: RawClient) -> bool:
    """One Metadata round trip on `client` (False when the broker closed it instead)."""
    try:
        return client.request(METADATA, 12, _metadata_body()).controller_id == 1
    except (ConnectionError, OSError):
        return False


def closed_after_reading_what_came(client: RawClient) -> bool:
    """Reads whatever the broker had sent, then True at EOF or reset (within the client's I/O timeout)."""
    try:
        while client.sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True


def connections_of(broker: BrokerThread) -> list:
    return broker.call(_snapshot(broker))


async def _snapshot(broker: BrokerThread) -> list:
    return list(broker.broker.connections)


def _counter(family, *labels) -> float:
    return (family.labels(*labels) if labels else family)._value.get()


@pytest.fixture
def stop_later():
    brokers: list[BrokerThread] = []
    yield brokers.append
    for b in brokers:
        b.stop()


def start(tmp_path, stop_later, **overrides) -> BrokerThread:
    b = BrokerThread(tmp_path, overrides={k.replace("_", "."): str(v) for k, v in overrides.items()})
    stop_later(b)
    return b


# -- requests in flight per connection ------------------------------------------------------------------


def _fetch_frame(client: RawClient, topic_id) -> bytes:
    from kio.index import load_request_schema

    body = build(load_request_schema(FETCH, 13), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                          "fetch_offset": 0, "last_fetched_epoch": -1,
                                                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    return client.frame(FETCH, 13, body)


def test_a_client_that_pipelines_and_never_reads_stops_being_read_at_the_bound(tmp_path, stop_later):
    """20 Fetches of a 1 MB batch pipelined by a client that reads nothing: the broker reads exactly
    MAX_IN_FLIGHT_REQUESTS of them and stops (its send buffer is full); once the client reads, every
    response comes back, in request order, and never more than the bound were in flight."""
    b = start(tmp_path, stop_later)
    info = b.call(b.store.create_topic("big", 1))
    b.call(b.store.append(info.topic_id, 0, batch_bytes(1, value=b"v" * BIG_RECORD_BYTES), acks=-1))
    client = RawClient(b.broker.port)
    frames = [_fetch_frame(client, info.topic_id) for _ in range(REQUESTS)]
    client.send_raw(b"".join(frames))  # ~2 KB: the kernel takes it all, whatever the broker reads

    def stalled() -> bool:
        conns = connections_of(b)
        return len(conns) == 1 and conns[0].in_flight == MAX_IN_FLIGHT_REQUESTS and conns[0].reads_paused >= 1

    wait_until(stalled, "the broker to stop reading the pipelining connection")
    (conn,) = connections_of(b)
    assert conn.requests_handled < REQUESTS - MAX_IN_FLIGHT_REQUESTS  # stopped, not merely slow
    handled_before = b.broker.request_counts["Fetch"]
    assert handled_before <= conn.requests_handled + 1  # nothing beyond the bound was even decoded

    from kio.index import load_response_schema
    from kio.serial import entity_reader

    cls = load_response_schema(FETCH, 13)
    correlation_ids = []
    for _ in range(REQUESTS):
        frame = client.read_frame()
        header, _ = entity_reader(cls.__header_schema__)(frame, 0)
        correlation_ids.append(header.correlation_id)
    assert correlation_ids == list(range(1, REQUESTS + 1))
    assert conn.max_in_flight == MAX_IN_FLIGHT_REQUESTS
    assert b.broker.request_counts["Fetch"] == REQUESTS
    client.close()


def test_other_connections_are_served_while_one_is_stalled(tmp_path, stop_later):
    b = start(tmp_path, stop_later)
    info = b.call(b.store.create_topic("big", 1))
    b.call(b.store.append(info.topic_id, 0, batch_bytes(1, value=b"v" * BIG_RECORD_BYTES), acks=-1))
    hog = RawClient(b.broker.port)
    hog.send_raw(b"".join(_fetch_frame(hog, info.topic_id) for _ in range(20)))
    wait_until(lambda: any(c.reads_paused for c in connections_of(b)), "the hog to be paused")
    other = RawClient(b.broker.port)
    assert all(served(other) for _ in range(5))
    hog.close()
    other.close()


def test_a_client_that_never_reads_is_closed_after_connections_max_idle_ms(tmp_path, stop_later):
    b = start(tmp_path, stop_later, connections_max_idle_ms=300)
    info = b.call(b.store.create_topic("big", 1))
    b.call(b.store.append(info.topic_id, 0, batch_bytes(1, value=b"v" * BIG_RECORD_BYTES), acks=-1))
    timed_out = _counter(b.broker.metrics.connections_timed_out, "responses")
    hog = RawClient(b.broker.port)
    hog.send_raw(b"".join(_fetch_frame(hog, info.topic_id) for _ in range(20)))
    wait_until(lambda: any(c.reads_paused for c in connections_of(b)), "the hog to be paused")
    wait_until(lambda: not connections_of(b), "the non-reading connection to be closed")
    assert _counter(b.broker.metrics.connections_timed_out, "responses") == timed_out + 1
    assert b.broker.quotas.total == 0
    hog.close()


def test_the_broker_stops_promptly_beside_a_client_that_does_not_read(tmp_path):
    """Stopping drops what a non-reading client was sent (it would otherwise wait for it to read)."""
    b = BrokerThread(tmp_path)
    try:
        info = b.call(b.store.create_topic("big", 1))
        b.call(b.store.append(info.topic_id, 0, batch_bytes(1, value=b"v" * BIG_RECORD_BYTES), acks=-1))
        hog = RawClient(b.broker.port)
        hog.send_raw(b"".join(_fetch_frame(hog, info.topic_id) for _ in range(REQUESTS)))
        wait_until(lambda: any(c.reads_paused for c in connections_of(b)), "the hog to be paused")
    finally:
        b.stop()  # within the harness's bounded wait, or it raises
    assert closed_after_reading_what_came(hog)
    hog.close()


# -- connection quotas --------------------------------------------------------------------------------


def _open(port: int, source: str = "127.0.0.1") -> RawClient:
    client = RawClient.__new__(RawClient)
    client.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S, source_address=(source, 0))
    client.correlation_id = 0
    return client


def test_max_connections_per_ip_closes_the_extra_connection_at_once(tmp_path, stop_later):
    b = start(tmp_path, stop_later, max_connections_per_ip=2)
    rejected = _counter(b.broker.metrics.connections_rejected, "PLAINTEXT")
    first, second = RawClient(b.broker.port), RawClient(b.broker.port)
    assert served(first) and served(second)
    third = RawClient(b.broker.port)
    assert third.is_closed_by_peer()
    assert _counter(b.broker.metrics.connections_rejected, "PLAINTEXT") == rejected + 1
    assert served(first) and served(second)  # the others keep being served
    first.close()
    wait_until(lambda: b.broker.quotas.per_ip["127.0.0.1"] == 1, "the closed connection to be uncounted")
    fourth = RawClient(b.broker.port)
    assert served(fourth)
    for c in (second, third, fourth):
        c.close()


def test_per_ip_overrides_by_address_and_by_host_name(tmp_path, stop_later):
    b = start(tmp_path, stop_later, max_connections_per_ip=0,
              max_connections_per_ip_overrides="localhost:2, 127.0.0.3:1")
    local = [_open(b.broker.port), _open(b.broker.port)]  # localhost resolves to 127.0.0.1
    assert all(served(c) for c in local)
    assert _open(b.broker.port).is_closed_by_peer()  # a third from 127.0.0.1
    assert _open(b.broker.port, "127.0.0.2").is_closed_by_peer()  # no override: the default 0
    allowed = _open(b.broker.port, "127.0.0.3")
    assert served(allowed)
    assert _open(b.broker.port, "127.0.0.3").is_closed_by_peer()
    for c in (*local, allowed):
        c.close()


def test_max_connections_blocks_accepting_until_a_connection_closes(tmp_path, stop_later):
    b = start(tmp_path, stop_later, max_connections=2)
    first, second = RawClient(b.broker.port), RawClient(b.broker.port)
    assert served(first) and served(second)
    waiting = RawClient(b.broker.port)  # the kernel completes the handshake; the broker accepts no more
    waiting.send_raw(waiting.frame(METADATA, 12, _metadata_body()))
    wait_until(lambda: "PLAINTEXT" in b.broker.quotas.blocked, "the acceptor to wait for a slot")
    assert len(connections_of(b)) == 2 and b.broker.quotas.total == 2
    assert served(first)  # the connections it has are served meanwhile
    assert "PLAINTEXT" in b.broker.quotas.blocked
    first.close()
    assert waiting.read_response(METADATA, 12).controller_id == 1  # served once a slot is free
    wait_until(lambda: "PLAINTEXT" not in b.broker.quotas.blocked, "the acceptor to go on")
    assert _counter(b.broker.metrics.acceptor_blocked_seconds, "PLAINTEXT") > 0
    second.close()
    waiting.close()


def test_a_listener_limit_blocks_only_its_listener(tmp_path, stop_later):
    b = start(tmp_path, stop_later, listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
              listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
              **{"listener.name.plaintext.max.connections": 1})
    other_port = b.broker.bound["OTHER"][1]
    first = RawClient(b.broker.port)
    assert served(first)
    blocked = RawClient(b.broker.port)
    wait_until(lambda: "PLAINTEXT" in b.broker.quotas.blocked, "the PLAINTEXT acceptor to wait")
    others = [RawClient(other_port) for _ in range(3)]
    assert all(served(c) for c in others)
    assert "OTHER" not in b.broker.quotas.blocked
    first.close()
    assert served(blocked)
    for c in (blocked, *others):
        c.close()


def test_override_syntax_and_kafkas_start_up_checks():
    assert parse_connection_overrides("hostName:100, 127.0.0.1:200,::1:3,[fe80::1]:4,") == {
        "hostName": 100, "127.0.0.1": 200, "::1": 3, "fe80::1": 4}
    for bad, message in [("127.0.0.1", "expected HOST:COUNT"), ("127.0.0.1:x", "must be an integer"),
                         ("a b:1", "invalid addresses"), ("h:-1", "must be in"), (":5", "expected HOST:COUNT")]:
        with pytest.raises(ValueError, match=message) as caught:
            ServeConfig.build({"max.connections.per.ip.overrides": bad})
        assert "max.connections.per.ip.overrides" in str(caught.value)
    with pytest.raises(ValueError, match="max.connections.per.ip can be set to zero only if"):
        ServeConfig.build({"max.connections.per.ip": "0"})
    with pytest.raises(ValueError, match="max.connections must be in"):
        ServeConfig.build({"max.connections": "-1"})
    config = ServeConfig.build({"listener.name.PLAINTEXT.max.connections": "7"})
    assert config.listener_configs == {"listener.name.plaintext.max.connections": 7}
    assert not config.warnings


@pytest.mark.parametrize("override, message", [
    ("max.connections.per.ip.overrides=127.0.0.1", "max.connections.per.ip.overrides"),
    ("max.connections.per.ip=0", "max.connections.per.ip can be set to zero"),
    ("max.connections.per.ip.overrides=no-such-host.invalid:5", "cannot resolve host 'no-such-host.invalid'"),
])
def test_serve_refuses_bad_connection_limits_at_start(tmp_path, override, message):
    result = run_cli("serve", "--port", "0", "--data", str(tmp_path / "data"), "--override", override)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was opened


# -- request bodies bounded in time, memory of a huge announced frame -----------------------------------


def test_a_request_body_that_stalls_closes_the_connection_after_connections_max_idle_ms(tmp_path, stop_later):
    b = start(tmp_path, stop_later, connections_max_idle_ms=300)
    timed_out = _counter(b.broker.metrics.connections_timed_out, "request")
    stalled = RawClient(b.broker.port)
    stalled.send_raw(struct.pack(">i", 1000) + b"\0" * 10)  # 10 of 1000 bytes, then nothing
    assert stalled.is_closed_by_peer()
    assert _counter(b.broker.metrics.connections_timed_out, "request") == timed_out + 1
    other = RawClient(b.broker.port)
    assert served(other)
    other.close()


def test_a_trickled_body_is_bounded_in_time_too(tmp_path, stop_later):
    """A body whose bytes keep coming, but too slowly to arrive whole in connections.max.idle.ms."""
    b = start(tmp_path, stop_later, connections_max_idle_ms=300)
    trickler = RawClient(b.broker.port)
    trickler.send_raw(struct.pack(">i", 100_000))
    closed = threading.Event()

    def trickle() -> None:
        deadline = time.monotonic() + WAIT_S
        try:
            while not closed.is_set() and time.monotonic() < deadline:
                trickler.sock.sendall(b"\0" * 100)
                time.sleep(0.02)
        except OSError:
            pass

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        assert trickler.is_closed_by_peer()
    finally:
        closed.set()
        sender.join(WAIT_S)
    trickler.close()


def test_an_idle_connection_with_a_request_in_flight_is_not_idle(tmp_path, stop_later):
    """A long-poll (ShareFetch-like: a Fetch with max_wait) longer than connections.max.idle.ms keeps its
    connection: idle counts only while nothing is in flight."""
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader

    b = start(tmp_path, stop_later, connections_max_idle_ms=300)
    info = b.call(b.store.create_topic("empty", 1))
    client = RawClient(b.broker.port)
    body = build(load_request_schema(FETCH, 13), {
        "replica_id": -1, "max_wait": 800, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic_id": info.topic_id, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                               "fetch_offset": 0, "last_fetched_epoch": -1,
                                                               "log_start_offset": -1,
                                                               "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    client.send_raw(client.frame(FETCH, 13, body))
    frame = client.read_frame()
    header, _ = entity_reader(load_response_schema(FETCH, 13).__header_schema__)(frame, 0)
    assert header.correlation_id == client.correlation_id
    assert served(client)
    client.close()


def test_a_huge_announced_frame_allocates_only_what_arrived(tmp_path, stop_later):
    """100 MiB announced (the default socket.request.max.bytes, so allowed), 256 KiB sent: the broker holds
    about what arrived, not what was announced, and still serves others."""
    b = start(tmp_path, stop_later)
    tracemalloc.start()
    try:
        huge = RawClient(b.broker.port)
        huge.send_raw(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * (256 * 1024))
        wait_until(lambda: any(c.body_received >= 128 * 1024 for c in connections_of(b)),
                   "the broker to read part of the body")
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, peak
    other = RawClient(b.broker.port)
    assert served(other)
    huge.close()
    other.close()


def test_an_announced_size_over_the_limit_is_refused_before_its_body(tmp_path, stop_later):
    b = start(tmp_path, stop_later, socket_request_max_bytes=4096)
    offender = RawClient(b.broker.port)
    offender.send_raw(struct.pack(">i", 100 * 1024 * 1024))
    assert offender.is_closed_by_peer()
    offender.close()


# -- socket buffers ------------------------------------------------------------------------------------


def test_socket_send_buffer_bytes_sizes_accepted_sockets(tmp_path, stop_later):
    b = start(tmp_path, stop_later, socket_send_buffer_bytes=8192)
    client = RawClient(b.broker.port)
    assert served(client)
    (conn,) = connections_of(b)
    sndbuf = conn.writer.get_extra_info("socket").getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    assert 8192 <= sndbuf <= 2 * 8192  # Linux doubles what is set
    client.close()


def test_produce_pipelined_up_to_the_bound_keeps_its_order(tmp_path, stop_later):
    """A producer with several requests in flight (as max.in.flight.requests.per.connection allows) gets
    its offsets in request order."""
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader

    b = start(tmp_path, stop_later)
    b.call(b.store.create_topic("t", 1))
    client = RawClient(b.broker.port)
    body = build(load_request_schema(PRODUCE, 9), {
        "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch_bytes(2)}]}]})
    client.send_raw(b"".join(client.frame(PRODUCE, 9, body) for _ in range(3 * MAX_IN_FLIGHT_REQUESTS)))
    cls = load_response_schema(PRODUCE, 9)
    offsets = []
    for _ in range(3 * MAX_IN_FLIGHT_REQUESTS):
        frame = client.read_frame()
        _header, at = entity_reader(cls.__header_schema__)(frame, 0)
        offsets.append(entity_reader(cls)(frame, at)[0].responses[0].partition_responses[0].base_offset)
    assert offsets == [2 * i for i in range(3 * MAX_IN_FLIGHT_REQUESTS)]
    client.close()


# -- turns of pipelined requests ---------------------------------------------------------------------


def test_pipelined_requests_start_one_per_pass_of_the_event_loop_in_fifo_order():
    """Three pipelining connections each start three requests: one start per pass of the loop, taken in
    the order asked (A, B, C, A, ...); a cancelled waiter does not hold the others up."""
    import asyncio

    from sharegroup.server.turns import PipelineTurns

    async def scenario() -> tuple[list[tuple[int, str]], int]:
        loop = asyncio.get_running_loop()
        turns = PipelineTurns()
        passes = [0]
        ticking = [True]

        def tick() -> None:  # counts passes of the loop while the scenario runs
            passes[0] += 1
            if ticking[0]:
                loop.call_soon(tick)

        loop.call_soon(tick)
        started: list[tuple[int, str]] = []

        async def connection(name: str) -> None:
            for _ in range(3):
                await turns.take()
                started.append((passes[0], name))
                turns._check()
                await asyncio.sleep(0)  # the request's handling

        doomed = asyncio.create_task(turns.take())  # takes the free turn of this pass
        await asyncio.sleep(0)
        waiting = asyncio.create_task(turns.take())  # queued behind it, then cancelled
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(doomed, waiting, return_exceptions=True)
        await asyncio.gather(*(connection(n) for n in "ABC"))
        ticking[0] = False
        return started, turns.waiting

    started, left_waiting = asyncio.run(scenario())
    assert [name for _pass, name in started] == list("ABC" * 3)
    pass_numbers = [p for p, _name in started]
    assert len(set(pass_numbers)) == len(pass_numbers)  # never two starts in one pass
    assert left_waiting == 0
