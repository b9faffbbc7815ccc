"""Fairness: a normal share consumer's latency alone, then beside clients that misbehave on the wire.

    python bench/bench_fairness.py [--iterations N]                 # prints a table
    python -m pytest bench/bench_fairness.py --benchmark-enable -q   # the same (`make bench`)

One `sharegroup serve` subprocess on 127.0.0.1 (port 0, a fresh data directory, Kafka's defaults for every
limit). A topic of one partition gets `iterations` x 10 records of 100 B. The normal client is a raw kio
loop in this process: ShareFetch (up to 10 records), then ShareAcknowledge (ACCEPT) of what it acquired;
one iteration is that pair of round trips. It runs N iterations alone (share group A), then N more
(share group B, so the same records are acquired again) while a hostile mix runs in another process:

- slowloris: connections that send the first bytes of a frame (half a size prefix, or a prefix and a
  few bytes of body), then nothing;
- pipeliners: connections that send Metadata and ApiVersions requests as fast as the broker takes them
  and never read a response;
- huge announcers: connections that announce a 100 MiB request (`socket.request.max.bytes` exactly)
  and then trickle its body, 1 KiB every 50 ms.

The full mix is 200 slowloris, 50 pipeliners and 10 huge announcers, N = 1000; under
SHAREGROUP_BENCH_SMOKE=1 (or `--benchmark-disable`) it is 20, 5 and 2 with N = 100. The p50 and p99 of
an iteration alone and beside the mix, their ratio, and what the hostile process managed (requests
pipelined, body bytes trickled, connections the broker closed) go to `benchmark.extra_info`. Every wait
is bounded; everything stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import io
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench_e2e import ServePeer  # the same serve subprocess as the end-to-end benchmark

IO_TIMEOUT_S = 30.0
HOSTILE_READY_TIMEOUT_S = 60.0
HOSTILE_MAX_S = 600.0  # the hostile process ends by itself after this, whatever happens here
RECORDS_PER_FETCH = 10
HEARTBEAT_EVERY_S = 2.0  # below Kafka's default share heartbeat interval (5 s) and session timeout (45 s)
RECORD_BYTES = 100
HUGE_FRAME_BYTES = 100 * 1024 * 1024
TRICKLE_BYTES, TRICKLE_EVERY_S = 1024, 0.05
PIPELINE_MAX_REQUESTS = 100_000  # per pipeliner: a bound on what one sends, never reached in practice

FULL = {"iterations": 1000, "slowloris": 200, "pipeliners": 50, "huge": 10}
SMOKE = {"iterations": 100, "slowloris": 20, "pipeliners": 5, "huge": 2}

METADATA, API_VERSIONS, CREATE_TOPICS, PRODUCE = 3, 18, 19, 0
HEARTBEAT, SHARE_FETCH, SHARE_ACK = 76, 78, 79
ACCEPT = 1


# -- a raw kio client -------------------------------------------------------------------------------


def encode_request(api_key: int, version: int, data: dict[str, Any], correlation_id: int) -> bytes:
    """One size-prefixed request frame (header v1 or v2, as the API version's schema says)."""
    from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
    from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
    from kio.serial import entity_writer

    from sharegroup.server.codec import build, request_class

    cls = request_class(api_key, version)
    assert cls is not None
    header_cls = cls.__header_schema__
    assert header_cls in (RequestHeaderV1, RequestHeaderV2)
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                              correlation_id=correlation_id, client_id="bench-fairness"))
    body = build(cls, data)
    entity_writer(cls)(buf, body)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


class RawClient:
    """A blocking socket that sends one request and reads its response."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=IO_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        from kio.serial import entity_reader

        from sharegroup.server.codec import response_class

        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, data, self.correlation_id))
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        cls = response_class(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        assert header.correlation_id == self.correlation_id, (header.correlation_id, self.correlation_id)
        return entity_reader(cls)(frame, offset)[0]

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def record_batch(count: int) -> bytes:
    """An uncompressed RecordBatch v2 of `count` records of RECORD_BYTES (kio's record codec)."""
    import datetime

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch

    now = datetime.datetime.now(datetime.timezone.utc)
    records = tuple(Record(attributes=0, timestamp=now, offset=i, key=None, value=b"x" * RECORD_BYTES, headers=())
                    for i in range(count))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1, records=records,
                                        attributes=0))
    return buf.getvalue()


