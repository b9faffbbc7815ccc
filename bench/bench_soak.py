"""Soak: `sharegroup serve` left running under a steady mixed load, and whether its durable state, its memory
and its open files stay bounded, and its restart time flat (docs/serve-performance.md, "The soak").

    python -m pytest bench/bench_soak.py --benchmark-enable -q          # SHAREGROUP_SOAK_SECONDS (600) of load
    SHAREGROUP_BENCH_SMOKE=1 python -m pytest bench/bench_soak.py --benchmark-disable -q   # 10 s of load

One `serve` (a subprocess on 127.0.0.1, port 0, a fresh data directory) runs for the whole soak, with Kafka
config overrides that make its maintenance frequent enough to show within minutes: the share coordinator's
prune job and cold-partition snapshots every few seconds, a small state-log segment, 1 MiB topic segments
with retention by size and age checked every 2 s. Against it, each client in a thread of this process:
- a Producer (idempotent, acks=all) at a steady rate (SHAREGROUP_SOAK_RATE records/s, default 1,000) of
  200 B records to a 2-partition topic;
- two ShareConsumers of one share group, explicit acknowledgement: every 20th offset RELEASE (so it is
  delivered again, until the delivery count limit archives it), the next REJECT, the others ACCEPT, and a
  `commit_sync` after each batch;
- two consumer groups reading the same topic, one classic and one KIP-848 (`group.protocol=consumer`), each
  committing its offsets twice a second;
- churn: every few seconds a new topic is created, written, read by a new share group and a new classic
  consumer group (which commit and leave), and the previous round's topic and groups are deleted
  (AdminClient `delete_topics` and `delete_consumer_groups`, which deletes share groups too).

Every few seconds a sample: the bytes of `DIR/share-state`, `DIR/groups` and `DIR/topics`, serve's RSS
(`VmRSS`) and its open file descriptors. Growth is judged after a warm-up (the first fifth of the soak, when
retention and maintenance have run many times): the first and the last sample after it, and the peaks in
the first and the second half of the time after it, with their ratios.

Restart time, four times: at the middle and at the end of the load, serve is paused (SIGSTOP) while its data
directory is copied (a crash-consistent copy, as a `kill -9` would leave it), then resumed, and a second
serve is started on the copy (so the soaked process runs on, and the two copies show whether the time grows
with history); after the load, serve is stopped with SIGTERM and restarted on its own directory twice.
Each time is from the launch of the process to its readiness line, so it includes the interpreter's start;
the first start on the empty directory is reported as the baseline.

Every wait is bounded; serve (and every copy) is stopped in a `finally`, with SIGKILL when SIGTERM is not
enough, and reaped.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FULL_SECONDS = 600
SMOKE_SECONDS = 10
DEFAULT_RATE = 1_000  # records/s
RECORD_BYTES = 200
PARTITIONS = 2
WARMUP_FRACTION = 0.2
READY_TIMEOUT_S = 60.0  # a start that recovers a long history may take a while; still bounded
STOP_TIMEOUT_S = 30.0
CLIENT_WAIT_S = 10.0
JOIN_TIMEOUT_S = 45.0  # a client thread's exit after the stop: its poll, its commit and its close
COMMIT_INTERVAL_S = 0.5
CHURN_RECORDS = 10
TOPIC = "soak"
SHARE_GROUP = "soak-share"
PROTOCOLS = ("classic", "consumer")  # the consumer groups' group.protocol: classic and KIP-848
DIRS = ("share-state", "groups", "topics")
COLUMNS = ("t_s", "share_state_bytes", "groups_bytes", "topics_bytes", "rss_kb", "fds")
QUIET = {"log_level": 3}  # librdkafka: errors only (a churn topic's deletion makes warnings)


def soak_seconds(disabled: bool = False) -> int:
    """The soak's load time: SMOKE_SECONDS in the smoke run (or timing disabled), else
    SHAREGROUP_SOAK_SECONDS, else FULL_SECONDS."""
    if os.environ.get("SHAREGROUP_BENCH_SMOKE") == "1" or disabled:
        return SMOKE_SECONDS
    return int(os.environ.get("SHAREGROUP_SOAK_SECONDS", FULL_SECONDS))


class Timings:
    """The soak's intervals, scaled to its length: a 600 s soak samples every 5 s, churns every 10 s and
    runs the share coordinator's jobs every 10 s; a short one does all of it every 1-2 s."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self.sample_s = max(1.0, min(5.0, seconds / 60))
        self.churn_s = max(2.0, min(10.0, seconds / 30))
        self.maintenance_ms = max(1000, min(10_000, seconds * 1000 // 30))
        self.retention_ms = max(5000, min(60_000, seconds * 1000 // 10))
        self.warmup_s = seconds * WARMUP_FRACTION

    def serve_args(self) -> tuple[str, ...]:
        overrides = {
            "share.coordinator.state.topic.prune.interval.ms": self.maintenance_ms,
            "share.coordinator.cold.partition.snapshot.interval.ms": self.maintenance_ms,
            "share.coordinator.state.topic.segment.bytes": 64 * 1024,
            "offsets.topic.segment.bytes": 64 * 1024,  # DIR/groups' counterpart (Kafka's bound is 1)
            "log.segment.bytes": 1024 * 1024,  # Kafka's least
            "log.retention.bytes": 2 * 1024 * 1024,
            "log.retention.ms": self.retention_ms,
            "log.retention.check.interval.ms": 2000,
            "group.share.min.heartbeat.interval.ms": 100,
            "group.share.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.initial.rebalance.delay.ms": 0,
        }
        group_configs = {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": 3}
        return (*(a for k, v in overrides.items() for a in ("--override", f"{k}={v}")),
                *(a for k, v in group_configs.items() for a in ("--group-config", f"{k}={v}")))


# -- serve ---------------------------------------------------------------------------------------------


class Serve:
    """`python -m sharegroup serve --port 0 --data DIR ARGS`, started and waited for (bounded); `ready_s` is
    the launch → readiness line time. Its stdout is drained by a thread and its stderr goes to `log`, so a
    long run never blocks on a full pipe."""

    def __init__(self, data_dir: pathlib.Path, args: tuple[str, ...], log: pathlib.Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._log = open(log, "a")
        self._ready = threading.Event()
        self._ready_at = 0.0
        self.line = ""
        launched = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "sharegroup", "serve", "--port", "0", "--data",
                                      str(data_dir), *args], stdout=subprocess.PIPE, stderr=self._log, env=env,
                                     text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(0.05) and self.proc.poll() is None and time.monotonic() < deadline:
            pass
        if not self._ready.is_set():
            self.stop()
            raise RuntimeError(f"sharegroup serve on {data_dir} did not become ready (exit code "
                               f"{self.proc.returncode}): {log.read_text()[-2000:]}")
        self.ready_s = self._ready_at - launched
        self.bootstrap = self.line.split(" listening on ", 1)[1].split(" ", 1)[0]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not self._ready.is_set() and " listening on " in line:
                self._ready_at = time.perf_counter()
                self.line = line
                self._ready.set()

    def rss_kb(self) -> int:
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> float:
        """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S; reaped. Returns the seconds
        from the signal to its exit."""
        started = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused process would not see the SIGTERM
            self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        took = time.perf_counter() - started
        self._reader.join(STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        return took


def dir_bytes(path: pathlib.Path) -> int:
    """The bytes of every file under `path` (files that vanish while it is walked are skipped)."""
    total = 0
    for parent, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(parent, name), follow_symlinks=False).st_size
            except FileNotFoundError:
                pass
    return total


# -- the load ------------------------------------------------------------------------------------------


def ack_kind(offset: int) -> str:
    """The acknowledgement of a delivered record: every 20th offset RELEASE, the next REJECT, else ACCEPT."""
    return "release" if offset % 20 == 0 else "reject" if offset % 20 == 1 else "accept"


class Load:
    """The soak's clients, each in a thread; `counts` what they did, `errors` the first few unexpected
    exceptions (a thread that raises sets `failed`, which ends the soak early)."""

    def __init__(self, bootstrap: str, rate: int, timings: Timings) -> None:
        import confluent_kafka

        self.ck = confluent_kafka
        self.bootstrap, self.rate, self.timings = bootstrap, rate, timings
        self.stop = threading.Event()
        self.failed = threading.Event()
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def note(self, what: str) -> None:
        with self._lock:
            if len(self.errors) < 10:
                self.errors.append(what)

    def start(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)],
                            request_timeout=CLIENT_WAIT_S)[TOPIC].result(CLIENT_WAIT_S)
        targets: list[tuple[str, Callable[[], None]]] = [("produce", self._produce)]
        targets += [(f"share-{i}", lambda i=i: self._share_consume(i)) for i in range(2)]
        targets += [(f"group-{p}", lambda p=p: self._group_consume(p)) for p in PROTOCOLS]
        targets += [("churn", self._churn)]
        for name, target in targets:
            thread = threading.Thread(target=self._guard, args=(name, target), name=f"soak-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def finish(self) -> list[str]:
        """Stop every client; the names of threads that did not end within JOIN_TIMEOUT_S."""
        self.stop.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    def _guard(self, name: str, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException:
            self.note(f"{name}: {traceback.format_exc(limit=4)}")
            self.failed.set()

    def _produce(self) -> None:
        producer = self.ck.Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "acks": "all",
                                     "enable.idempotence": True, **QUIET})

        def delivered(err: Any, _message: Any) -> None:
            self.count("produced" if err is None else "produce_errors")

        value = bytes(RECORD_BYTES)
        started, sent = time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            for _ in range(min(due - sent, self.rate)):  # at most a second's worth at once
                try:
                    producer.produce(TOPIC, key=b"%d" % (sent % 64), value=value, on_delivery=delivered)
                except BufferError:  # the client's queue is full: the broker is behind
                    self.count("produce_queue_full")
                    break
                sent += 1
            producer.poll(0.05)
        if producer.flush(CLIENT_WAIT_S):
            self.count("produce_undelivered", len(producer))

    def _share_consume(self, index: int) -> None:
        ck = self.ck
        types = {"accept": ck.AcknowledgeType.ACCEPT, "release": ck.AcknowledgeType.RELEASE,
                 "reject": ck.AcknowledgeType.REJECT}
        consumer = ck.ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": SHARE_GROUP,
                                     "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200,
                                     "client.id": f"soak-share-{index}", **QUIET})
        consumer.subscribe([TOPIC])
        try:
            while not self.stop.is_set():
                try:
                    messages = consumer.poll(0.2)
                except ck.KafkaException as exc:
                    self.count("share_poll_errors")
                    self.note(f"share-{index} poll: {exc}")
                    self.stop.wait(0.2)
                    continue
                acked = 0
                for message in messages:
                    if message.error() is not None:
                        self.count("share_message_errors")
                        continue
                    kind = ack_kind(message.offset())
                    consumer.acknowledge(message, types[kind])
                    self.count(f"share_{kind}")
                    if message.delivery_count() > 1:
                        self.count("share_redelivered")
                    acked += 1
                if acked:
                    try:
                        failed = [tp for tp, error in consumer.commit_sync(CLIENT_WAIT_S).items() if error is not None]
                    except ck.KafkaException as exc:
                        failed = [exc]
                    self.count("share_commits")
                    self.count("share_commit_errors", len(failed))
        finally:
            consumer.close()

    def _group_consume(self, protocol: str) -> None:
        """A consumer group member (`protocol` classic or consumer) committing its offsets twice a second."""
        ck = self.ck
        consumer = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"soak-{protocol}",
                                "group.protocol": protocol, "auto.offset.reset": "earliest",
                                "enable.auto.commit": False, "client.id": f"soak-{protocol}", **QUIET})
        consumer.subscribe([TOPIC])
        last_commit, fresh = time.monotonic(), 0
        try:
            while not self.stop.is_set():
                messages = consumer.consume(500, 0.2)
                fresh += sum(1 for m in messages if m.error() is None)
                if fresh and time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                    try:
                        consumer.commit(asynchronous=False)
                        self.count(f"group_{protocol}_commits")
                    except ck.KafkaException as exc:
                        self.count("group_commit_errors")
                        self.note(f"group-{protocol} commit: {exc}")
                    self.count(f"group_{protocol}_consumed", fresh)
                    last_commit, fresh = time.monotonic(), 0
        finally:
            consumer.close()

    def _churn(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        producer = self.ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", **QUIET})
        previous: tuple[str, list[str]] | None = None
        round_no = 0
        while not self.stop.wait(self.timings.churn_s):
            round_no += 1
            made = self._churn_round(admin, producer, round_no)
            if previous is not None and not self.stop.is_set():
                self._delete(admin, *previous, topic_first=round_no % 2 == 0)
            previous = made
        producer.flush(CLIENT_WAIT_S)

    def _churn_round(self, admin: Any, producer: Any, n: int) -> tuple[str, list[str]]:
        """A new topic, written, read and acknowledged by a new share group and a new consumer group, which
        then leave. Returns the topic and the groups, for the next round to delete."""
        from confluent_kafka.admin import NewTopic

        ck = self.ck
        topic, share_group, group = f"soak-churn-{n}", f"soak-churn-share-{n}", f"soak-churn-group-{n}"
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                            request_timeout=CLIENT_WAIT_S)[topic].result(CLIENT_WAIT_S)
        self.count("churn_topics_created")
        for i in range(CHURN_RECORDS):
            producer.produce(topic, value=b"churn %d" % i)
        producer.flush(CLIENT_WAIT_S)
        share = ck.ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": share_group,
                                  "fetch.wait.max.ms": 200, **QUIET})
        share.subscribe([topic])
        got = 0
        try:
            deadline = time.monotonic() + CLIENT_WAIT_S
            while got < CHURN_RECORDS and time.monotonic() < deadline and not self.stop.is_set():
                got += sum(1 for m in share.poll(0.2) if m.error() is None)
            if got:
                share.commit_sync(CLIENT_WAIT_S)  # implicit mode: what the last poll returned is accepted
        finally:
            share.close()
        self.count("churn_share_records", got)
        consumer = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                "enable.auto.commit": False, **QUIET})
        consumer.subscribe([topic])
        got = 0
        try:
            deadline = time.monotonic() + CLIENT_WAIT_S
            while got < CHURN_RECORDS and time.monotonic() < deadline and not self.stop.is_set():
                got += sum(1 for m in consumer.consume(100, 0.2) if m.error() is None)
            if got:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        self.count("churn_group_records", got)
        self.count("churn_rounds")
        return topic, [share_group, group]

    def _delete(self, admin: Any, topic: str, groups: list[str], topic_first: bool) -> None:
        """Delete a churn round's topic and groups (the order alternates between rounds)."""
        def topics() -> None:
            try:
                admin.delete_topics([topic], operation_timeout=CLIENT_WAIT_S)[topic].result(CLIENT_WAIT_S)
                self.count("churn_topics_deleted")
            except self.ck.KafkaException as exc:
                self.count("churn_delete_errors")
                self.note(f"delete topic {topic}: {exc}")

        def group_ids() -> None:
            for group, future in admin.delete_consumer_groups(groups, request_timeout=CLIENT_WAIT_S).items():
                try:
                    future.result(CLIENT_WAIT_S)
                    self.count("churn_groups_deleted")
                except self.ck.KafkaException as exc:
                    self.count("churn_delete_errors")
                    self.note(f"delete group {group}: {exc}")

        for step in ((topics, group_ids) if topic_first else (group_ids, topics)):
            step()


