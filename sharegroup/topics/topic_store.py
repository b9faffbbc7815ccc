"""`TopicStore`: every topic of the broker, durably, behind the `PartitionLogs` protocol.

Layout of `DIR/topics/`::

    topics.json          every topic: name, topic id, partition count, config overrides (replaced
                         atomically: temp file, fsync, rename, directory fsync)
    producer-ids         the end of the block of producer ids handed out so far (atomically replaced)
    <topic>-<partition>/ one partition log each (topic_log)
    .lock                flock'd while a TopicStore has the directory open

Interface (what the wire layer calls)::

    store = await TopicStore.open(data_dir, log_config=LogConfig(...), clock=SystemClock(), fsync=True,
                                  io_threads=4)  # its own worker threads for file I/O
    store.topics() / topic_by_name(name) / topic_by_id(topic_id)          -> TopicInfo | None
    await store.create_topic(name, num_partitions=None, configs=None, *, replication_factor=-1,
                             validate_only=False)                        -> TopicInfo
    await store.auto_create_topic(name)     -> TopicInfo | None (None when auto-creation is off)
    await store.delete_topic(name)          -> TopicInfo (UNKNOWN_TOPIC_OR_PARTITION when absent)
    await store.append(topic_id, partition, records, *, acks, max_batches=1) -> AppendResult
    await store.begin_append(...)  -> AppendWait (placed and queued; awaited: the AppendResult)
    store.init_producer_id(transactional_id=None, producer_id=-1, producer_epoch=-1) -> (id, epoch)
    store.subscribe(listener)   # listener(topic_id, partition, log_end_offset) after every publish
    PartitionLogs: has_partition, log_start_offset, log_end_offset, last_stable_offset, read, offset_for
                # read(...).batches[i].records: a memoryview of the stored batch bytes (base offset set),
                # ready to be concatenated into a fetch response as they are
    store.topic_configs(name) / topic_log_config(name) / partition_log(topic_id, partition)
    store.stats()                           # counters for metrics (topic_store_metrics)
    await store.delete_records(topic_id, partition, before_offset)        -> new log start offset
    await store.enforce_retention()        -> [(topic_id, partition, new_log_start_offset), ...]
    await store.write_transaction_marker(topic_id, partition, producer_id, producer_epoch, commit=...)
    await store.close()

Topic names follow Kafka's rules (INVALID_TOPIC_EXCEPTION otherwise): 1-249 characters of
[a-zA-Z0-9._-], not "." or "..", and not colliding with an existing name when '.' and '_' are taken as
equal. Partition counts are 1..`MAX_PARTITIONS_PER_TOPIC` (INVALID_PARTITIONS), a bound of ours so that
no request can make the broker open files without limit; replication factor -1 or 1
(INVALID_REPLICATION_FACTOR: one node). Topic ids are random non-zero UUIDs kept in topics.json, so
they stay the same across restarts.

Producer ids: non-transactional InitProducerId always gets a fresh id with epoch 0 (Kafka's answer
whatever id and epoch the request carries). Ids come from blocks of 1000 whose end is made durable
before the first id of the block is handed out, so an id is never handed out twice, even across a
crash. Transactional ids are not served yet (INVALID_REQUEST, see init_producer_id).

Storage faults (log_dir): the store is one Kafka log dir; its first write, fsync or read error is logged
at ERROR naming the file and takes the whole store offline: every write is refused with
KAFKA_STORAGE_ERROR until the broker restarts; reads of published data go on.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from sharegroup.clock import Clock, SystemClock
from sharegroup.errors import Errors, ShareError
from sharegroup.logs import LogRead

from .log_config import LogConfig
from .log_dir import LogDir
from .segment_files import FsyncFn, fsync_dir, os_fsync, read_offset_file, write_file_atomically
from .io_threads import IoThreads
from .topic_log import AppendResult, AppendWait, TopicLog

__all__ = ["TopicStore", "TopicInfo", "AppendResult", "AppendWait", "LogConfig", "StoreLockedError", "MAX_PARTITIONS_PER_TOPIC",
           "PRODUCER_ID_BLOCK_SIZE"]

_logger = logging.getLogger(__name__)
AppendListener = Callable[[uuid.UUID, int, int], None]
TOPICS_FILE = "topics.json"
PRODUCER_IDS_FILE = "producer-ids"
LOCK_FILE = ".lock"
MAX_PARTITIONS_PER_TOPIC = 10_000
PRODUCER_ID_BLOCK_SIZE = 1000
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PARTITION_DIR = re.compile(r"[a-zA-Z0-9._-]{1,249}-\d+")


class StoreLockedError(OSError):
    """The data directory is already open by another TopicStore (in this or another process)."""


class TopicInfo(NamedTuple):
    """A topic: its name, its stable id and its partition count."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int


