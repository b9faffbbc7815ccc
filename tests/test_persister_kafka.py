"""KafkaRecordLog and KafkaPersister on a 3-broker librdkafka mock cluster (see tests/kafka_mock.py):
append/recover round trips, logical offsets over sparse Kafka offsets, a write storm through leader
moves, brokers down and up and injected produce errors with nothing lost or duplicated, recovery equal
to LocalPersister's for the same operations, failed and fatal transactions, pruning (the mock has no
DeleteRecords: the fallback, which still frees memory, is tested there, the offset mapping with a
stand-in) and topic set-up.

Not testable on the mock (it lacks the API or models it differently): CreateTopics, DeleteRecords
against a broker, zombie fencing by a second `init_transactions` (the mock gives every producer a
fresh id), read_committed filtering, and ISR / `min.insync.replicas` behaviour."""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
import types
import uuid

import pytest

pytest.importorskip("confluent_kafka")

from persister import (  # noqa: E402
    CorruptLogError,
    KafkaLogError,
    KafkaPersister,
    KafkaRecordLog,
    LocalPersister,
    ShareCheckpoint,
    ShareCoordinator,
    ShareDelta,
    StateKey,
)
from persister.kafka_state_log import _KEY, ensure_topic, topic_settings  # noqa: E402
from persister.state_records import encode_record  # noqa: E402
from sharegroup.clock import ManualClock  # noqa: E402
from sharegroup.types import StateBatch  # noqa: E402

from .conftest import run  # noqa: E402
from .kafka_mock import ApiKey, MockCluster  # noqa: E402
from .test_persister_coordinator import random_workload  # noqa: E402

G = "group-kafka"
T = uuid.UUID("00000000-0000-0000-0000-00000000cafe")
QUIET = {"log_level": 0}  # the mock's disconnects at teardown are expected
NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, MSG_SIZE_TOO_LARGE, PRODUCER_FENCED = 6, 7, 19, 10, 90
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    mock = MockCluster(3)
    yield mock
    mock.close()


@pytest.fixture
def topic(cluster):
    name = f"state-{next(_topics)}"
    cluster.create_topic(name, partitions=2, replication_factor=3)
    return name


async def open_log(cluster, topic, partition=0, **options) -> KafkaRecordLog:
    options.setdefault("timeout_s", 15.0)
    return await KafkaRecordLog.open(
        cluster.bootstrap_servers, topic=topic, partition=partition, client_config=QUIET, **options
    )


def delta(i: int, partition: int = 0) -> tuple[StateKey, ShareDelta]:
    """A distinct record per `i` (its leader epoch), so losses and duplicates are visible."""
    return StateKey(G, T, partition), ShareDelta(1, i, -1, -1, [StateBatch(i, i + 1, 2, 1)])


def entries_of(log) -> list:
    return [(e.offset, e.key, e.record) for e in log.read_all()]


# -- round trips -------------------------------------------------------------------------------------


def test_appends_recover_exactly_with_dense_logical_offsets(cluster, topic):
    async def go():
        log = await open_log(cluster, topic)
        key = StateKey(G, T, 1)
        checkpoint = ShareCheckpoint(1, 2, 3, 10, 4, 1000, 1001, [StateBatch(10, 19, 2, 1)])
        assert await log.append([delta(0)]) == [0]
        assert await log.append([(key, checkpoint), delta(1), (key, None)]) == [1, 2, 3]  # one Kafka record
        assert await log.append([delta(2)]) == [4]
        written = entries_of(log)
        kafka_offsets = list(log.kafka_offsets)
        await log.close()
        reopened = await open_log(cluster, topic)
        reopened._check()
        assert (reopened.start_offset, reopened.end_offset) == (0, 5)
        assert entries_of(reopened) == written
        assert [e[2] for e in written] == [delta(0)[1], checkpoint, delta(1)[1], None, delta(2)[1]]
        # One transaction per append here: a commit marker follows each record, so Kafka's offsets
        # are sparse while the log's are dense.
        assert reopened.kafka_offsets == kafka_offsets == [0, 2, 4]
        assert await reopened.append([delta(3)]) == [5]  # numbering goes on after recovery
        await reopened.close()

    run(go())


