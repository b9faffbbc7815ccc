"""`sharegroup demo` (the default): the main job with real Kafka clients against `sharegroup serve`.

Layer 4 (an edge). The run:

1. starts `sharegroup serve` as a subprocess on a free port with its data in `data_dir` (short lock and
   session timings, `share.auto.offset.reset=earliest`) and waits for its readiness line;
2. creates the topic with a real `AdminClient`, spawns the consumers: real `confluent_kafka.ShareConsumer`s,
   one per child process (`live.consumer`), with explicit acknowledgements;
3. produces the orders (`live.workload`) with a real idempotent `Producer`, acks=all, while the
   consumers accept, release (transient failures, poison records) and reject (malformed records);
4. kills one consumer with SIGKILL in the middle of a batch: the broker releases what it held when its
   connection closes, and the others get those records again (delivery count + 1);
5. stops when every record is accepted or archived (the `LiveLedger`, fed by the children's reports),
   stops the consumers and the broker (SIGTERM, exit 0 expected);
6. checks the outcome (every record as the acknowledgements imply, nothing lost, byte-exact), reads the
   topic logs and the share state back from disk (every partition complete up to its log end), prints
   the summary, and runs the Spark audit of the share-state log (`DIR/share-state`).

With `share_state="kafka://host:port[/topic]"` serve keeps its share state in that Kafka topic instead
(`sharegroup serve --share-state`); after the run the demo copies the topic's state log, read-only, into
the segment directory `DIR/share-state-copy` (what `sharegroup audit kafka://...` does), and the
durable-state check and the audit read that copy.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import wait as wait_for_connections
from typing import Any, Callable, TextIO

from ..checks import LeaderState, audit_state_log, check_durable_state
from ..data_dir import prepare_serve_data_dir
from ..errors import DemoError
from ..progress_bar import ProgressBar
from .consumer import ConsumerSpec, consume
from .ledger import LiveLedger
from .share_state import check_share_state_url, copy_share_state
from .summary import LiveSummary
from .workload import LiveRates, kind_of, make_record, record_digest

__all__ = ["LiveRates", "LiveSummary", "run_live_demo"]

TOPIC = "demo-orders"
GROUP_ID = "demo-group"
LOCK_DURATION_MS = 5_000
SESSION_TIMEOUT_MS = 3_000  # the killed member's partitions go to the others this long after its death
HEARTBEAT_INTERVAL_MS = 300
RECORDS_PER_CHECKPOINT = 100  # share.coordinator.snapshot.update.records.per.snapshot (Kafka: 500)
PRODUCER_BATCH_RECORDS = 500  # the producer's batch.num.messages: whole batches are acquired together
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


SHARE_STATE_COPY = "share-state-copy"  # under DIR: the copy of a Kafka state topic the checks read


def serve_arguments(data_dir: str, partitions: int, delivery_count_limit: int,
                    metrics_port: int | None = None, share_state: str | None = None) -> list[str]:
    """The `sharegroup serve` options of the demo: Kafka's configs with short timings."""
    overrides = {
        "num.partitions": partitions,
        "group.share.min.record.lock.duration.ms": 1000,
        "group.share.min.session.timeout.ms": 1000,
        "group.share.session.timeout.ms": SESSION_TIMEOUT_MS,
        "group.share.min.heartbeat.interval.ms": 100,
        "group.share.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "group.share.assignment.interval.ms": 0,
        "share.coordinator.snapshot.update.records.per.snapshot": RECORDS_PER_CHECKPOINT,
    }
    group_configs = {
        "share.record.lock.duration.ms": LOCK_DURATION_MS,
        "share.delivery.count.limit": delivery_count_limit,
        "share.auto.offset.reset": "earliest",
    }
    args = ["serve", "--port", "0", "--data", data_dir]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    for key, value in group_configs.items():
        args += ["--group-config", f"{key}={value}"]
    if metrics_port is not None:
        args += ["--metrics-port", str(metrics_port)]
    if share_state is not None:
        args += ["--share-state", share_state]
    return args


