"""CreateTopics v5-v7 answers decoded strictly from the raw bytes: a failed topic's configs are an empty
compact array (length varint 1), never null (0), as Kafka's generated response leaves the field; clients
that decode strictly (kafkajs, @kafkats/client) cannot read a null there."""

from __future__ import annotations

import struct

import pytest

from sharegroup.server.codec import build, request_class
from tests.server_harness import BrokerThread, RawClient

CREATE_TOPICS = 19
NONE, TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG = 0, 36, 38, 40


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(tmp_path)
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    c = RawClient(broker.broker.port)
    yield c
    c.close()


class _Reader:
    """Just enough of the flexible encoding to walk a CreateTopics response field by field."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos:self.pos + n]
        assert len(chunk) == n, "response ends early"
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def int(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _topics(frame: bytes, version: int) -> list[tuple[str | None, int, int]]:
    """(name, error code, raw configs length varint) of each topic; asserts the whole frame is consumed."""
    r = _Reader(frame)
    r.int(">i")  # correlation id
    r.tags()  # response header v1
    r.int(">i")  # throttle time
    out = []
    for _ in range(r.uvarint() - 1):
        name = r.string()
        if version >= 7:
            r.take(16)
        code = r.int(">h")
        r.string()  # error message
        r.int(">i"), r.int(">h")  # num partitions, replication factor
        configs_len = r.uvarint()
        for _ in range(max(configs_len - 1, 0)):
            r.string(), r.string(), r.take(1), r.take(1), r.take(1)
            r.tags()
        r.tags()
        out.append((name, code, configs_len))
    r.tags()
    assert r.pos == len(frame)
    return out


@pytest.mark.parametrize("version", [5, 6, 7])
def test_a_failed_topic_has_an_empty_configs_array_never_null(broker, client, version):
    broker.call(broker.store.create_topic("exists", 1))
    topic = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    topics = [{**topic, "name": "exists"}, {**topic, "name": "rf3", "replication_factor": 3},
              {**topic, "name": "cfg", "configs": [{"name": "retention.ms", "value": "x"}]}]
    body = build(request_class(CREATE_TOPICS, version), {"topics": topics, "timeout": 5000, "validate_only": False})
    client.send_raw(client.frame(CREATE_TOPICS, version, body))
    assert _topics(client.read_frame(), version) == [
        ("exists", TOPIC_ALREADY_EXISTS, 1), ("rf3", INVALID_REPLICATION_FACTOR, 1), ("cfg", INVALID_CONFIG, 1)]