def test_partitions_are_separate_shards_and_concurrent_appends_share_transactions(cluster, topic):
    async def go():
        log0, log1 = await open_log(cluster, topic, 0), await open_log(cluster, topic, 1)
        assert log0.transactional_id != log1.transactional_id
        results = await asyncio.gather(*(log0.append([delta(i)]) for i in range(200)))
        assert sorted(r[0] for r in results) == list(range(200))
        assert log0.transactions < 200  # group commit: appends queued meanwhile share a transaction
        assert await log1.append([delta(7, partition=1)]) == [0]
        await log0.close()
        await log1.close()
        again0, again1 = await open_log(cluster, topic, 0), await open_log(cluster, topic, 1)
        assert sorted(r.record.leader_epoch for r in again0.read_all()) == list(range(200))
        assert entries_of(again1) == [(0, *delta(7, partition=1))]
        await again0.close()
        await again1.close()

    run(go())


# -- failures ----------------------------------------------------------------------------------------


def test_write_storm_survives_leader_moves_brokers_down_and_produce_errors(cluster, topic):
    """800 appends from 40 writers while the leader moves, brokers go down and come back and Produce
    requests fail: every append succeeds, and recovery reads each record exactly once, in the order
    the log numbered them."""

    async def go():
        log = await open_log(cluster, topic)
        done: dict[int, int] = {}
        chaos = [  # one step after every 80 acknowledged appends
            lambda: cluster.set_leader(topic, 0, 2),
            lambda: cluster.broker_down(1),
            lambda: cluster.push_request_errors(ApiKey.PRODUCE, NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS),
            lambda: cluster.set_leader(topic, 0, 3),
            lambda: cluster.broker_down(2),
            lambda: cluster.broker_up(1),
            lambda: cluster.push_request_errors(ApiKey.PRODUCE, NOT_ENOUGH_REPLICAS, NOT_LEADER),
            lambda: cluster.broker_up(2),
            lambda: cluster.set_leader(topic, 0, 1),
        ]

        async def writer(w: int) -> None:
            for j in range(20):
                i = w * 20 + j
                (offset,) = await log.append([delta(i)])
                done[i] = offset
                if len(done) % 80 == 0 and chaos:
                    chaos.pop(0)()

        await asyncio.gather(*(writer(w) for w in range(40)))
        assert chaos == []
        assert sorted(done.values()) == list(range(800))
        await log.close()
        reopened = await open_log(cluster, topic)
        recovered = {e.record.leader_epoch: e.offset for e in reopened.read_all()}
        assert len(list(reopened.read_all())) == 800 and recovered == done
        await reopened.close()

    run(go())


def test_an_aborted_transaction_is_tried_again_and_its_append_lands_once(cluster, topic):
    """One failed produce (not retriable: the transaction must abort) costs a retry, not the append;
    the reopened log holds each append exactly once at dense logical offsets."""

    async def go():
        log = await open_log(cluster, topic)
        await log.append([delta(0)])
        cluster.push_request_errors(ApiKey.PRODUCE, MSG_SIZE_TOO_LARGE)
        assert await log.append([delta(1), delta(2)]) == [1, 2]
        assert await log.append([delta(3)]) == [3]
        log._check()
        expected = entries_of(log)
        assert [e[2].leader_epoch for e in expected] == [0, 1, 2, 3]
        await log.close()
        reopened = await open_log(cluster, topic)
        assert entries_of(reopened) == expected
        reopened._check()
        await reopened.close()

    run(go())


