"""Share-state maintenance over the Kafka-topic backend (KafkaPersister on the librdkafka mock, see
tests/kafka_mock.py): the prune job issues DeleteRecords below the prunable offset and keeps the log's
in-memory copy bounded by what a replay needs, and a restart recovers equal state. The mock has no
DeleteRecords: one test stands in for the call to see its offsets, the other runs against the mock's
refusal (the topic keeps everything, memory does not)."""

from __future__ import annotations

import itertools
import uuid

import pytest
from prometheus_client import CollectorRegistry

pytest.importorskip("confluent_kafka")

from persister import KafkaPersister  # noqa: E402
from sharegroup.clock import ManualClock  # noqa: E402
from sharegroup.server.share_state_maintenance import ShareStateMaintenance  # noqa: E402
from sharegroup.types import StateBatch  # noqa: E402

from .conftest import run  # noqa: E402
from .kafka_mock import MockCluster  # noqa: E402

G = "group-maint-kafka"
T = uuid.UUID("00000000-0000-0000-0000-0000000ca11e")
PER_SNAPSHOT = 3
KEYS = (0, 1, 2)
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    mock = MockCluster(3)
    yield mock
    mock.close()


@pytest.fixture
def topic(cluster):
    name = f"maint-{next(_topics)}"
    cluster.create_topic(name, partitions=1, replication_factor=3)
    return name


async def open_persister(cluster, topic, clock) -> KafkaPersister:
    return await KafkaPersister.open(cluster.bootstrap_servers, topic=topic, client_config={"log_level": 0},
                                     timeout_s=15.0, clock=clock, snapshot_update_records_per_snapshot=PER_SNAPSHOT)


async def write(p, i: int) -> None:
    partition = KEYS[i % len(KEYS)]
    await p.write_state(G, T, partition, state_epoch=1, leader_epoch=0, start_offset=i,
                        state_batches=[StateBatch(i, i + 1, 2, 1)], delivery_complete_count=i)


def states_of(p) -> dict:
    return {key: (p.state_of(*key), p.summary_of(*key)) for key in p.coordinator.keys()}


# Each key's latest checkpoint is at most PER_SNAPSHOT of its own writes back, so with round-robin writes
# a replay needs at most this many records (one append each here) after a prune.
LIVE_BOUND = len(KEYS) * (PER_SNAPSHOT + 1)


def test_the_prune_job_deletes_records_below_the_prunable_offset_and_bounds_memory(cluster, topic):
    async def go():
        clock = ManualClock(0)
        p = await open_persister(cluster, topic, clock)
        log = p.log
        deleted: list[int] = []
        log._delete_records = deleted.append  # a cluster with DeleteRecords (the mock has none)
        m = ShareStateMaintenance(p.coordinator, prune_interval_ms=1000, clock=clock, registry=CollectorRegistry())
        for partition in KEYS:
            await p.initialize_state(G, T, partition, state_epoch=1, start_offset=0)
        most_held = 0
        for i in range(120):
            await write(p, i)
            if i % 10 == 9:
                kafka_offsets = dict(zip(log.firsts, log.kafka_offsets))
                bound = p.coordinator.last_redundant_offset()
                outcome = await m.run_prune()
                assert outcome is not None and outcome.last_redundant_offset == bound
                if outcome.records_deleted:
                    # DeleteRecords below the Kafka offset of the append that holds the prunable offset.
                    assert deleted[-1] == kafka_offsets[log.start_offset] and log.start_offset <= bound
                    assert outcome.bytes_reclaimed > 0 and outcome.segments_deleted == 0
                log._check()
                most_held = max(most_held, len(log.values))
                assert len(log.values) == len(log) <= LIVE_BOUND
        assert m.prune_runs == 12 and len(deleted) >= 10 and log.end_offset > 120
        assert most_held <= LIVE_BOUND
        before = states_of(p)
        await p.close()
        again = await open_persister(cluster, topic, clock)  # the mock kept every record: a full replay
        assert states_of(again) == before and len(before) == len(KEYS)
        await again.close()

    run(go())


def test_without_delete_records_the_job_still_bounds_memory_and_a_restart_agrees(cluster, topic):
    async def go():
        clock = ManualClock(0)
        p = await open_persister(cluster, topic, clock)
        registry = CollectorRegistry()
        m = ShareStateMaintenance(p.coordinator, prune_interval_ms=1000, clock=clock, registry=registry)
        for partition in KEYS:
            await p.initialize_state(G, T, partition, state_epoch=1, start_offset=0)
        for i in range(60):
            await write(p, i)
        held = sum(map(len, p.log.values))
        outcome = await m.run_prune()
        assert outcome is not None and outcome.records_deleted > 0 and p.log.delete_records_supported is False
        assert outcome.bytes_reclaimed == held - sum(map(len, p.log.values)) > 0
        assert len(p.log.values) <= LIVE_BOUND and m.prune_failures == 0
        assert registry.get_sample_value("sharegroup_share_state_pruned_bytes_total") == outcome.bytes_reclaimed
        before = states_of(p)
        await p.close()
        again = await open_persister(cluster, topic, clock)
        assert again.log.start_offset == 0  # the topic kept everything
        assert states_of(again) == before
        await again.close()

    run(go())
