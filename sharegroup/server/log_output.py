"""Where `sharegroup serve` writes its log: stderr, through a bounded queue and a writer thread.

A write to stderr blocks while nobody reads it (a pipe whose 64 KiB buffer is full: a supervisor or a test
harness that reads it only at the end). Written from the event loop, that write would stall every
connection; clients would then see only timeouts and transport failures. So a log record is only put on a
queue (never waiting) and one daemon thread writes the queue to stderr. When the queue is full
(`MAX_QUEUED_RECORDS`) the record is dropped and counted, and once the writer gets through again it
reports how many were dropped. At exit the writer is given `STOP_WAIT_S` to write what is queued.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import threading
from typing import TextIO

__all__ = ["LogOutput", "MAX_QUEUED_RECORDS", "STOP_WAIT_S"]

MAX_QUEUED_RECORDS = 10_000
STOP_WAIT_S = 2.0
_STOP = None  # the queue's end marker


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """The standard queue handler (records formatted when logged), except that a full queue drops the
    record and counts it instead of raising."""

    def __init__(self, records: "queue.Queue[logging.LogRecord | None]") -> None:
        super().__init__(records)
        self.dropped = 0  # changed only under the handler's lock; read by the writer thread

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class LogOutput:
    """The root logger's output for one run of serve: `start` installs it, `stop` writes what is queued
    (for at most `STOP_WAIT_S`) and removes it."""

    def __init__(self, stream: TextIO, level: int, fmt: str, max_queued: int = MAX_QUEUED_RECORDS) -> None:
        self.records: queue.Queue[logging.LogRecord | None] = queue.Queue(maxsize=max_queued)
        self.handler = _DroppingQueueHandler(self.records)
        self.writer = logging.StreamHandler(stream)
        self.writer.setFormatter(logging.Formatter(fmt))
        self.level = level
        self._reported_dropped = 0
        self._stopped = False
        self._previous_level = logging.NOTSET
        self._thread = threading.Thread(target=self._write, name="sharegroup log writer", daemon=True)

    def start(self) -> "LogOutput":
        root = logging.getLogger()
        self._previous_level = root.level
        root.addHandler(self.handler)
        root.setLevel(self.level)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self._previous_level)
        try:
            self.records.put(_STOP, timeout=STOP_WAIT_S)
        except queue.Full:
            return  # the writer is stuck on stderr: what is queued is lost with the process
        self._thread.join(STOP_WAIT_S)

    def _write(self) -> None:
        while True:
            record = self.records.get()
            dropped = self.handler.dropped
            if dropped > self._reported_dropped:
                self.writer.handle(logging.makeLogRecord({
                    "name": "sharegroup.server", "levelno": logging.WARNING, "levelname": "WARNING",
                    "msg": f"{dropped - self._reported_dropped} log records dropped: stderr was not read"}))
                self._reported_dropped = dropped
            if record is _STOP:
                return
            self.writer.handle(record)