class _Topic:
    __slots__ = ("info", "configs", "config", "logs")

    def __init__(self, info: TopicInfo, configs: dict[str, str], config: LogConfig) -> None:
        self.info = info
        self.configs = configs
        self.config = config
        self.logs: list[TopicLog] = []


def check_topic_name(name: object) -> str:
    """Kafka's topic name rules; ShareError(INVALID_TOPIC_EXCEPTION) otherwise."""
    if not isinstance(name, str) or not _LEGAL_NAME.fullmatch(name) or name in (".", ".."):
        raise ShareError(Errors.INVALID_TOPIC_EXCEPTION,
                         f"illegal topic name {name!r}: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'")
    return name


def _new_topic_id() -> uuid.UUID:
    """A random topic id that is not zero and whose base64 form does not start with '-' (Kafka's rule,
    so that the id never reads as a command-line option)."""
    while True:
        topic_id = uuid.uuid4()
        if base64.urlsafe_b64encode(topic_id.bytes)[:1] != b"-":
            return topic_id


class TopicStore:
    """The durable topics of one broker. Open with `await TopicStore.open(...)`."""

    def __init__(self, root: str, log_config: LogConfig, clock: Clock, fsync: FsyncFn | None, lock_fd: int,
                 executor: ThreadPoolExecutor, io: IoThreads | None = None) -> None:
        self._root = root
        self._executor = executor
        self._io = io  # the threads of the logs' group commits (None: the executor's)
        self.log_config = log_config
        self._clock = clock
        self._fsync = fsync
        self._lock_fd = lock_fd
        self.log_dir = LogDir(root)  # online until the first storage fault (then until a restart)
        self._by_name: dict[str, _Topic] = {}
        self._by_id: dict[uuid.UUID, _Topic] = {}
        self._listeners: list[AppendListener] = []
        self._metadata_lock = asyncio.Lock()
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._closed = False

    # -- opening and closing -------------------------------------------------------------------

    @classmethod
    async def open(cls, data_dir: str | os.PathLike, *, log_config: LogConfig | None = None,
                   clock: Clock | None = None, fsync: bool | FsyncFn = True, io_threads: int = 4) -> TopicStore:
        """Open (creating if needed) the topic store under `data_dir/topics`: read the topics, open and
        recover every partition log (segment_files: torn tails truncated, corruption refused with
        CorruptLogError), reserve a block of producer ids. `fsync` is True (fdatasync), False (no
        fsync: tests and benchmarks of everything but the disk) or a function `fsync(fd)` to use."""
        if fsync is True:
            fsync_fn: FsyncFn | None = os_fsync
        elif fsync is False:
            fsync_fn = None
        elif callable(fsync):
            fsync_fn = fsync
        else:
            raise ValueError(f"fsync must be a bool or a function of a file descriptor, not {fsync!r}")
        if isinstance(io_threads, bool) or not isinstance(io_threads, int) or io_threads < 1:
            raise ValueError(f"io_threads must be an int >= 1, not {io_threads!r}")
        root = os.path.join(os.fspath(data_dir), "topics")
        # Topic writes and fsyncs get threads of their own, so that a busy disk for topics never queues
        # the share-state persister's writes (which use the loop's default executor) behind them.
        executor = ThreadPoolExecutor(io_threads, thread_name_prefix="topic-store")
        io = IoThreads(io_threads, "topic-writer")  # started on first use
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, cls._open_blocking, root, log_config or LogConfig(),
                                              clock or SystemClock(), fsync_fn, executor, io)
        except BaseException:
            executor.shutdown(wait=False)
            raise

    @classmethod
    def _open_blocking(cls, root: str, log_config: LogConfig, clock: Clock, fsync: FsyncFn | None,
                       executor: ThreadPoolExecutor, io: IoThreads) -> TopicStore:
        os.makedirs(root, exist_ok=True)
        lock_fd = os.open(os.path.join(root, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StoreLockedError(f"{root} is open by another topic store") from None
        store = cls(root, log_config, clock, fsync, lock_fd, executor, io)
        try:
            for info, configs in store._read_topics():
                store._register(store._open_topic(info, configs))
            if os.path.exists(os.path.join(root, TOPICS_FILE)):
                store._finish_deletions()
            store._read_producer_ids()
            store._reserve_producer_ids()
        except BaseException:
            store._close_blocking()
            raise
        return store

    def _read_topics(self) -> list[tuple[TopicInfo, dict[str, str]]]:
        path = os.path.join(self._root, TOPICS_FILE)
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
        except FileNotFoundError:
            return []
        if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("topics"), list):
            raise ValueError(f"{path}: not a topics file of version 1")
        out = []
        for t in doc["topics"]:
            info = TopicInfo(check_topic_name(t["name"]), uuid.UUID(t["topic_id"]), int(t["num_partitions"]))
            out.append((info, {str(k): str(v) for k, v in t.get("configs", {}).items()}))
        return out

    def _open_topic(self, info: TopicInfo, configs: dict[str, str]) -> _Topic:
        topic = _Topic(info, configs, self.log_config.for_topic(configs, stored=True))
        try:
            for partition in range(info.num_partitions):
                topic.logs.append(self._open_log(info, topic.config, partition))
        except BaseException:
            for log in topic.logs:
                log._close_files()
            raise
        return topic

    def _open_log(self, info: TopicInfo, config: LogConfig, partition: int) -> TopicLog:
        return TopicLog.open(os.path.join(self._root, f"{info.name}-{partition}"), config, fsync=self._fsync,
                             on_publish=self._publisher(info.topic_id, partition), executor=self._executor,
                             log_dir=self.log_dir, io=self._io)

    def _register(self, topic: _Topic) -> None:
        self._by_name[topic.info.name] = topic
        self._by_id[topic.info.topic_id] = topic

    def _publisher(self, topic_id: uuid.UUID, partition: int) -> Callable[[int], None]:
        listeners = self._listeners

        def publish(log_end_offset: int) -> None:
            for listener in listeners:
                try:
                    listener(topic_id, partition, log_end_offset)
                except Exception:  # a listener's bug must not stop the log's writer
                    _logger.exception("append listener %r failed for %s-%d", listener, topic_id, partition)

        return publish

    def _write_topics(self, topics: list[tuple[TopicInfo, dict[str, str]]]) -> None:
        doc = {"version": 1, "topics": [
            {"name": info.name, "topic_id": str(info.topic_id), "num_partitions": info.num_partitions,
             "configs": configs} for info, configs in topics]}
        write_file_atomically(os.path.join(self._root, TOPICS_FILE), json.dumps(doc, indent=1).encode(), self._fsync)

    async def close(self) -> None:
        """Finish queued appends, close every log and release the directory."""
        if self._closed:
            return
        self._closed = True
        for topic in list(self._by_name.values()):
            for log in topic.logs:
                await log.close()
        self._close_blocking()
        self._executor.shutdown(wait=True)
        if self._io is not None:
            self._io.shutdown()

    def _close_blocking(self) -> None:
        for topic in self._by_name.values():
            for log in topic.logs:
                log._close_files()
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- topics --------------------------------------------------------------------------------

    def topics(self) -> list[TopicInfo]:
        return [t.info for t in self._by_name.values()]

    def topic_by_name(self, name: str) -> TopicInfo | None:
        topic = self._by_name.get(name)
        return topic.info if topic else None

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self._by_id.get(topic_id)
        return topic.info if topic else None

    def topic_configs(self, name: str) -> dict[str, str] | None:
        """The config overrides a topic was created with (None for an unknown topic)."""
        topic = self._by_name.get(name)
        return dict(topic.configs) if topic else None

    def topic_log_config(self, name: str) -> LogConfig | None:
        """The effective log settings of a topic (broker defaults with its overrides)."""
        topic = self._by_name.get(name)
        return topic.config if topic else None

    async def create_topic(self, name: str, num_partitions: int | None = None,
                           configs: Mapping[str, object] | None = None, *, replication_factor: int = -1,
                           validate_only: bool = False) -> TopicInfo:
        """Create a topic (Kafka's CreateTopics for one topic): check it, persist its metadata, create
        its partition logs. `num_partitions` None or -1 takes `num.partitions`."""
        self._check_open()
        check_topic_name(name)
        if num_partitions is None or num_partitions == -1:
            num_partitions = self.log_config.num_partitions
        if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
            raise ShareError(Errors.INVALID_PARTITIONS,
                             f"number of partitions must be at least 1, got {num_partitions!r}")
        if num_partitions > MAX_PARTITIONS_PER_TOPIC:
            raise ShareError(Errors.INVALID_PARTITIONS,
                             f"{num_partitions} partitions is more than this broker's {MAX_PARTITIONS_PER_TOPIC}")
        if replication_factor not in (-1, 1):
            raise ShareError(Errors.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor!r}: this broker is a single node (use 1 or -1)")
        str_configs = {str(k): str(v) for k, v in (configs or {}).items()}
        self.log_config.for_topic(str_configs)  # INVALID_CONFIG before anything changes
        async with self._metadata_lock:
            self._check_open()
            if name in self._by_name:
                raise ShareError(Errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            folded = name.replace(".", "_")
            for other in self._by_name:
                if other.replace(".", "_") == folded:
                    raise ShareError(Errors.INVALID_TOPIC_EXCEPTION,
                                     f"topic {name!r} collides with existing topic {other!r} ('.' and '_' collide)")
            info = TopicInfo(name, _new_topic_id(), num_partitions)
            while info.topic_id in self._by_id:  # pragma: no cover - 2**-122
                info = info._replace(topic_id=_new_topic_id())
            if validate_only:
                return info
            listed = [(t.info, t.configs) for t in self._by_name.values()] + [(info, str_configs)]
            loop = asyncio.get_running_loop()
            try:
                topic = await loop.run_in_executor(self._executor, self._create_blocking, listed, info, str_configs)
            except OSError as exc:
                raise self.log_dir.fault(None, f"creating topic {name!r}: write", exc) from exc
            self._register(topic)
            return info

    def _create_blocking(self, listed: list[tuple[TopicInfo, dict[str, str]]], info: TopicInfo,
                         configs: dict[str, str]) -> _Topic:
        # Metadata first: a crash before the partition directories exist only means they are created
        # (empty) on the next open.
        self._write_topics(listed)
        return self._open_topic(info, configs)

    async def delete_topic(self, name: str) -> TopicInfo:
        """Kafka's DeleteTopics for one topic: it disappears at once (appends and reads answer
        UNKNOWN_TOPIC_OR_PARTITION), queued appends finish, then its metadata and its partition
        directories are removed. UNKNOWN_TOPIC_OR_PARTITION when there is no such topic."""
        self._check_open()
        async with self._metadata_lock:
            topic = self._by_name.get(name)
            if topic is None:
                raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
            del self._by_name[name], self._by_id[topic.info.topic_id]
            for log in topic.logs:
                await log.close()
            listed = [(t.info, t.configs) for t in self._by_name.values()]
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._delete_blocking, listed,
                                                                 topic.info)
            except OSError as exc:
                raise self.log_dir.fault(None, f"deleting topic {name!r}: write", exc) from exc
            return topic.info

    def _delete_blocking(self, listed: list[tuple[TopicInfo, dict[str, str]]], info: TopicInfo) -> None:
        # Metadata first, then the directories: a crash in between leaves directories no topic owns,
        # which the next open removes (_finish_deletions), so a topic created later under the same name
        # never finds old data.
        self._write_topics(listed)
        for partition in range(info.num_partitions):
            path = os.path.join(self._root, f"{info.name}-{partition}")
            if os.path.isdir(path):
                os.rename(path, f"{path}.{info.topic_id.hex}-delete")
        if self._fsync is not None:
            fsync_dir(self._root, self._fsync)
        self._finish_deletions()

    def _finish_deletions(self) -> None:
        """Remove directories of deleted topics: renamed ones (`…-delete`) and partition directories
        that no topic in topics.json owns (a deletion cut short after its metadata was written)."""
        owned = {f"{t.info.name}-{p}" for t in self._by_name.values() for p in range(t.info.num_partitions)}
        for entry in os.listdir(self._root):
            path = os.path.join(self._root, entry)
            if not os.path.isdir(path) or entry in owned:
                continue
            if entry.endswith("-delete") or _PARTITION_DIR.fullmatch(entry):
                shutil.rmtree(path)

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> TopicInfo:
        """Kafka's CreatePartitions for one topic: grow it to `count` partitions (new ones empty, from
        offset 0). UNKNOWN_TOPIC_OR_PARTITION for no such topic, INVALID_PARTITIONS unless
        current < count <= the per-topic maximum. The new logs exist before the metadata names them: a
        crash in between leaves directories no topic owns, removed at the next open."""
        self._check_open()
        async with self._metadata_lock:
            topic = self._by_name.get(name)
            if topic is None:
                raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
            current = topic.info.num_partitions
            if isinstance(count, bool) or not isinstance(count, int):
                raise ShareError(Errors.INVALID_PARTITIONS, f"partition count {count!r} is not an integer")
            if count == current:
                raise ShareError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            if count < current:
                raise ShareError(Errors.INVALID_PARTITIONS, f"The topic {name} currently has {current} partition(s); "
                                                            f"{count} would not be an increase.")
            if count > MAX_PARTITIONS_PER_TOPIC:
                raise ShareError(Errors.INVALID_PARTITIONS,
                                 f"{count} partitions is more than this broker's {MAX_PARTITIONS_PER_TOPIC}")
            info = topic.info._replace(num_partitions=count)
            if validate_only:
                return info
            grown = _Topic(info, topic.configs, topic.config)
            grown.logs = list(topic.logs)
            listed = [(grown.info if t is topic else t.info, t.configs) for t in self._by_name.values()]
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._grow_blocking, grown, current,
                                                                 listed)
            except OSError as exc:
                raise self.log_dir.fault(None, f"adding partitions to {name!r}: write", exc) from exc
            self._register(grown)
            return info

    def _grow_blocking(self, topic: _Topic, first_new: int, listed: list[tuple[TopicInfo, dict[str, str]]]) -> None:
        info = topic.info
        try:
            for partition in range(first_new, info.num_partitions):
                topic.logs.append(self._open_log(info, topic.config, partition))
            self._write_topics(listed)
        except BaseException:
            for log in topic.logs[first_new:]:
                log._close_files()
            raise

    async def alter_topic_configs(self, name: str, configs: Mapping[str, object], *,
                                  validate_only: bool = False) -> dict[str, str]:
        """Replace a topic's config overrides with `configs` (IncrementalAlterConfigs computes them):
        checked like CreateTopics configs (INVALID_CONFIG), made durable in the topics file, then applied
        to every partition log (retention and segment rolling read them). Returns the new overrides."""
        self._check_open()
        str_configs = {str(k): str(v) for k, v in configs.items()}
        log_config = self.log_config.for_topic(str_configs)  # INVALID_CONFIG before anything changes
        async with self._metadata_lock:
            topic = self._by_name.get(name)
            if topic is None:
                raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
            if validate_only:
                return str_configs
            listed = [(t.info, str_configs if t is topic else t.configs) for t in self._by_name.values()]
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._write_topics, listed)
            except OSError as exc:
                raise self.log_dir.fault(None, f"altering topic {name!r}: write", exc) from exc
            topic.configs, topic.config = str_configs, log_config
            for log in topic.logs:
                log.config = log_config
            return dict(str_configs)

    async def auto_create_topic(self, name: str) -> TopicInfo | None:
        """The topic, created with the defaults when it does not exist and `auto.create.topics.enable`
        is on (Metadata auto-creation; a Produce never creates); None when it does not exist and may not
        be created."""
        existing = self.topic_by_name(name)
        if existing is not None:
            return existing
        if not self.log_config.auto_create_topics_enable:
            return None
        try:
            return await self.create_topic(name)
        except ShareError as exc:
            if exc.error == Errors.TOPIC_ALREADY_EXISTS:  # created meanwhile by another request
                return self.topic_by_name(name)
            raise

    # -- producing -----------------------------------------------------------------------------

    async def append(self, topic_id: uuid.UUID, partition: int, records: bytes | bytearray | memoryview, *,
                     acks: int, max_batches: int | None = 1) -> AppendResult:
        """Append a Produce request's records for one partition (TopicLog.append); acks -1 and 1 return
        once the records are durable (group commit), acks 0 once they are queued. acks outside
        {-1, 0, 1}: INVALID_REQUIRED_ACKS. Like Kafka's Produce (v3+), the records must be exactly one
        batch (INVALID_RECORD otherwise) unless `max_batches` allows more (None: any number)."""
        return await (await self.begin_append(topic_id, partition, records, acks=acks, max_batches=max_batches))

    async def begin_append(self, topic_id: uuid.UUID, partition: int, records: bytes | bytearray | memoryview, *,
                           acks: int, max_batches: int | None = 1) -> AppendWait:
        """The ordered part of `append` (TopicLog.begin_append): checked, placed and queued for the disk
        when it returns; await the `AppendWait` for the answer."""
        if acks not in (-1, 0, 1):
            raise ShareError(Errors.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, got {acks!r}")
        return await self._log(topic_id, partition).begin_append(records, now_ms=self._clock.now_ms(), acks=acks,
                                                                  max_batches=max_batches)

    async def write_transaction_marker(self, topic_id: uuid.UUID, partition: int, producer_id: int,
                                       producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
                                       timestamp_ms: int | None = None) -> AppendResult:
        """Write a commit or abort marker for `producer_id`'s transaction in one partition, stamped with
        `timestamp_ms` (default: the store's clock)."""
        return await self._log(topic_id, partition).write_transaction_marker(
            producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
            timestamp_ms=self._clock.now_ms() if timestamp_ms is None else timestamp_ms)

    def init_producer_id(self, transactional_id: str | None = None, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int]:
        """Kafka's InitProducerId for an idempotent (non-transactional) producer: a fresh producer id,
        epoch 0, whatever id and epoch the request carried. Writes the next block of ids durably once
        every 1000 ids (a short blocking write). A transactional id raises ShareError(INVALID_REQUEST):
        transactions are not served yet."""
        self._check_open()
        if transactional_id is not None:
            raise ShareError(Errors.INVALID_REQUEST,
                             f"transactional id {transactional_id!r}: transactional producers are not served yet")
        if self._next_producer_id >= self._producer_id_block_end:
            try:
                self._reserve_producer_ids()
            except OSError as exc:
                raise self.log_dir.fault(None, "reserving producer ids: write", exc) from exc
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid, 0

    def _read_producer_ids(self) -> None:
        end = read_offset_file(os.path.join(self._root, PRODUCER_IDS_FILE))
        if end is not None:
            self._next_producer_id = self._producer_id_block_end = end

    def _reserve_producer_ids(self) -> None:
        end = self._producer_id_block_end + PRODUCER_ID_BLOCK_SIZE
        write_file_atomically(os.path.join(self._root, PRODUCER_IDS_FILE), b"%d\n" % end, self._fsync)
        self._next_producer_id = self._producer_id_block_end
        self._producer_id_block_end = end

    def subscribe(self, listener: AppendListener) -> None:
        """Call `listener(topic_id, partition, log_end_offset)` after every publish (appends becoming
        durable and visible; one call per group commit)."""
        self._listeners.append(listener)

    # -- the PartitionLogs protocol ------------------------------------------------------------

    def has_partition(self, topic_id: uuid.UUID, partition: int) -> bool:
        topic = self._by_id.get(topic_id)
        return topic is not None and isinstance(partition, int) and 0 <= partition < len(topic.logs)

    def log_start_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).log_start_offset

    def log_end_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).log_end_offset

    def last_stable_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).last_stable_offset

    def read(self, topic_id: uuid.UUID, partition: int, fetch_offset: int, max_bytes: int, *,
             read_committed: bool = False) -> LogRead:
        return self._log(topic_id, partition).read(fetch_offset, max_bytes, read_committed=read_committed)

    def offset_for(self, topic_id: uuid.UUID, partition: int, spec: object) -> int:
        return self._log(topic_id, partition).offset_for(spec)

    def stats(self) -> dict[str, int]:
        """Totals over every partition log (TopicLog.stats) plus topic and partition counts: the hook
        the broker's metrics read."""
        totals: dict[str, int] = {"topics": len(self._by_name), "partitions": 0,
                                  "offline_log_dirs": int(self.log_dir.offline), "storage_faults": self.log_dir.faults}
        for topic in self._by_name.values():
            for log in topic.logs:
                totals["partitions"] += 1
                for key, value in log.stats().items():
                    totals[key] = totals.get(key, 0) + value
        return totals

    def partition_log(self, topic_id: uuid.UUID, partition: int) -> TopicLog:
        """The log of one partition (for tests, metrics and tools)."""
        return self._log(topic_id, partition)

    # -- moving log starts ---------------------------------------------------------------------

    async def delete_records(self, topic_id: uuid.UUID, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords for one partition: returns the new log start offset (the low watermark)."""
        return await self._log(topic_id, partition).delete_records(before_offset)

    async def enforce_retention(self) -> list[tuple[uuid.UUID, int, int]]:
        """Apply `retention.ms` / `retention.bytes` to every partition now (by the store's clock); returns
        the partitions whose log start moved, with the new log start offset (none while offline)."""
        now_ms = self._clock.now_ms()
        moved = []
        for topic in list(self._by_name.values()):
            for partition, log in enumerate(topic.logs):
                new_start = await log.enforce_retention(now_ms)
                if new_start is not None:
                    moved.append((topic.info.topic_id, partition, new_start))
        return moved

    def _check_open(self) -> None:  # for writes to the store's metadata
        if self._closed:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, "the topic store is closed")
        self.log_dir.check_writable()

    def _log(self, topic_id: uuid.UUID, partition: int) -> TopicLog:
        topic = self._by_id.get(topic_id)
        if topic is None or isinstance(partition, bool) or not isinstance(partition, int) \
                or not 0 <= partition < len(topic.logs):
            raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic_id}-{partition}")
        return topic.logs[partition]