# -- the soak ------------------------------------------------------------------------------------------


@dataclass
class SoakResult:
    seconds: int
    rate: int
    timings: Timings
    samples: list[list[float]] = field(default_factory=list)
    restarts: dict[str, Any] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    load_s: float = 0.0
    after_load: list[float] = field(default_factory=list)  # a sample once the clients have closed

    def post_warmup(self) -> list[list[float]]:
        return [s for s in self.samples if s[0] >= self.timings.warmup_s]

    def growth(self) -> dict[str, dict[str, float | None]]:
        """For every sampled measure: its first and last value after the warm-up and their ratio, and its
        peak in the first and in the second half of the time after the warm-up and their ratio. A bounded
        store is a sawtooth (segments roll and go whole), so the peaks judge it better than two samples."""
        after = self.post_warmup() or self.samples  # a soak that failed early may have ended in its warm-up
        halves = (after[: len(after) // 2] or after, after[len(after) // 2:])
        out: dict[str, dict[str, float | None]] = {}
        for column, name in enumerate(COLUMNS[1:], 1):
            first, last = after[0][column], after[-1][column]
            peaks = [max(s[column] for s in half) for half in halves]
            out[name] = {"first": first, "last": last, "growth": _ratio(last, first), "peak_first_half": peaks[0],
                         "peak_second_half": peaks[1], "peak_growth": _ratio(peaks[1], peaks[0])}
        return out

    def extra_info(self) -> dict[str, Any]:
        after = self.post_warmup() or self.samples
        c = self.counts
        acked = c["share_accept"] + c["share_release"] + c["share_reject"]
        info: dict[str, Any] = {
            "soak_s": self.seconds, "target_records_per_s": self.rate, "record_bytes": RECORD_BYTES,
            "sample_interval_s": self.timings.sample_s, "churn_interval_s": self.timings.churn_s,
            "maintenance_interval_ms": self.timings.maintenance_ms, "retention_ms": self.timings.retention_ms,
            "warmup_s": round(self.timings.warmup_s, 1), "warmup_sample_t_s": after[0][0],
            "end_sample_t_s": after[-1][0], "samples_columns": list(COLUMNS), "samples": self.samples,
            "growth": self.growth(), "after_load": dict(zip(COLUMNS, self.after_load)), "restart": self.restarts,
            "produced_per_s": round(c["produced"] / self.load_s, 1),
            "share_acknowledged_per_s": round(acked / self.load_s, 1),
            "group_consumed_per_s": round(sum(c[f"group_{p}_consumed"] for p in PROTOCOLS) / self.load_s, 1),
            "group_commits_per_s": round(sum(c[f"group_{p}_commits"] for p in PROTOCOLS) / self.load_s, 2),
            "counts": dict(sorted(c.items())), "errors": self.errors,
        }
        return info


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _sample(serve: Serve, data: pathlib.Path, t_s: float) -> list[float]:
    return [round(t_s, 2), *(dir_bytes(data / name) for name in DIRS), serve.rss_kb(), serve.fds()]


def _start_on_copy(serve: Serve, data: pathlib.Path, scratch: pathlib.Path, name: str,
                   args: tuple[str, ...]) -> dict[str, float]:
    """Pause serve, copy its data directory, resume it; start a second serve on the copy, wait for its
    readiness, stop it, delete the copy. The pause, the copy's bytes and the start time."""
    copy = scratch / f"copy-{name}"
    paused = time.perf_counter()
    os.kill(serve.proc.pid, signal.SIGSTOP)
    try:
        shutil.copytree(data, copy, symlinks=True)  # the paused process writes nothing meanwhile
    finally:
        os.kill(serve.proc.pid, signal.SIGCONT)
    pause_s = time.perf_counter() - paused
    try:
        second = Serve(copy, args, scratch / f"serve-{name}.log")
        try:
            rss_kb = second.rss_kb()
        finally:
            second.stop()
        return {"ready_s": round(second.ready_s, 3), "pause_s": round(pause_s, 3), "bytes": dir_bytes(copy),
                "rss_kb_at_ready": rss_kb}
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def run_soak(seconds: int, rate: int = DEFAULT_RATE) -> SoakResult:
    """The whole soak (see the module's docstring); serve and its copies are always stopped."""
    timings = Timings(seconds)
    result = SoakResult(seconds, rate, timings)
    args = timings.serve_args()
    with tempfile.TemporaryDirectory(prefix="sharegroup-soak-") as tmp:
        scratch = pathlib.Path(tmp)
        data = scratch / "data"
        serve = Serve(data, args, scratch / "serve.log")
        result.restarts["first_start_s"] = round(serve.ready_s, 3)
        load: Load | None = None
        try:
            load = Load(serve.bootstrap, rate, timings)
            started = time.monotonic()
            load.start()
            middle_done = False
            while (now := time.monotonic() - started) < seconds and not load.failed.is_set():
                result.samples.append(_sample(serve, data, now))
                if not middle_done and now >= seconds / 2:
                    result.restarts["middle_copy"] = _start_on_copy(serve, data, scratch, "middle", args)
                    middle_done = True
                load.failed.wait(max(0.0, min(now + timings.sample_s, seconds) - (time.monotonic() - started)))
            result.samples.append(_sample(serve, data, time.monotonic() - started))
            result.restarts["end_copy"] = _start_on_copy(serve, data, scratch, "end", args)
            result.load_s = time.monotonic() - started
            stuck = load.finish()
            if stuck:
                load.note(f"client threads still running {JOIN_TIMEOUT_S} s after the stop: {stuck}")
            result.after_load = _sample(serve, data, time.monotonic() - started)
        finally:
            if load is not None:
                load.finish()  # at once when the load has finished already
                result.counts, result.errors = load.counts, load.errors
            result.restarts["stop_s"] = [round(serve.stop(), 3)]
            result.restarts["exit_codes"] = [serve.proc.returncode]
        restarts = []
        for _ in range(2):
            again = Serve(data, args, scratch / "serve.log")
            try:
                restarts.append(round(again.ready_s, 3))
                result.restarts.setdefault("rss_kb_at_ready", []).append(again.rss_kb())
            finally:
                result.restarts["stop_s"].append(round(again.stop(), 3))
                result.restarts["exit_codes"].append(again.proc.returncode)
        result.restarts["restart_s"] = restarts
        result.restarts["bytes_at_end"] = {name: dir_bytes(data / name) for name in DIRS}
    return result


def table(result: SoakResult) -> str:
    """The sizes, RSS and fds at the warm-up and at the end, the restart times and the throughput."""
    info = result.extra_info()
    g, r = info["growth"], info["restart"]
    out = [f"soak: {result.seconds} s of load, {os.cpu_count()} CPUs, load average "
           + " ".join(f"{x:.2f}" for x in os.getloadavg()),
           f"{'measure':<18} {'t=' + format(info['warmup_sample_t_s'], '.0f') + ' s':>14} "
           f"{'t=' + format(info['end_sample_t_s'], '.0f') + ' s':>14} {'ratio':>7}   {'peaks, 1st half':>15}"
           f" {'2nd half':>14} {'ratio':>7}"]
    for name in COLUMNS[1:]:
        x = g[name]
        ratios = [f"{x[key]:.2f}x" if x[key] is not None else "-" for key in ("growth", "peak_growth")]
        out.append(f"{name:<18} {x['first']:>14,.0f} {x['last']:>14,.0f} {ratios[0]:>7}   "
                   f"{x['peak_first_half']:>15,.0f} {x['peak_second_half']:>14,.0f} {ratios[1]:>7}")
    out.append(f"start on the empty directory {r['first_start_s']:.2f} s; on a copy at the middle "
               f"{r['middle_copy']['ready_s']:.2f} s and at the end {r['end_copy']['ready_s']:.2f} s "
               f"(serve paused {r['middle_copy']['pause_s']:.2f} / {r['end_copy']['pause_s']:.2f} s for the copy); "
               "restart after SIGTERM " + ", ".join(f"{s:.2f}" for s in r["restart_s"]) + " s")
    out.append(f"produced {info['produced_per_s']:,.0f} records/s (target {result.rate:,}); share-acknowledged "
               f"{info['share_acknowledged_per_s']:,.0f}/s; consumer groups read {info['group_consumed_per_s']:,.0f}/s "
               f"with {info['group_commits_per_s']:.1f} commits/s; {result.counts['churn_rounds']} churn rounds")
    return "\n".join(out)


# -- pytest-benchmark ----------------------------------------------------------------------------------


@pytest.mark.benchmark(group="soak: serve under steady load")
def test_soak_serve_state_stays_bounded(request, benchmark, capsys):
    """One soak (one round; its timing is the whole soak, restarts included); the sample series, the growth
    after the warm-up, the restart times and the throughput go to `benchmark.extra_info`. It asserts that
    every client did its work and serve always exited cleanly, not that sizes are flat: the numbers are for
    the README's table and for reading."""
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):
        pytest.skip(f"confluent-kafka {ck.version()[0]} has no ShareConsumer (needs >= 2.16)")
    config = request.config
    disabled = config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)
    seconds = soak_seconds(disabled)
    rate = int(os.environ.get("SHAREGROUP_SOAK_RATE", DEFAULT_RATE))
    result = benchmark.pedantic(run_soak, args=(seconds, rate), rounds=1, iterations=1)
    benchmark.extra_info.update(result.extra_info())
    assert not result.errors, "\n".join(result.errors)
    with capsys.disabled():
        print("\n" + table(result))
    c = result.counts
    assert c["produced"] > 0 and c["produce_errors"] == 0, dict(c)
    assert all(c[f"share_{kind}"] > 0 for kind in ("accept", "release", "reject")), dict(c)
    assert c["group_classic_commits"] > 0 and c["group_consumer_commits"] > 0, dict(c)
    assert c["churn_rounds"] >= 1 and c["churn_share_records"] > 0, dict(c)
    assert result.restarts["exit_codes"] == [0, 0, 0], result.restarts
    assert len(result.post_warmup()) >= 2