def test_failed_transaction_fails_its_appends_and_the_log_goes_on(cluster, topic):
    """A transaction that fails on every attempt fails its appends; the log goes on."""

    async def go():
        log = await open_log(cluster, topic)
        await log.append([delta(0)])
        cluster.push_request_errors(ApiKey.PRODUCE, *[MSG_SIZE_TOO_LARGE] * log.max_transaction_attempts)
        with pytest.raises(KafkaLogError, match=f"aborted {log.max_transaction_attempts} times"):
            await log.append([delta(1)])
        assert log.end_offset == 1
        offsets = []
        for i in range(2, 6):  # librdkafka may purge the first message after an abort: that append fails
            try:
                offsets += await log.append([delta(i)])
            except KafkaLogError:
                pass
        assert offsets == list(range(1, 1 + len(offsets))) and len(offsets) >= 3
        expected = entries_of(log)
        await log.close()
        reopened = await open_log(cluster, topic)
        assert entries_of(reopened) == expected
        assert 1 not in [e[2].leader_epoch for e in expected]
        await reopened.close()

    run(go())


def test_fenced_producer_refuses_every_later_append(cluster, topic):
    """A newer owner fences the old producer: its commit fails fatally and the log refuses appends.
    (The fence is injected: the mock's InitProducerId never fences a second owner by itself.)"""

    async def go():
        log = await open_log(cluster, topic)
        await log.append([delta(0)])
        cluster.push_request_errors(ApiKey.END_TXN, PRODUCER_FENCED)
        with pytest.raises(KafkaLogError, match="fatally"):
            await log.append([delta(1)])
        with pytest.raises(KafkaLogError, match="refuses appends"):
            await log.append([delta(2)])
        with pytest.raises(KafkaLogError, match="refuses appends"):
            log.enqueue([delta(3)], [encode_record(*delta(3))], lambda first, error: None)
        assert log.end_offset == 1
        await log.close()

    run(go())


def test_same_shard_uses_the_same_transactional_id(cluster, topic):
    """Fencing rests on one transactional.id per shard (topic, partition); a configured one wins."""

    async def go():
        first = await open_log(cluster, topic)
        await first.close()
        second = await open_log(cluster, topic)
        own = await open_log(cluster, topic, 1, transactional_id="coordinator-7")
        assert first.transactional_id == second.transactional_id == f"sharegroup-state-{topic}-0"
        assert own.transactional_id == "coordinator-7"
        await second.close()
        await own.close()

    run(go())


class ScriptedProducer:
    """A stand-in for the transactional producer whose commit and abort calls fail as scripted
    (KafkaErrors with their retriable / abortable / fatal flags), for what the mock cannot be made to
    do on demand: a commit or an abort that times out and must be called again."""

    def __init__(self, *, commits=(), aborts=()):
        self.commits, self.aborts, self.calls = list(commits), list(aborts), []
        self._delivery = []

    def _step(self, name, script):
        self.calls.append(name)
        if script:
            error = script.pop(0)
            if error is not None:
                from confluent_kafka import KafkaException

                raise KafkaException(error)

    def begin_transaction(self):
        self.calls.append("begin")
        self._delivery = []

    def produce(self, topic, value, key, partition, on_delivery):
        self._delivery.append(on_delivery)

    def flush(self, timeout):
        for i, on_delivery in enumerate(self._delivery):
            on_delivery(None, types.SimpleNamespace(offset=lambda i=i: 100 + i))
        self._delivery = []
        return 0

    def commit_transaction(self, timeout):
        self._step("commit", self.commits)

    def abort_transaction(self, timeout):
        self._step("abort", self.aborts)


def kafka_error(*, retriable=False, abortable=False, fatal=False):
    from confluent_kafka import KafkaError

    return KafkaError(KafkaError._TIMED_OUT, "scripted", fatal=fatal, retriable=retriable, txn_requires_abort=abortable)


def scripted_log(producer) -> KafkaRecordLog:
    config = {"transactional.id": "x"}
    return KafkaRecordLog(topic="t", partition=0, producer=producer, admin=None, config=config, timeout_s=1)


def one_append():
    from persister.kafka_state_log import _Append

    return [_Append(1, encode_record(*delta(0)), None)]


