"""A 3-broker Kafka-protocol cluster for tests: librdkafka's mock cluster, reached through ctypes.

The confluent-kafka wheel bundles librdkafka, which contains a mock cluster (`rd_kafka_mock_*`, an
experimental C API with no ABI promise; confluent-kafka is pinned for that reason). The Python
package has no binding for it, so this module calls the C functions directly: it builds a cluster of
`num_brokers` loopback brokers and exposes the failure controls the tests use (broker down/up, leader
moves, injected request errors, round-trip time).

What the mock is and is not (check before trusting a test written on it):
- every "replica" shares one in-process log, so a leader move never loses data; failover tests
  exercise the client's retries and idempotence, not ISR or unclean-election behaviour;
- it has no CreateTopics, DeleteRecords or DescribeConfigs; topics are made with `create_topic`;
- every InitProducerId mints a fresh producer id, so a second `init_transactions` does not fence the
  first, and a read_committed fetch does not hide aborted records;
- each partition keeps at most 5 MiB or 100 000 message sets (older ones are dropped silently).
"""

from __future__ import annotations

import ctypes
import glob
import os

import confluent_kafka

__all__ = ["MockCluster", "ApiKey"]


class ApiKey:
    """Kafka request API keys used with `push_request_errors`."""

    PRODUCE = 0
    FETCH = 1
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    END_TXN = 26


def _library() -> ctypes.CDLL:
    base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    paths = sorted(glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*")))
    if not paths:
        raise RuntimeError("no bundled librdkafka found next to confluent_kafka")
    lib = ctypes.CDLL(paths[0])
    p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = p
    lib.rd_kafka_conf_set.argtypes = [p, s, s, s, ctypes.c_size_t]
    lib.rd_kafka_new.restype = p
    lib.rd_kafka_new.argtypes = [i, p, s, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [p]
    lib.rd_kafka_mock_cluster_new.restype = p
    lib.rd_kafka_mock_cluster_new.argtypes = [p, i]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = s
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [p]
    lib.rd_kafka_mock_topic_create.argtypes = [p, s, i, i]
    lib.rd_kafka_mock_partition_set_leader.argtypes = [p, s, ctypes.c_int32, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_down.argtypes = [p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_up.argtypes = [p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_rtt.argtypes = [p, ctypes.c_int32, i]
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [p, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(i)]
    return lib


class MockCluster:
    """A mock cluster of `num_brokers` brokers (ids 1..n) on loopback; `close()` stops it."""

    def __init__(self, num_brokers: int = 3) -> None:
        self._lib = lib = _library()
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, 512)
        self._rk = lib.rd_kafka_new(0, conf, errstr, 512)  # a producer handle that owns the cluster
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not self._mc:
            lib.rd_kafka_destroy(self._rk)
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self.num_brokers = num_brokers
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 3) -> None:
        self._ok(self._lib.rd_kafka_mock_topic_create(self._mc, topic.encode(), partitions, replication_factor))

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        self._ok(self._lib.rd_kafka_mock_partition_set_leader(self._mc, topic.encode(), partition, broker_id))

    def broker_down(self, broker_id: int) -> None:
        self._ok(self._lib.rd_kafka_mock_broker_set_down(self._mc, broker_id))

    def broker_up(self, broker_id: int) -> None:
        self._ok(self._lib.rd_kafka_mock_broker_set_up(self._mc, broker_id))

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        self._ok(self._lib.rd_kafka_mock_broker_set_rtt(self._mc, broker_id, rtt_ms))

    def push_request_errors(self, api_key: int, *errors: int) -> None:
        """The next `len(errors)` requests of `api_key` (to any broker) fail with these codes in turn."""
        array = (ctypes.c_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._mc, api_key, len(errors), array)

    def close(self) -> None:
        if self._mc:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._lib.rd_kafka_destroy(self._rk)
            self._mc = self._rk = None

    def _ok(self, err: int) -> None:
        if err:
            raise RuntimeError(f"mock cluster call failed: {confluent_kafka.KafkaError(err).str()}")