def prepare_topic(client: RawClient, topic: str, records: int) -> uuid.UUID:
    """Create `topic` (one partition) and produce `records` records to it; returns its topic id."""
    import datetime

    created = client.request(CREATE_TOPICS, 7, {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False})
    assert int(created.topics[0].error_code) == 0, created
    batch = record_batch(500)
    for _ in range(-(-records // 500)):
        produced = client.request(PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=30),
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert int(produced.responses[0].partition_responses[0].error_code) == 0, produced
    metadata = client.request(METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    return metadata.topics[0].topic_id


@dataclass
class LoopResult:
    latencies_s: list[float] = field(default_factory=list)
    records: int = 0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def share_loop(host: str, port: int, topic: str, topic_id: uuid.UUID, group: str, iterations: int) -> LoopResult:
    """Join `group`, then `iterations` x (ShareFetch of up to RECORDS_PER_FETCH, ShareAcknowledge ACCEPT)."""
    client = RawClient(host, port)
    member = uuid.uuid4().hex[:22]
    result = LoopResult()
    try:
        joined = client.request(HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                                              "rack_id": None, "subscribed_topic_names": [topic]})
        assert int(joined.error_code) == 0, joined
        member_epoch, beat_at = joined.member_epoch, time.monotonic() + HEARTBEAT_EVERY_S
        epoch = 0
        partition = [{"partition_index": 0, "acknowledgement_batches": []}]
        for _ in range(iterations):
            if time.monotonic() >= beat_at:  # stay a member, as a consumer does (not timed)
                beat = client.request(HEARTBEAT, 1, {"group_id": group, "member_id": member,
                                                    "member_epoch": member_epoch, "rack_id": None,
                                                    "subscribed_topic_names": None})
                assert int(beat.error_code) == 0, beat
                member_epoch, beat_at = beat.member_epoch, time.monotonic() + HEARTBEAT_EVERY_S
            started = time.perf_counter()
            fetched = client.request(SHARE_FETCH, 1, {
                "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "max_records": RECORDS_PER_FETCH, "batch_size": RECORDS_PER_FETCH,
                "topics": [{"topic_id": topic_id, "partitions": partition}] if epoch == 0 else [],
                "forgotten_topics_data": []})
            assert int(fetched.error_code) == 0, fetched
            epoch += 1
            ranges = [(a.first_offset, a.last_offset) for t in fetched.responses for p in t.partitions
                      for a in p.acquired_records]
            if ranges:
                acked = client.request(SHARE_ACK, 1, {
                    "group_id": group, "member_id": member, "share_session_epoch": epoch,
                    "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": first, "last_offset": last, "acknowledge_types": [ACCEPT]}
                        for first, last in ranges]}]}]})
                assert int(acked.error_code) == 0, acked
                epoch += 1
                result.records += sum(last - first + 1 for first, last in ranges)
            result.latencies_s.append(time.perf_counter() - started)
    finally:
        client.close()
    return result


# -- the hostile mix (in a process of its own) -------------------------------------------------------


def _pipeline_frames() -> bytes:
    """A chunk of pipelined requests: Metadata of every topic and ApiVersions, alternately."""
    frames = []
    for cid in range(100):
        if cid % 2:
            frames.append(encode_request(API_VERSIONS, 3, {"client_software_name": "hostile",
                                                          "client_software_version": "1"}, cid))
        else:
            frames.append(encode_request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                        "include_topic_authorized_operations": False}, cid))
    return b"".join(frames)