def test_a_retriable_commit_is_called_again_in_the_same_transaction():
    producer = ScriptedProducer(commits=[kafka_error(retriable=True), kafka_error(retriable=True)])
    assert scripted_log(producer)._commit(0, one_append()) == [100]
    assert producer.calls == ["begin", "commit", "commit", "commit"]


def test_an_abortable_commit_is_aborted_and_the_transaction_tried_again():
    producer = ScriptedProducer(commits=[kafka_error(abortable=True)])
    assert scripted_log(producer)._commit(0, one_append()) == [100]
    assert producer.calls == ["begin", "commit", "abort", "begin", "commit"]


def test_a_retriable_abort_is_called_again_and_the_log_goes_on():
    producer = ScriptedProducer(commits=[kafka_error(abortable=True)], aborts=[kafka_error(retriable=True)])
    log = scripted_log(producer)
    assert log._commit(0, one_append()) == [100]
    assert producer.calls == ["begin", "commit", "abort", "abort", "begin", "commit"]
    assert log._failure is None


def test_an_abort_that_cannot_complete_fails_the_log():
    producer = ScriptedProducer(commits=[kafka_error(abortable=True)], aborts=[kafka_error()])
    log = scripted_log(producer)
    with pytest.raises(KafkaLogError, match="could not be aborted"):
        log._commit(0, one_append())
    assert producer.calls == ["begin", "commit", "abort"] and log._failure is not None


def test_a_fatal_commit_fails_the_log_without_a_retry():
    producer = ScriptedProducer(commits=[kafka_error(fatal=True)])
    log = scripted_log(producer)
    with pytest.raises(KafkaLogError, match="fatally"):
        log._commit(0, one_append())
    assert producer.calls == ["begin", "commit"] and log._failure is not None


# -- recovery rules ------------------------------------------------------------------------------------


def bare_log() -> KafkaRecordLog:
    config = {"transactional.id": "x"}
    return KafkaRecordLog(topic="t", partition=0, producer=None, admin=None, config=config, timeout_s=1)


def kafka_record(first: int, *items) -> tuple[bytes, bytes]:
    return _KEY.pack(first, len(items)), b"".join(encode_record(*item) for item in items)


def test_recovery_drops_records_of_an_aborted_transaction_rewritten_later():
    """A reader that does not filter aborted transactions (the mock) sees the aborted records and then
    the committed ones at the same logical offsets: the later ones win."""
    log = bare_log()
    log._load(0, *kafka_record(0, delta(0)))
    log._load(2, *kafka_record(1, delta(1)))  # aborted
    log._load(3, *kafka_record(2, delta(2), delta(3)))  # aborted
    log._load(5, *kafka_record(1, delta(4)))  # committed, same logical offset 1
    log._load(7, *kafka_record(2, delta(5)))
    log._check()
    assert [(e.offset, e.record.leader_epoch) for e in log.read_all()] == [(0, 0), (1, 4), (2, 5)]
    assert log.kafka_offsets == [0, 5, 7]


@pytest.mark.parametrize(
    "records, reason",
    [
        ([(0, _KEY.pack(0, 1), encode_record(*delta(0))), (2, _KEY.pack(2, 1), encode_record(*delta(1)))], "jump"),
        ([(0, b"junk", encode_record(*delta(0)))], "bad key"),
        ([(0, _KEY.pack(0, 2), encode_record(*delta(0)))], "value holds 1"),
        ([(0, _KEY.pack(0, 1), encode_record(*delta(0))[:-1])], None),
        ([(0, _KEY.pack(5, 1), encode_record(*delta(0))), (2, _KEY.pack(3, 1), encode_record(*delta(1)))], "below"),
        ([(0, *kafka_record(0, delta(0), delta(1))), (2, _KEY.pack(1, 1), encode_record(*delta(2)))], "inside"),
    ],
    ids=["gap", "bad-key", "count", "torn", "below-start", "inside-append"],
)
def test_recovery_refuses_a_corrupt_partition(records, reason):
    log = bare_log()
    with pytest.raises(CorruptLogError, match=reason) as info:
        for kafka_offset, key, value in records:
            log._load(kafka_offset, key, value)
    assert info.value.path == "t[0]" and info.value.offset == records[-1][0]


