"""`sharegroup serve` as a process with real clients: what a producer was told is on disk, even after SIGKILL.

The process is killed with SIGKILL right after the producer's delivery reports; the log files are then
read through the topic store (Fetch is not served yet) and must hold every acknowledged record with its
exact offset, key, value and headers. A restart on the same directory keeps the topic ids and continues
the offsets.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import urllib.request

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("sharegroup.topics.topic_store", reason="the durable topic store is not in this tree yet")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.server_harness import ServeProcess  # noqa: E402

TIMEOUT_S = 15.0


@pytest.fixture
def serve(tmp_path):
    started: list[ServeProcess] = []

    def start(*extra: str) -> ServeProcess:
        proc = ServeProcess(tmp_path / "data", *extra)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


def _stored_records(data_dir, topic: str) -> tuple[object, dict[int, list[tuple[int, bytes, bytes, tuple]]]]:
    """Open the topic store on `data_dir` and decode every stored record: partition -> [(offset, key, value, headers)]."""
    from kio.records.readers import read_batch

    from sharegroup.server.serve import open_store
    from sharegroup.server.broker_config import ServeConfig

    async def read():
        store = await open_store(data_dir, ServeConfig.build())
        try:
            info = store.topic_by_name(topic)
            out = {}
            for partition in range(info.num_partitions):
                end = store.log_end_offset(info.topic_id, partition)
                got = []
                offset = 0
                while offset < end:
                    result = store.read(info.topic_id, partition, offset, 1 << 20)
                    for batch in result.batches:
                        data = bytes(batch.records)
                        decoded, _ = read_batch(data, 0)
                        got.extend((r.offset, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
                                   for r in decoded.records)
                        offset = batch.last_offset + 1
                out[partition] = got
            return info.topic_id, out
        finally:
            await store.close()

    return asyncio.run(read())


def _produce(bootstrap: str, topic: str, count: int, start: int = 0) -> list[tuple[int, int, bytes, bytes, tuple]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    reports = []

    sent_headers = {}

    def delivered(err, msg):
        assert err is None, err
        reports.append((msg.partition(), msg.offset(), msg.key(), msg.value(), sent_headers[msg.key()]))

    for i in range(start, start + count):
        key = b"key-%d" % i
        headers = [("trace", b"t-%d" % i), ("empty", b"")]
        sent_headers[key] = tuple((k.encode(), v) for k, v in headers)
        producer.produce(topic, key=key, value=b"\x00value\xff-%d" % i, partition=i % 2, headers=headers,
                         on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    return reports


def test_acknowledged_records_survive_sigkill_and_restart_keeps_ids_and_offsets(serve, tmp_path):
    proc = serve()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("durable", 2, 1)])["durable"].result(TIMEOUT_S)
    reports = _produce(proc.bootstrap, "durable", 40)
    assert len(reports) == 40
    proc.terminate(signal.SIGKILL)

    topic_id, stored = _stored_records(tmp_path / "data", "durable")
    for partition in (0, 1):
        told = sorted((off, key, value, headers) for p, off, key, value, headers in reports if p == partition)
        assert [t[0] for t in told] == list(range(20))
        assert stored[partition] == told  # offsets, keys, values and headers byte-exact

    again = serve()
    metadata = AdminClient({"bootstrap.servers": again.bootstrap}).list_topics(timeout=TIMEOUT_S)
    assert sorted(metadata.topics["durable"].partitions) == [0, 1]
    more = _produce(again.bootstrap, "durable", 4, start=40)
    assert sorted((p, off) for p, off, *_ in more) == [(0, 20), (0, 21), (1, 20), (1, 21)]
    code, _out, err = again.terminate(signal.SIGTERM)
    assert code == 0, err
    same_id, stored = _stored_records(tmp_path / "data", "durable")
    assert same_id == topic_id
    assert [len(stored[p]) for p in (0, 1)] == [22, 22]


def test_metrics_port_exposes_wire_metrics(serve):
    proc = serve("--metrics-port", "0")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.proc.stderr.readline()), daemon=True)
    reader.start()
    reader.join(TIMEOUT_S)
    assert lines and "metrics on http://" in lines[0], lines
    url = lines[0].split("metrics on ", 1)[1].strip()
    AdminClient({"bootstrap.servers": proc.bootstrap}).list_topics(timeout=TIMEOUT_S)
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    assert 'sharegroup_server_requests_total{api="Metadata"}' in text
    assert 'sharegroup_server_requests_total{api="ApiVersions"}' in text
    assert "sharegroup_server_connections" in text
    # the share-state log's own metrics are on the same page (serve opened its LocalPersister)
    assert 'sharegroup_persister_fsyncs_total{log="' in text