class ServeSubprocess:
    """`python -m sharegroup serve ...` with its stderr in `DIR/serve.log`; always stop it with `stop()`."""

    def __init__(self, args: list[str], log_path: str) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "sharegroup", *args], stdout=subprocess.PIPE,
                                     stderr=self._log, text=True)
        line = self._ready_line()
        if not line.startswith("sharegroup serve: listening on "):
            self.stop()
            raise DemoError(f"sharegroup serve did not start: {line or self.log_tail()}")
        host_port = line.split(" listening on ", 1)[1].split(" ", 1)[0]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)

    def _ready_line(self) -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_S)
        return got[0].rstrip("\n") if got else ""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as f:
            return f.read()[-2000:]

    def stop(self) -> int:
        """SIGTERM and wait (SIGKILL after STOP_TIMEOUT_S); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        self.proc.stdout.close()
        self._log.close()
        return self.proc.returncode


def run_live_demo(
    *,
    data_dir: str | os.PathLike = "./sharegroup-data",
    partitions: int = 3,
    consumers: int = 4,
    records: int = 50_000,
    duration_s: float = 60.0,
    seed: int = 932,
    metrics_port: int | None = None,
    delivery_count_limit: int = 5,
    rates: LiveRates | None = None,
    kill_at_batch: int = 3,
    keep: bool = False,
    audit: bool = True,
    audit_engine: str = "spark",
    master: str = "local[2]",
    audit_out_dir: str | os.PathLike | None = None,
    share_state: str | None = None,
    print_fn: Callable[[str], None] = print,
    progress: bool | TextIO = True,
) -> LiveSummary:
    """Run the live demo (see the module doc) and, unless `audit=False`, the audit of its share-state log.

    `metrics_port` (0: any free port) is serve's Prometheus endpoint. `kill_at_batch`: the second consumer
    is SIGKILLed in the middle of its batch number `kill_at_batch` (0: no kill; there is none with a
    single consumer). `duration_s` bounds the consuming. `share_state` (a `kafka://host:port[/topic]`
    URL, ValueError otherwise) keeps serve's share state in that Kafka topic. Raises DemoError when it cannot start; the
    summary's `exit_code` tells the outcome.
    """
    limits = (("partitions", partitions, 1, 1000), ("consumers", consumers, 1, 200), ("records", records, 1, 10**8),
              ("delivery_count_limit", delivery_count_limit, 2, 10), ("kill_at_batch", kill_at_batch, 0, 10**6))
    for name, value, lo, hi in limits:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) or not duration_s > 0:
        raise ValueError(f"duration_s must be a number > 0, got {duration_s!r}")
    if share_state is not None:
        check_share_state_url(share_state)  # ValueError for anything but kafka://host:port[/topic]
    try:
        import confluent_kafka  # noqa: F401  (the children and the producer need it)
    except ImportError:
        raise DemoError("the live demo needs the Kafka client: pip install confluent-kafka "
                        "(or run `sharegroup demo --simulated`)") from None
    rates = rates or LiveRates()
    data_dir = os.fspath(data_dir)
    how = prepare_serve_data_dir(data_dir, keep)
    suffix = f"-{time.strftime('%Y%m%d-%H%M%S')}" if how == "kept" else ""
    topic, group_id = TOPIC + suffix, GROUP_ID + suffix
    ledger = LiveLedger(delivery_count_limit)
    summary = LiveSummary(data_dir=data_dir, topic=topic, group_id=group_id, partitions=partitions,
                          consumers=consumers, seed=seed, delivery_count_limit=delivery_count_limit, ledger=ledger)
    print_fn(f"sharegroup demo: {records:,} records on {partitions} partitions of topic {topic}, share group "
             f"{group_id} of {consumers} confluent_kafka ShareConsumers (child processes), seed {seed}")
    how_text = {"new": "new", "fresh": "wiped, starting fresh", "kept": "kept (--keep)"}[how]
    state_where = share_state or os.path.join(data_dir, "share-state")
    print_fn(f"broker data: {data_dir} ({how_text}); share-state log {state_where}")

    serve = ServeSubprocess(serve_arguments(data_dir, partitions, delivery_count_limit, metrics_port, share_state),
                            os.path.join(data_dir, "serve.log"))
    summary.bootstrap = serve.bootstrap
    print_fn(f"broker: sharegroup serve (pid {serve.proc.pid}) listening on {serve.bootstrap}, "
             f"log {serve.log_path}")
    for line in serve.log_tail().splitlines():  # serve names its metrics endpoint before it is ready
        if " metrics on " in line:
            summary.metrics_url = line.split(" metrics on ", 1)[1].strip()
            print_fn(f"metrics: {summary.metrics_url}")
    try:
        _create_topic(serve.bootstrap, topic, partitions)
        stream = sys.stderr if progress is True else None if progress is False else progress
        run = _Run(summary, serve.bootstrap, records, seed, rates, kill_at_batch if consumers > 1 else 0,
                   duration_s, ProgressBar(records, stream))
        run.run()
    finally:
        summary.serve_exit_code = serve.stop()
    if summary.serve_exit_code != 0:
        summary.consumer_errors.append(f"sharegroup serve exited {summary.serve_exit_code}: {serve.log_tail()}")
    summary.outcome_problems = ledger.outcome_problems(killed=summary.killed_consumer is not None)
    ledger._check()
    state_log_dir: str | None = os.path.join(data_dir, "share-state")
    if share_state is not None:
        summary.share_state_source = share_state
        try:
            state_log_dir = copy_share_state(share_state, os.path.join(data_dir, SHARE_STATE_COPY), print_fn)
        except DemoError as exc:
            state_log_dir = None
            summary.durable_state_problems = [str(exc)]
    if state_log_dir is not None:
        summary.durable_state_problems = asyncio.run(_check_on_disk(summary, state_log_dir))
    for line in summary.lines():
        print_fn(line)
    if audit and state_log_dir is not None:
        audit_state_log(summary, state_log_dir, master=master, spark=None, out_dir=audit_out_dir,
                        print_fn=print_fn, options={"delivery_count_limit": delivery_count_limit,
                                                    "snapshot_update_records_per_snapshot": RECORDS_PER_CHECKPOINT,
                                                    "engine": audit_engine})
    return summary


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(READY_TIMEOUT_S)


async def _check_on_disk(summary: LiveSummary, state_log_dir: str) -> list[str]:
    """Read the topic logs and the share state back from disk (the broker has stopped): every
    partition's log ends where the producer's records end, and its durable share state (the state log
    in `state_log_dir`) is complete up to that end (every record accepted or archived, nothing in
    flight)."""
    from ...topics.topic_store import TopicStore

    store = await TopicStore.open(summary.data_dir)
    try:
        info = store.topic_by_name(summary.topic)
        if info is None:
            return [f"topic {summary.topic} is not in {summary.data_dir}"]
        ends = {p: store.log_end_offset(info.topic_id, p) for p in range(info.num_partitions)}
    finally:
        await store.close()
    summary.log_end_offsets = ends
    problems = []
    produced = {}
    for partition, _offset in summary.ledger.records:
        produced[partition] = produced.get(partition, 0) + 1
    for partition, end in sorted(ends.items()):
        if end != produced.get(partition, 0):
            problems.append(f"partition {partition}: log ends at {end}, {produced.get(partition, 0)} records produced")
    complete = {p: LeaderState(end, [], end, end) for p, end in ends.items()}
    problems += await check_durable_state(state_log_dir, summary.group_id,
                                          info.topic_id, complete)
    return problems


class _Run:
    """The consumers, the producer thread and the loop that reads the consumers' reports."""

    def __init__(self, summary: LiveSummary, bootstrap: str, records: int, seed: int, rates: LiveRates,
                 kill_at_batch: int, duration_s: float, progress: ProgressBar) -> None:
        self.summary = summary
        self.ledger = summary.ledger
        self.bootstrap = bootstrap
        self.records = records
        self.seed = seed
        self.rates = rates
        self.kill_at_batch = kill_at_batch
        self.duration_s = duration_s
        self.progress = progress
        self.produced: queue.SimpleQueue = queue.SimpleQueue()  # (partition, offset, sequence) or an error
        self.producer_done = threading.Event()
        self.producer_errors: list[str] = []

    def run(self) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process that runs librdkafka threads
        stop = context.Event()
        children: dict[int, Any] = {}
        readers: dict[Any, int] = {}
        for index in range(1, self.summary.consumers + 1):
            reader, writer = context.Pipe(duplex=False)
            spec = ConsumerSpec(index, self.bootstrap, self.summary.group_id, self.summary.topic,
                                kill_at_batch=self.kill_at_batch if index == 2 else 0)
            child = context.Process(target=consume, args=(spec, writer, stop), name=f"demo-consumer-{index}",
                                    daemon=True)
            child.start()
            writer.close()
            children[index], readers[reader] = child, index
        try:
            self._wait_joined(readers)
            started = time.monotonic()
            producer = threading.Thread(target=self._produce, name="demo-producer", daemon=True)
            producer.start()
            self._consume_reports(readers, children, started)
            self.summary.wall_seconds = time.monotonic() - started
            producer.join(STOP_TIMEOUT_S)
        finally:
            stop.set()
            self._finish(readers, children)
            self.progress.close()

    def _wait_joined(self, readers: dict[Any, int]) -> None:
        joined: set[int] = set()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(joined) < len(readers) and time.monotonic() < deadline:
            for reader in wait_for_connections(list(readers), timeout=0.5):
                message = self._receive(reader, readers)
                if message is not None and message[0] == "joined":
                    joined.add(message[1])
                elif message is not None:
                    self._handle(message, None)
        if len(joined) < len(readers):
            raise DemoError(f"only {len(joined)} of {len(readers)} consumers started: {self.summary.consumer_errors}")

    def _produce(self) -> None:
        from confluent_kafka import Producer

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.producer_errors.append(str(err))
            else:
                self.produced.put((msg.partition(), msg.offset(), int(msg.key()[6:])))

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.num.messages": PRODUCER_BATCH_RECORDS, "log_level": 3})
        started = time.monotonic()
        try:
            partitions = self.summary.partitions
            for sequence in range(self.records):
                key, value, headers = make_record(sequence, kind_of(self.seed, sequence, self.rates))
                while True:
                    try:
                        producer.produce(self.summary.topic, key=key, value=value, headers=headers,
                                         partition=sequence % partitions, on_delivery=on_delivery)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.05)
                producer.poll(0)
            remaining = producer.flush(STOP_TIMEOUT_S)
            if remaining:
                self.producer_errors.append(f"{remaining} records not delivered")
        except Exception as exc:  # reported in the summary
            self.producer_errors.append(f"producer failed: {exc!r}")
        finally:
            self.summary.produce_seconds = time.monotonic() - started
            self.producer_done.set()

    def _drain_produced(self) -> None:
        while True:
            try:
                partition, offset, sequence = self.produced.get_nowait()
            except queue.Empty:
                return
            key, value, headers = make_record(sequence, kind_of(self.seed, sequence, self.rates))
            self.ledger.produced(partition, offset, sequence, kind_of(self.seed, sequence, self.rates),
                                 record_digest(key, value, headers))

    def _consume_reports(self, readers: dict[Any, int], children: dict[int, Any], started: float) -> None:
        deadline = started + self.duration_s
        producer_finished = False
        while True:
            for reader in wait_for_connections(list(readers), timeout=0.1):
                message = self._receive(reader, readers)
                if message is not None:
                    self._handle(message, children)
            self._drain_produced()
            if not producer_finished and self.producer_done.is_set():
                self._drain_produced()
                self.ledger.producer_finished()
                self.summary.consumer_errors += self.producer_errors
                producer_finished = True
            self.progress.update(self.ledger.done, self._progress_text)
            if producer_finished and self.ledger.done >= self.ledger.produced_count:
                break
            if self.summary.consumer_errors or not readers:
                break
            if time.monotonic() > deadline:
                self.summary.stopped_early = True
                break
        self.progress.update(self.ledger.done, self._progress_text, force=True)

    def _progress_text(self) -> str:
        ledger = self.ledger
        return (f"{ledger.done:,}/{self.records:,} done  {ledger.deliveries:,} deliveries  "
                f"{ledger.redeliveries:,} redelivered  {ledger.problem_count} problems")

    def _receive(self, reader: Any, readers: dict[Any, int]) -> tuple | None:
        try:
            return reader.recv()
        except (EOFError, OSError):  # the child ended (or was killed): its pipe is closed
            del readers[reader]
            reader.close()
            return None

    def _handle(self, message: tuple, children: dict[int, Any] | None) -> None:
        kind, index = message[0], message[1]
        if kind == "batch":
            self.ledger.delivered(index, message[2])
            if index == 2 and self.summary.killed_consumer is None:
                self.summary.killed_acked = len(message[2])
        elif kind == "holding":
            self.ledger.delivered(index, message[2], held=True)
            if children is not None:
                os.kill(children[index].pid, signal.SIGKILL)
            self.summary.killed_consumer = index
            self.summary.killed_held = len(message[2])
        elif kind == "error":
            self.summary.consumer_errors.append(f"consumer {index}: {message[2].strip()}")

    def _finish(self, readers: dict[Any, int], children: dict[int, Any]) -> None:
        """Collect the consumers' last reports, wait for them to exit (SIGKILL what does not)."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while readers and time.monotonic() < deadline:
            for reader in wait_for_connections(list(readers), timeout=0.2):
                message = self._receive(reader, readers)
                if message is not None:
                    self._handle(message, children)
        for index, child in children.items():
            child.join(max(0.1, deadline - time.monotonic()))
            if child.is_alive():
                child.kill()
                child.join()
                self.summary.consumer_errors.append(f"consumer {index} did not stop; killed")