# -- pruning -------------------------------------------------------------------------------------------


def test_delete_below_without_delete_records_frees_memory_and_the_topic_keeps_everything(cluster, topic):
    """The mock answers DeleteRecords with UNSUPPORTED_FEATURE: the topic keeps every record (a reopen
    reads them all again), but the log's memory holds only what a replay needs from the new start."""
    async def go():
        log = await open_log(cluster, topic)
        for i in range(4):
            await log.append([delta(i)])
        assert await log.delete_below(3) == 3
        assert log.delete_records_supported is False
        assert [e.offset for e in log.read_all()] == [3] and len(log.values) == 1
        assert await log.append([delta(4)]) == [4]
        log._check()
        await log.close()
        again = await open_log(cluster, topic)
        assert again.start_offset == 0 and [e.offset for e in again.read_all()] == [0, 1, 2, 3, 4]
        await again.close()

    run(go())


def test_delete_below_deletes_whole_appends_at_their_kafka_offsets(cluster, topic):
    async def go():
        log = await open_log(cluster, topic)
        await log.append([delta(0), delta(1)])  # logical 0..1
        await log.append([delta(2), delta(3), delta(4)])  # logical 2..4
        await log.append([delta(5)])  # logical 5
        deleted = []
        log._delete_records = deleted.append  # a cluster with DeleteRecords (the mock has none)
        assert await log.delete_below(1) == 0 and deleted == []  # inside the first append: keep it
        assert await log.delete_below(4) == 2 and deleted == [log.kafka_offsets[0]]
        assert await log.delete_below(5) == 5 and deleted[-1] == log.kafka_offsets[0]
        assert [e.offset for e in log.read_all()] == [5]
        last_kafka_offset = log.kafka_offsets[0]
        assert await log.delete_below(99) == 6  # clamped to the end: every append goes
        assert deleted[-1] == last_kafka_offset + 1 and list(log.read_all()) == []
        assert await log.delete_below(0) == 6  # never backwards
        assert await log.append([delta(6)]) == [6]
        log._check()
        await log.close()

    run(go())


# -- topic set-up ----------------------------------------------------------------------------------


@pytest.mark.parametrize("brokers, rf, min_isr", [(1, 1, 1), (2, 2, 2), (3, 3, 2), (5, 3, 2)])
def test_topic_settings_follow_the_share_state_topic_where_the_cluster_allows(brokers, rf, min_isr):
    assert topic_settings(brokers) == (
        rf,
        {"cleanup.policy": "delete", "retention.ms": "-1", "min.insync.replicas": str(min_isr)},
    )


def test_topic_settings_refuse_bad_values():
    with pytest.raises(ValueError):
        topic_settings(3, replication_factor=0)
    with pytest.raises(ValueError):
        topic_settings(3, min_insync_replicas="2")
    with pytest.raises(ValueError):
        topic_settings(3, segment_bytes=0)


def test_topic_settings_carry_the_state_topic_segment_bytes():
    """share.coordinator.state.topic.segment.bytes becomes the created state topic's segment.bytes."""
    assert topic_settings(3, segment_bytes=1_048_576)[1]["segment.bytes"] == "1048576"
    admin = StubAdmin({}, brokers=3)
    ensure_topic(admin, "state", 0, 1, True, 3, 2, 1.0, 104_857_600)
    assert admin.created[0].config["segment.bytes"] == "104857600"


