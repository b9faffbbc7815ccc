"""`KafkaRecordLog`: the share coordinator's record log in one partition of a Kafka topic.

Kafka keeps share state in `__share_group_state`: a replicated topic with `cleanup.policy=delete`,
`retention.ms=-1`, replication factor 3 and `min.insync.replicas=2`, one partition per coordinator
shard, bounded by DeleteRecords below the lowest offset any live key still needs. This log does the
same for a `ShareCoordinator`: the rules stay in the coordinator, only the storage changes.

Design (why, in short):
- **One Kafka record per append, written in transactions.** The record's value is the append's framed
  records (the bytes a segment file would hold) and its key is (logical first offset, record count),
  so an append is all or nothing even if it holds many frames. Appends are group-committed: one writer
  at a time takes every queued append, produces them in one transaction and commits it; a callback
  hears each append's outcome only after `commit_transaction` returned (the cluster acknowledged it:
  `acks=all`, idempotent producer). Transactions are used for *fencing*, not for atomicity: the
  producer's `transactional.id` is per shard (topic + partition), so a new owner's
  `init_transactions` fences the old one (its next commit fails with a fatal error) and aborts its
  open transaction, and two coordinators can never both write.
- **Logical offsets.** Transaction markers take Kafka offsets, so Kafka offsets are not dense, while
  `RecordLog` promises consecutive offsets. The log therefore numbers records itself (the key of each
  Kafka record says where its append starts) and keeps a map from appends to Kafka offsets for
  DeleteRecords.
- **Recovery** (on open, after `init_transactions`): read with `isolation.level=read_committed` from
  the log start to the high watermark taken at open. A Kafka record whose logical first offset is
  below the end read so far replaces everything from there on: only an aborted transaction, which a
  read_committed fetch hides on a real broker, can leave such records (a reader that does not filter,
  like librdkafka's mock, still recovers the right log). A gap in logical offsets is corruption.
- **Failures.** A transaction that fails without a fatal error is aborted (nothing of it is visible
  to read_committed readers) and tried again, up to `max_transaction_attempts` times within one
  deadline; retriable commit and abort errors are retried in place. When every attempt fails, the
  appends in it fail and the log goes on. A fatal error (fenced, or an abort that cannot complete)
  makes the log refuse every later append until it is reopened.
- **Pruning** is `AdminClient.delete_records` below the Kafka offset of the append holding the
  requested logical offset (whole appends are kept, as SegmentLog keeps whole segments), or below
  everything when nothing is needed; an emptied partition numbers its records from 0 again when it
  is next opened (no live key refers to an offset then). A cluster
  without DeleteRecords keeps everything (the next open reads it all again; one warning is logged),
  but the log still drops the records below the new start from memory.

The records read or appended are also kept in memory (what `read_all` returns, like MemoryLog), from
the log start on: pruning (the coordinator's prune, run periodically by `sharegroup serve`) bounds them
by what a replay needs, as it bounds the topic. `confluent_kafka` is imported
lazily: `persister` works without the optional `kafka` extra.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import logging
import struct
import time
from typing import Iterator, Sequence

from .frame_rows import KeyTable
from .frame_codec import frame_codec
from .state_log_api import CorruptLogError, LogEntry
from .state_records import RecordDecodeError, ShareRecord, StateKey, decode_record, encode_record, iter_records

__all__ = ["KafkaRecordLog", "KafkaLogError", "topic_settings", "export_to_segment_dir", "DEFAULT_STATE_TOPIC"]

log = logging.getLogger(__name__)

DEFAULT_STATE_TOPIC = "sharegroup_share_state"
_KEY = struct.Struct(">qi")  # logical first offset, number of framed records in the value


class KafkaLogError(Exception):
    """An append that failed on the Kafka cluster (its transaction was aborted), or a log that refuses
    appends after a fatal error (fenced by a newer owner, or an abort that failed)."""


def topic_settings(
    num_brokers: int, *, replication_factor: int = 3, min_insync_replicas: int = 2, segment_bytes: int | None = None
) -> tuple[int, dict]:
    """The replication factor and topic configs for a state topic on a cluster of `num_brokers`:
    like `__share_group_state` (delete policy, infinite retention), with the requested replication
    where the cluster allows it (never more replicas than brokers, min ISR at most RF) and, when given,
    `segment_bytes` as its `segment.bytes` (Kafka's `share.coordinator.state.topic.segment.bytes`)."""
    if not isinstance(replication_factor, int) or replication_factor < 1:
        raise ValueError(f"replication_factor must be an int >= 1, not {replication_factor!r}")
    if not isinstance(min_insync_replicas, int) or min_insync_replicas < 1:
        raise ValueError(f"min_insync_replicas must be an int >= 1, not {min_insync_replicas!r}")
    if segment_bytes is not None and (isinstance(segment_bytes, bool) or not isinstance(segment_bytes, int)
                                      or segment_bytes < 1):
        raise ValueError(f"segment_bytes must be an int >= 1, not {segment_bytes!r}")
    rf = max(1, min(replication_factor, num_brokers))
    config = {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "min.insync.replicas": str(min(min_insync_replicas, rf)),
    }
    if segment_bytes is not None:
        config["segment.bytes"] = str(segment_bytes)
    return rf, config


class _Append:
    __slots__ = ("count", "value", "callback")

    def __init__(self, count: int, value: bytes, callback) -> None:
        self.count, self.value, self.callback = count, value, callback


class KafkaRecordLog:
    """A RecordLog in partition `partition` of `topic`; build it with `await KafkaRecordLog.open(...)`.

    `firsts[i]`, `kafka_offsets[i]`, `values[i]` describe the i-th append held: its logical first
    offset, the Kafka offset of its record and its framed records.
    """

    def __init__(self, *, topic: str, partition: int, producer, admin, config: dict, timeout_s: float) -> None:
        self.topic = topic
        self.partition = partition
        self.transactional_id = config["transactional.id"]
        self.max_group_appends = 1000
        self.max_transaction_attempts = 3  # a failed (aborted) transaction is tried again up to this often
        self.delete_records_supported = True
        self._producer = producer
        self._admin = admin
        self._config = config
        self._timeout_s = timeout_s
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"kafka-log-{topic}-{partition}")
        self.firsts: list[int] = []
        self.kafka_offsets: list[int] = []
        self.values: list[bytes] = []
        self._start = 0
        self._end = 0
        self._pending: list[_Append] = []
        self._writer: asyncio.Task | None = None
        self._failure: BaseException | None = None
        self._closed = False
        self.transactions = 0  # transactions committed (group commits)
        self._delete_lock = asyncio.Lock()  # one DeleteRecords at a time: each cuts the prefix it computed

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        bootstrap_servers: str,
        *,
        topic: str = DEFAULT_STATE_TOPIC,
        partition: int = 0,
        num_partitions: int = 1,
        create_topic: bool = True,
        replication_factor: int = 3,
        min_insync_replicas: int = 2,
        transactional_id: str | None = None,
        client_config: dict | None = None,
        timeout_s: float = 30.0,
        segment_bytes: int | None = None,
    ) -> KafkaRecordLog:
        """Connect, make sure the topic exists (creating it with `num_partitions` partitions when
        `create_topic`), fence any earlier owner of this shard and read the partition back.

        `transactional_id` defaults to one per shard (`sharegroup-state-<topic>-<partition>`);
        `client_config` adds librdkafka settings (security, say) to the producer, consumer and admin;
        `segment_bytes` is the `segment.bytes` of a topic this call creates (an existing one is left as is).
        """
        if not isinstance(partition, int) or partition < 0:
            raise ValueError(f"partition must be an int >= 0, not {partition!r}")
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        common = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        config = {
            **common,
            "transactional.id": transactional_id or f"sharegroup-state-{topic}-{partition}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 1,
            "transaction.timeout.ms": max(1000, int(timeout_s * 2000)),
        }
        loop = asyncio.get_running_loop()
        admin = AdminClient(common)
        await loop.run_in_executor(
            None,
            lambda: ensure_topic(
                admin, topic, partition, num_partitions, create_topic,
                replication_factor, min_insync_replicas, timeout_s, segment_bytes,
            ),
        )
        producer = Producer(config)
        self = cls(topic=topic, partition=partition, producer=producer, admin=admin, config=config, timeout_s=timeout_s)
        try:
            await loop.run_in_executor(self._executor, producer.init_transactions, timeout_s)  # fences the old owner
            await loop.run_in_executor(self._executor, self._recover, common)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        return self

    def _recover(self, common: dict) -> None:
        """Read the partition from its log start to the high watermark taken now (read_committed)."""
        read_partition(common, self.topic, self.partition, self._timeout_s, self._load, self.transactional_id)

    def _load(self, kafka_offset: int, key: bytes | None, value: bytes | None) -> None:
        """Take one Kafka record read back into the log (see the module docstring for the rules)."""
        where = f"{self.topic}[{self.partition}]"
        if key is None or len(key) != _KEY.size or value is None:
            raise CorruptLogError(where, kafka_offset, "not a state-log record (bad key or no value)")
        first, count = _KEY.unpack(key)
        try:
            frames = sum(1 for _ in iter_records(value))
        except RecordDecodeError as exc:
            raise CorruptLogError(where, kafka_offset, str(exc)) from exc
        if frames != count or count < 1 or first < 0:
            raise CorruptLogError(where, kafka_offset, f"key says {count} records from {first}, value holds {frames}")
        if not self.firsts:
            self._start = self._end = first
        elif first > self._end:
            raise CorruptLogError(where, kafka_offset, f"logical offsets jump from {self._end} to {first}")
        elif first < self._end:  # records of an aborted transaction came before: drop them
            if first < self._start:
                raise CorruptLogError(where, kafka_offset, f"logical offset {first} below the log start {self._start}")
            cut = bisect.bisect_right(self.firsts, first) - 1
            if self.firsts[cut] != first:
                raise CorruptLogError(where, kafka_offset, f"logical offset {first} inside an earlier append")
            del self.firsts[cut:], self.kafka_offsets[cut:], self.values[cut:]
        self.firsts.append(first)
        self.kafka_offsets.append(kafka_offset)
        self.values.append(value)
        self._end = first + count

    # -- the RecordLog protocol ----------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def closed(self) -> bool:
        return self._closed

    async def append(self, entries: Sequence[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Append all entries or none, in one Kafka record; resolve once the cluster acknowledged it."""
        frames = [encode_record(key, record) for key, record in entries]  # encode all before queueing
        future = asyncio.get_running_loop().create_future()

        def done(first, error) -> None:
            if not future.done():
                future.set_exception(error) if error is not None else future.set_result(first)

        self.enqueue(entries, frames, done)
        first = await future
        return list(range(first, first + len(frames)))

    append.enqueue_equivalent = True  # `enqueue` does what `append` does (the coordinator checks this)

    def enqueue(self, entries, frames: list[bytes], callback) -> bool:
        """Queue `frames` as one append for the next transaction; `callback(first_offset, None)` once
        committed, `callback(None, error)` if not. Never full (the group size is bounded instead)."""
        self._check_open()
        if not frames:
            raise ValueError("an append needs at least one record")
        self._pending.append(_Append(len(frames), b"".join(frames), callback))
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_groups())
        return True

    async def wait_for_room(self) -> None:  # never needed: `enqueue` always takes the append
        return None

    async def _write_groups(self) -> None:
        """The writer: commit queued appends, a group per transaction, until none is left."""
        loop = asyncio.get_running_loop()
        try:
            while self._pending and self._failure is None:
                group = self._pending[: self.max_group_appends]
                del self._pending[: len(group)]
                first = self._end
                try:
                    offsets = await loop.run_in_executor(self._executor, self._commit, first, group)
                except BaseException as exc:
                    for append in group:
                        append.callback(None, exc)
                    continue
                for append, kafka_offset in zip(group, offsets):
                    self.firsts.append(first)
                    self.kafka_offsets.append(kafka_offset)
                    self.values.append(append.value)
                    first += append.count
                self._end = first
                self.transactions += 1
                for append, start in zip(group, self.firsts[-len(group) :]):
                    append.callback(start, None)
            failure = self._failure
            while self._pending:  # the log failed: nothing queued can be written
                self._pending.pop(0).callback(None, KafkaLogError(f"the state log refuses appends: {failure!r}"))
        finally:
            self._writer = None

    def _commit(self, first: int, group: list[_Append]) -> list[int]:
        """In the writer thread: produce `group` in one transaction and commit it; the Kafka offsets.

        A transaction that fails without a fatal error is aborted (nothing of it is visible) and
        tried again, up to `max_transaction_attempts` times within one deadline: a stalled or
        briefly unavailable cluster costs latency, not the appends. Retriable commit and abort
        errors are retried in place, as librdkafka asks."""
        deadline = time.monotonic() + self._timeout_s * self.max_transaction_attempts
        failure: BaseException | None = None
        for attempt in range(1, self.max_transaction_attempts + 1):
            try:
                return self._transaction(first, group, deadline)
            except _Aborted as exc:
                failure = exc.__cause__
                if time.monotonic() >= deadline:
                    break
                log.warning("state log transaction %d of %d aborted, retrying: %s",
                            attempt, self.max_transaction_attempts, failure)
        raise KafkaLogError(f"append failed (transaction aborted {attempt} times): {failure}") from failure

    def _transaction(self, first: int, group: list[_Append], deadline: float) -> list[int]:
        """One attempt of `_commit`: begin, produce, wait for the deliveries, commit. Raises `_Aborted`
        after aborting a failed transaction, KafkaLogError (log failed) on a fatal error."""
        from confluent_kafka import KafkaException

        producer = self._producer
        offsets: list[int | None] = [None] * len(group)
        errors: list = []

        def delivered(i, err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets[i] = msg.offset()

        try:
            producer.begin_transaction()
            for i, append in enumerate(group):
                key = _KEY.pack(first, append.count)
                first += append.count
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            append.value,
                            key,
                            partition=self.partition,
                            on_delivery=lambda err, msg, i=i: delivered(i, err, msg),
                        )
                        break
                    except BufferError:
                        producer.poll(0.01)
            while producer.flush(_bounded(self._timeout_s, deadline)) and not errors:
                if time.monotonic() >= deadline:
                    raise KafkaLogError("produce timed out")
            if errors:
                raise KafkaLogError(f"produce failed: {errors[0].str()}")
            while True:
                try:
                    producer.commit_transaction(_bounded(self._timeout_s, deadline))
                    break
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else None
                    if error is None or error.fatal() or error.txn_requires_abort() or not error.retriable():
                        raise
                    if time.monotonic() >= deadline:
                        raise
        except Exception as exc:  # noqa: BLE001 - any failure inside the transaction
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if error is not None and error.fatal():
                self._failure = exc
                raise KafkaLogError(f"append failed fatally (fenced by a newer owner?): {exc}") from exc
            self._abort(exc, deadline)
            raise _Aborted() from exc
        return offsets  # type: ignore[return-value]

    def _abort(self, cause: BaseException, deadline: float) -> None:
        """Abort the open transaction, again while librdkafka says the abort may be retried; an abort
        that cannot be completed fails the log (its transaction state is unknown)."""
        from confluent_kafka import KafkaException

        while True:
            try:
                self._producer.abort_transaction(_bounded(self._timeout_s, deadline))
                return
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if error is not None and not error.fatal() and error.retriable() and time.monotonic() < deadline:
                    continue
                self._failure = exc
                raise KafkaLogError(f"append failed and could not be aborted: {exc}") from cause

    def read_all(self) -> Iterator[LogEntry]:
        """Every record held as of the call, in offset order (from memory: the log read on open plus
        what was appended since)."""
        firsts, values, start = self.firsts[:], self.values[:], self._start
        for first, value in zip(firsts, values):
            offset = first
            for key, record, _ in iter_records(value):
                if offset >= start:
                    yield LogEntry(offset, key, record)
                offset += 1

    def read_rows(self, keys: KeyTable) -> Iterator[tuple[int, list]]:
        """`read_all` as one batch of decoded rows (first offset, rows) for the coordinator's replay."""
        if not self.values:
            return
        assert self.firsts[0] == self._start  # the log starts at an append (delete_below keeps whole ones)
        buf = b"".join(self.values)
        rows, stop = frame_codec().decode_frames(buf, 0, len(buf), keys)
        if stop != len(buf):
            decode_record(buf, stop)
            raise AssertionError(f"the frame codec refused a valid frame at byte {stop}")
        yield self._start, rows

    async def delete_below(self, offset: int) -> int:
        """DeleteRecords below the append holding `offset`, or below everything when `offset` reaches
        the log end (clamped to it), and drop those appends from memory; return the new start offset.
        On a cluster without DeleteRecords only the memory is freed (the start still moves: the log
        holds nothing below it until it is reopened)."""
        self._check_open()
        async with self._delete_lock:
            return await self._delete_below(offset)

    async def _delete_below(self, offset: int) -> int:
        target = min(int(offset), self._end)
        if target >= self._end:
            keep = len(self.firsts)  # delete every append
        else:
            keep = bisect.bisect_right(self.firsts, target) - 1  # the append holding `target` stays
        if keep <= 0:
            return self._start
        kafka_offset = self.kafka_offsets[keep] if keep < len(self.firsts) else self.kafka_offsets[-1] + 1
        new_start = self.firsts[keep] if keep < len(self.firsts) else self._end
        if self.delete_records_supported:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._delete_records, kafka_offset)
            except _Unsupported as exc:
                self.delete_records_supported = False
                log.warning(
                    "the cluster does not support DeleteRecords; the state topic keeps everything (the next "
                    "open reads it all again), memory only what a replay needs (%s)", exc,
                )
        # Memory holds what a replay needs, whether or not the cluster could delete.
        del self.firsts[:keep], self.kafka_offsets[:keep], self.values[:keep]
        self._start = max(self._start, new_start)
        return self._start

    def _delete_records(self, kafka_offset: int) -> None:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        futures = self._admin.delete_records(
            [TopicPartition(self.topic, self.partition, kafka_offset)], request_timeout=self._timeout_s
        )
        try:
            for future in futures.values():
                future.result(self._timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
                raise _Unsupported(str(exc)) from exc
            raise

    async def close(self) -> None:
        """Let queued appends finish, then release the producer; later appends fail."""
        if self._closed:
            return
        while self._writer is not None:
            await asyncio.shield(self._writer)
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._producer.flush, self._timeout_s)
        except Exception:  # noqa: BLE001 - a failed (fenced) producer has nothing left to deliver
            if self._failure is None:
                raise
        finally:
            self._executor.shutdown(wait=True)
        self._producer = self._admin = None  # the clients go away with their last reference

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the KafkaRecordLog is closed")
        if self._failure is not None:
            raise KafkaLogError(f"the state log refuses appends after a fatal error: {self._failure!r}")

    def _check(self) -> None:
        """Assert the log's invariants: appends contiguous in logical offsets, Kafka offsets rising."""
        assert len(self.firsts) == len(self.kafka_offsets) == len(self.values)
        end = self.firsts[0] if self.firsts else self._end
        for first, value in zip(self.firsts, self.values):
            assert first == end, (first, end)
            end += sum(1 for _ in iter_records(value))
        assert end == self._end and all(a < b for a, b in zip(self.kafka_offsets, self.kafka_offsets[1:]))
        assert not self.firsts or self.firsts[0] == self._start

    def __len__(self) -> int:
        return self._end - self._start


def read_partition(common: dict, topic: str, partition: int, timeout_s: float, load, group_id: str) -> None:
    """Call `load(kafka_offset, key, value)` for every committed record of the partition from its log
    start to the high watermark taken at the call (a read-only consumer: no commits, no fencing)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **common,
            "group.id": f"{group_id}-recovery",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,  # the end of the partition is reached once: don't wait there for more
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s, cached=False)
        if high <= low:
            return
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.02):  # returns early only when 1000 arrived: keep it short
                error, offset = msg.error(), msg.offset()
                assert offset is not None  # a fetched record or a partition EOF has one
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if offset >= high:
                            return
                        continue
                    raise KafkaLogError(f"reading {topic}[{partition}]: {error.str()}")
                if offset < high:
                    load(offset, msg.key(), msg.value())
        raise TimeoutError(f"reading {topic}[{partition}] did not reach offset {high} in {timeout_s} s")
    finally:
        consumer.close()


def export_to_segment_dir(
    bootstrap_servers: str, topic: str, partition: int, log_dir: str, *, client_config: dict | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Copy the state log in `topic`[`partition`] into a segment-log directory `log_dir` (one segment
    at the log's logical start offset) without touching the Kafka log (read-only: the owner is not
    fenced); what `sharegroup audit kafka://...` reads. Returns the number of records copied."""
    import os

    from .state_log_files import segment_file_name

    reader = KafkaRecordLog(
        topic=topic, partition=partition, producer=None, admin=None,
        config={"transactional.id": f"sharegroup-audit-{topic}-{partition}"}, timeout_s=timeout_s,
    )
    common = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
    read_partition(common, topic, partition, timeout_s, reader._load, reader.transactional_id)
    reader._executor.shutdown(wait=False)
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, segment_file_name(reader.start_offset)), "wb") as f:
        f.write(b"".join(reader.values))
    return len(reader)


