"""The share coordinator's conformance suite (tests/test_persister_coordinator.py) run over a
KafkaRecordLog on the 3-broker librdkafka mock cluster: every test there that lets `open_coordinator`
choose the log runs here once more, each on a fresh topic; tests that build their own MemoryLog are
skipped (they ran there already).

The mock has no DeleteRecords, so each log here gets a stand-in for the admin call that accepts the
deletion (the log's own bookkeeping, the Kafka offset it would delete below, is what runs); the real
call's fallback on a cluster without it is tested in tests/test_persister_kafka.py."""

from __future__ import annotations

import asyncio
import itertools

import pytest

pytest.importorskip("confluent_kafka")

from persister import KafkaRecordLog, MemoryLog, ShareCoordinator  # noqa: E402
from sharegroup.clock import ManualClock  # noqa: E402

from . import test_persister_coordinator as suite  # noqa: E402
from .kafka_mock import MockCluster  # noqa: E402

_topics = itertools.count()
_opened: list[KafkaRecordLog] = []
_cluster: MockCluster | None = None

# Every test function of the suite, collected here too (with its parametrization and marks).
for _name, _test in vars(suite).items():
    if _name.startswith("test_") and callable(_test):
        globals()[_name] = _test


@pytest.fixture(scope="module")
def cluster():
    global _cluster
    _cluster = MockCluster(3)
    yield _cluster
    _cluster.close()
    _cluster = None


async def open_coordinator(n=500, *, log=None, clock=None, interval_ms=300_000) -> ShareCoordinator:
    """The suite's `open_coordinator`, over a KafkaRecordLog on a fresh topic unless given a log."""
    if log is None:
        topic = f"conformance-{next(_topics)}"
        _cluster.create_topic(topic, partitions=1, replication_factor=3)
        log = await KafkaRecordLog.open(
            _cluster.bootstrap_servers, topic=topic, client_config={"log_level": 0}, timeout_s=15.0
        )
        log._delete_records = lambda kafka_offset: None  # DeleteRecords accepted (the mock has none)
        _opened.append(log)
    return await ShareCoordinator.open(
        log,
        snapshot_update_records_per_snapshot=n,
        cold_checkpoint_interval_ms=interval_ms,
        clock=clock if clock is not None else ManualClock(1_000),
    )


@pytest.fixture(autouse=True)
def log_kind(request, cluster, monkeypatch):
    """Replaces the suite's fixture of the same name: one run, over a KafkaRecordLog."""
    reason = getattr(request.function, "memory_log_only", None)
    if reason is not None:
        pytest.skip(f"MemoryLog only: {reason}")
    monkeypatch.setattr(suite, "open_coordinator", open_coordinator)
    yield "kafka"
    while _opened:
        log = _opened.pop()
        assert isinstance(log, KafkaRecordLog) and not isinstance(log, MemoryLog)
        asyncio.run(log.close())