class StubAdmin:
    """An AdminClient stand-in (the mock cluster has no CreateTopics)."""

    def __init__(self, topics: dict[str, int], brokers: int) -> None:
        self.created = []
        self._metadata = types.SimpleNamespace(
            topics={
                t: types.SimpleNamespace(error=None, partitions=dict.fromkeys(range(n))) for t, n in topics.items()
            },
            brokers=dict.fromkeys(range(brokers)),
        )

    def list_topics(self, timeout):
        return self._metadata

    def create_topics(self, new_topics, request_timeout):
        self.created += new_topics
        return {t.topic: types.SimpleNamespace(result=lambda timeout: None) for t in new_topics}


def test_ensure_topic_creates_a_missing_topic_like_the_share_state_topic():
    admin = StubAdmin({}, brokers=3)
    ensure_topic(admin, "state", 4, 2, True, 3, 2, 1.0)
    (new,) = admin.created
    assert (new.topic, new.num_partitions, new.replication_factor) == ("state", 5, 3)
    assert new.config == {"cleanup.policy": "delete", "retention.ms": "-1", "min.insync.replicas": "2"}


def test_ensure_topic_leaves_an_existing_topic_and_checks_the_partition():
    admin = StubAdmin({"state": 2}, brokers=3)
    ensure_topic(admin, "state", 1, 1, True, 3, 2, 1.0)
    assert admin.created == []
    with pytest.raises(KafkaLogError, match="has 2 partitions"):
        ensure_topic(admin, "state", 2, 1, True, 3, 2, 1.0)
    with pytest.raises(KafkaLogError, match="does not exist"):
        ensure_topic(StubAdmin({}, 3), "state", 0, 1, False, 3, 2, 1.0)


# -- the persister ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_kafka_persister_recovers_what_local_persister_recovers(cluster, topic, tmp_path, seed):
    """The same random operations on both persisters: equal states after reopening, and the same
    records at the same offsets (the Kafka log keeps the prefix a segment log prunes: no DeleteRecords)."""

    async def go():
        local = await LocalPersister.open(tmp_path, fsync=False, segment_bytes=1024, clock=ManualClock(0))
        kafka = await KafkaPersister.open(
            cluster.bootstrap_servers, topic=topic, client_config=QUIET, timeout_s=15.0, clock=ManualClock(0)
        )
        for persister in (local, kafka):
            await random_workload(persister.coordinator, random.Random(seed), 120, persister.coordinator._clock)
            await persister.close()
        local = await LocalPersister.open(tmp_path, fsync=False, segment_bytes=1024, clock=ManualClock(0))
        kafka = await KafkaPersister.open(
            cluster.bootstrap_servers, topic=topic, client_config=QUIET, timeout_s=15.0, clock=ManualClock(0)
        )
        assert kafka.coordinator._dump() == local.coordinator._dump() != {}
        assert kafka.log.end_offset == local.log.end_offset
        start = local.log.start_offset
        assert [e for e in entries_of(kafka.log) if e[0] >= start] == entries_of(local.log)
        kafka.coordinator._check()
        await local.close()
        await kafka.close()

    run(go())


def test_kafka_persister_state_survives_a_restart(cluster, topic):
    async def go():
        p = await KafkaPersister.open(cluster.bootstrap_servers, topic=topic, client_config=QUIET, timeout_s=15.0)
        await p.initialize_state(G, T, 3, state_epoch=1, start_offset=10)
        await p.write_state(
            G, T, 3, state_epoch=1, leader_epoch=2, start_offset=12, state_batches=[StateBatch(12, 15, 2, 1)]
        )
        before = p.state_of(G, T, 3)
        await p.close()
        again = await KafkaPersister.open(cluster.bootstrap_servers, topic=topic, client_config=QUIET, timeout_s=15.0)
        assert again.state_of(G, T, 3) == before and before.start_offset == 12
        assert (await again.read_state(G, T, 3, leader_epoch=2)).state_batches == [StateBatch(12, 15, 2, 1)]
        await again.close()

    run(go())


def test_kafka_persister_needs_a_kafka_log():
    with pytest.raises(TypeError):
        KafkaPersister(ShareCoordinator(__import__("persister").MemoryLog()))