class _Unsupported(Exception):
    """The cluster has no DeleteRecords."""


class _Aborted(Exception):
    """A transaction of the state log failed and was aborted (its cause is `__cause__`)."""


def _bounded(timeout_s: float, deadline: float) -> float:
    """`timeout_s`, cut to what is left until `deadline` (never below 0.1 s, so a call can answer)."""
    return max(0.1, min(timeout_s, deadline - time.monotonic()))


def ensure_topic(
    admin, topic, partition, num_partitions, create, replication_factor, min_insync_replicas, timeout_s,
    segment_bytes=None,
):
    """Make sure `topic` exists with `partition` in it; create it like `__share_group_state` if missing
    and `create` (a listing of all topics, not of this one, so no broker auto-creates it)."""
    from confluent_kafka.admin import NewTopic

    metadata = admin.list_topics(timeout=timeout_s)
    existing = metadata.topics.get(topic)
    if existing is None or existing.error is not None:
        if not create:
            raise KafkaLogError(f"the state topic {topic!r} does not exist (and create_topic is off)")
        rf, config = topic_settings(
            len(metadata.brokers), replication_factor=replication_factor, min_insync_replicas=min_insync_replicas,
            segment_bytes=segment_bytes,
        )
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=max(num_partitions, partition + 1), replication_factor=rf, config=config)],
            request_timeout=timeout_s,
        )
        for future in futures.values():
            try:
                future.result(timeout_s)
            except Exception as exc:  # created meanwhile by another coordinator is fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        return
    if partition >= len(existing.partitions):
        raise KafkaLogError(f"the state topic {topic!r} has {len(existing.partitions)} partitions, no {partition}")