async def _hostile_main(host: str, port: int, mix: dict[str, int], ready: Any, stop: Any, report: Any) -> None:
    loop = asyncio.get_running_loop()
    stats = {"connected": 0, "refused": 0, "pipelined_requests": 0, "trickled_bytes": 0, "closed_by_broker": 0}
    writers: list[asyncio.StreamWriter] = []
    deadline = loop.time() + HOSTILE_MAX_S

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), IO_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            stats["refused"] += 1
            return None
        stats["connected"] += 1
        writers.append(writer)
        return reader, writer

    async def slowloris(i: int) -> None:
        conn = await connect()
        if conn is None:
            return
        _reader, writer = conn
        writer.write(b"\0\0" if i % 2 else struct.pack(">i", 200) + b"\0\x03")

    pipeline_chunk = _pipeline_frames()

    async def pipeliner() -> None:
        conn = await connect()
        if conn is None:
            return
        _reader, writer = conn
        sent = 0
        try:
            while sent < PIPELINE_MAX_REQUESTS and loop.time() < deadline and not stop.is_set():
                writer.write(pipeline_chunk)
                await writer.drain()  # returns only while the broker keeps reading
                sent += 100
                stats["pipelined_requests"] += 100
        except (ConnectionError, OSError):
            stats["closed_by_broker"] += 1

    async def huge() -> None:
        conn = await connect()
        if conn is None:
            return
        _reader, writer = conn
        try:
            writer.write(struct.pack(">i", HUGE_FRAME_BYTES))
            chunk = b"\0" * TRICKLE_BYTES
            while loop.time() < deadline and not stop.is_set():
                writer.write(chunk)
                await writer.drain()
                stats["trickled_bytes"] += TRICKLE_BYTES
                await asyncio.sleep(TRICKLE_EVERY_S)
        except (ConnectionError, OSError):
            stats["closed_by_broker"] += 1

    await asyncio.gather(*(slowloris(i) for i in range(mix["slowloris"])))
    tasks = [asyncio.create_task(pipeliner()) for _ in range(mix["pipeliners"])]
    tasks += [asyncio.create_task(huge()) for _ in range(mix["huge"])]
    await asyncio.sleep(0.2)  # every connection opened and its first bytes sent
    ready.set()
    while not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for writer in writers:
        writer.transport.abort()
    report.put(stats)


def _hostile_process(host: str, port: int, mix: dict[str, int], ready: Any, stop: Any, report: Any) -> None:
    asyncio.run(_hostile_main(host, port, mix, ready, stop, report))


_SPAWN = multiprocessing.get_context("spawn")


class HostileMix:
    """The hostile clients in a process of their own, started and stopped around the measured loop."""

    def __init__(self, host: str, port: int, mix: dict[str, int]) -> None:
        self._ready, self._stop, self._report = _SPAWN.Event(), _SPAWN.Event(), _SPAWN.Queue()
        self.proc = _SPAWN.Process(target=_hostile_process, args=(host, port, mix, self._ready, self._stop,
                                                                  self._report), daemon=True)
        self.proc.start()
        if not self._ready.wait(HOSTILE_READY_TIMEOUT_S):
            self.close()
            raise RuntimeError("the hostile clients did not connect in time")

    def close(self) -> dict[str, int]:
        self._stop.set()
        stats: dict[str, int] = {}
        try:
            stats = self._report.get(timeout=IO_TIMEOUT_S)
        except Exception:
            pass
        self.proc.join(IO_TIMEOUT_S)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(IO_TIMEOUT_S)
        return stats


# -- one comparison ---------------------------------------------------------------------------------