def test_persister_imports_without_confluent_kafka():
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "import persister, asyncio\n"
        "from persister import KafkaRecordLog\n"
        "try:\n"
        "    asyncio.run(KafkaRecordLog.open('localhost:1'))\n"
        "except ImportError:\n"
        "    print('import error')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "import error", out.stderr


# -- serve and URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, parsed",
    [
        ("kafka://localhost:9092", ("localhost:9092", None)),
        ("kafka://a:1,b:2/state", ("a:1,b:2", "state")),
        ("kafka://[::1]:9092/", ("[::1]:9092", None)),
    ],
)
def test_kafka_urls_parse(url, parsed):
    from persister.kafka_persister import parse_kafka_url

    assert parse_kafka_url(url) == parsed


@pytest.mark.parametrize(
    "url", ["localhost:9092", "kafka://", "kafka://host", "kafka://h:0", "kafka://h:x/t", "kafka://h:1/a/b"]
)
def test_bad_kafka_urls_are_refused(url):
    from persister.kafka_persister import parse_kafka_url

    with pytest.raises(ValueError):
        parse_kafka_url(url)


def test_serve_share_state_option_puts_share_state_on_kafka(cluster, topic, tmp_path):
    """`sharegroup serve --share-state kafka://...`: the broker's share services run over a
    KafkaPersister on that topic, and what they persist is there for the next start."""
    import argparse

    from sharegroup.server.broker_config import ServeConfig
    from sharegroup.server.serve import add_arguments, open_share_services, open_store

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    url = f"kafka://{cluster.bootstrap_servers}/{topic}"
    args = parser.parse_args(["--data", str(tmp_path), "--share-state", url])
    with pytest.raises(SystemExit):
        parser.parse_args(["--share-state", "http://x:1"])

    async def go():
        config = ServeConfig.build({}, [], [])
        store = await open_store(tmp_path, config)
        services = await open_share_services(tmp_path, config, store, args.share_state)
        assert isinstance(services.persister, KafkaPersister) and services.persister.log.topic == topic
        await services.persister.initialize_state(G, T, 0, state_epoch=1, start_offset=5)
        await services.close()
        await store.close()
        again = await KafkaPersister.open_url(url, timeout_s=15.0)
        assert again.state_of(G, T, 0).start_offset == 5
        assert not (tmp_path / "share-state").exists()
        await again.close()

    run(go())


def test_audit_reads_a_kafka_state_log_without_fencing_its_owner(cluster, topic, tmp_path):
    """`sharegroup audit kafka://host:port/topic` audits a read-only copy of the state log: the same
    verdict and final states as the audit of a LocalPersister's log for the same writes, and the owner goes
    on writing afterwards (the audit took no producer id)."""
    from sharegroup.audit.runner import run_audit

    async def go():
        local = await LocalPersister.open(tmp_path / "local", fsync=False, clock=ManualClock(0))
        kafka = await KafkaPersister.open(
            cluster.bootstrap_servers, topic=topic, client_config=QUIET, timeout_s=15.0, clock=ManualClock(0)
        )
        for p in (local, kafka):
            await random_workload(p.coordinator, random.Random(11), 80, p.coordinator._clock)
        await local.close()
        url = f"kafka://{cluster.bootstrap_servers}/{topic}"
        audit = await asyncio.to_thread(
            run_audit, url, engine="python", out_dir=tmp_path / "out", write_outputs=False, print_fn=None
        )
        local_audit = run_audit(tmp_path / "local", engine="python", write_outputs=False, print_fn=None)
        assert audit.ok and local_audit.ok
        # The local log pruned whole segments (the mock has no DeleteRecords): compare what both end in.
        assert audit.final_states == local_audit.final_states != {}
        assert audit.log_end_offset == local_audit.log_end_offset == kafka.log.end_offset
        assert audit.records == kafka.log.end_offset > local_audit.records
        await kafka.initialize_state(G, T, 9, state_epoch=1, start_offset=0)  # still the owner
        await kafka.close()

    run(go())