@dataclass
class Fairness:
    alone: LoopResult
    hostile: LoopResult
    hostile_stats: dict[str, int]
    mix: dict[str, int]
    serve_cpu_s: float

    @property
    def p99_ratio(self) -> float:
        return self.hostile.quantile(0.99) / self.alone.quantile(0.99)

    def extra_info(self) -> dict[str, Any]:
        ms = 1000.0
        return {
            "iterations": self.mix["iterations"],
            "slowloris": self.mix["slowloris"], "pipeliners": self.mix["pipeliners"], "huge": self.mix["huge"],
            "alone_p50_ms": round(self.alone.quantile(0.5) * ms, 3),
            "alone_p99_ms": round(self.alone.quantile(0.99) * ms, 3),
            "alone_mean_ms": round(statistics.fmean(self.alone.latencies_s) * ms, 3),
            "hostile_p50_ms": round(self.hostile.quantile(0.5) * ms, 3),
            "hostile_p99_ms": round(self.hostile.quantile(0.99) * ms, 3),
            "hostile_mean_ms": round(statistics.fmean(self.hostile.latencies_s) * ms, 3),
            "p99_ratio": round(self.p99_ratio, 2),
            "p50_ratio": round(self.hostile.quantile(0.5) / self.alone.quantile(0.5), 2),
            "records_alone": self.alone.records, "records_hostile": self.hostile.records,
            "serve_cpu_s": round(self.serve_cpu_s, 2),
            **{f"hostile_{key}": value for key, value in self.hostile_stats.items()},
        }

    def table(self) -> str:
        info = self.extra_info()
        return "\n".join([
            f"fairness: {info['iterations']} ShareFetch+ShareAcknowledge iterations; hostile mix "
            f"{info['slowloris']} slowloris, {info['pipeliners']} pipeliners, {info['huge']} huge announcers",
            f"  alone:        p50 {info['alone_p50_ms']:8.2f} ms   p99 {info['alone_p99_ms']:8.2f} ms",
            f"  with hostile: p50 {info['hostile_p50_ms']:8.2f} ms   p99 {info['hostile_p99_ms']:8.2f} ms",
            f"  p99 ratio {info['p99_ratio']:.2f}x   p50 ratio {info['p50_ratio']:.2f}x   serve CPU "
            f"{info['serve_cpu_s']:.1f} s",
            f"  hostile: {self.hostile_stats}",
        ])


def compare(mix: dict[str, int]) -> Fairness:
    """Serve, a topic, the loop alone (group A), then the loop beside the hostile mix (group B)."""
    peer = ServePeer(("--port", "0", "--group-config", "share.auto.offset.reset=earliest"))
    try:
        host, port_text = peer.bootstrap.rsplit(":", 1)
        port = int(port_text)
        setup = RawClient(host, port)
        try:
            topic = f"fair-{uuid.uuid4().hex[:8]}"
            topic_id = prepare_topic(setup, topic, mix["iterations"] * RECORDS_PER_FETCH)
        finally:
            setup.close()
        share_loop(host, port, topic, topic_id, "warm-up", min(20, mix["iterations"]))
        cpu_from = peer.cpu_s()
        alone = share_loop(host, port, topic, topic_id, "group-a", mix["iterations"])
        hostile_mix = HostileMix(host, port, mix)
        try:
            hostile = share_loop(host, port, topic, topic_id, "group-b", mix["iterations"])
        finally:
            stats = hostile_mix.close()
        cpu_s = peer.cpu_s() - cpu_from
        if peer.proc.poll() is not None:
            raise RuntimeError(f"serve exited: {peer.stderr_tail()}")
    finally:
        peer.close()
    return Fairness(alone, hostile, stats, mix, cpu_s)


def mix_for(disabled: bool = False) -> dict[str, int]:
    mix = dict(SMOKE if os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1" or disabled else FULL)
    if os.environ.get("SHAREGROUP_BENCH_FAIRNESS_ITERATIONS"):
        mix["iterations"] = int(os.environ["SHAREGROUP_BENCH_FAIRNESS_ITERATIONS"])
    return mix


# -- pytest-benchmark -------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the script needs no pytest
    pytest = None

if pytest is not None:

    @pytest.mark.benchmark(group="serve: fairness under hostile clients")
    def test_fairness_beside_hostile_clients(request, benchmark, capsys):
        """The normal loop's p50/p99 alone and beside the hostile mix, and their ratio, in
        `benchmark.extra_info`. The timing (one round) is the whole comparison, serve's start included;
        only `extra_info` carries the numbers."""
        config = request.config
        disabled = config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)
        mix = mix_for(disabled)
        result = benchmark.pedantic(compare, args=(mix,), rounds=1, iterations=1)
        benchmark.extra_info.update(result.extra_info())
        with capsys.disabled():
            print("\n" + result.table())
        assert len(result.alone.latencies_s) == len(result.hostile.latencies_s) == mix["iterations"]
        assert result.alone.records > 0 and result.hostile.records > 0
        assert result.hostile_stats.get("connected", 0) > 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--smoke", action="store_true", help="the small mix of the smoke run")
    args = parser.parse_args(argv)
    mix = mix_for(args.smoke)
    if args.iterations is not None:
        mix["iterations"] = args.iterations
    print(compare(mix).table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
