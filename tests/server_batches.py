"""Helpers for the topic-store tests: record batches as a producer sends them, and a counting fsync."""

from __future__ import annotations

import errno
import os
import threading

from sharegroup.topics.record_batch import SimpleRecord, build_record_batch


def produce_batch(n: int = 3, *, timestamp_ms: int = 1_000, producer_id: int = -1, producer_epoch: int = -1,
                  base_sequence: int = -1, transactional: bool = False, value_bytes: int = 10,
                  tag: bytes = b"") -> bytes:
    """A RecordBatch v2 of `n` records as librdkafka sends it (base offset 0, PLE 0)."""
    records = [SimpleRecord(b"key-%d" % i, tag + bytes([65 + i % 26]) * value_bytes, [("h", b"%d" % i)])
               for i in range(n)]
    return build_record_batch(records, base_timestamp_ms=timestamp_ms, producer_id=producer_id,
                              producer_epoch=producer_epoch, base_sequence=base_sequence,
                              is_transactional=transactional)


def stored_form(data: bytes, base_offset: int) -> bytes:
    """What the log stores for a produced batch: the same bytes with base offset and PLE 0 rewritten."""
    return base_offset.to_bytes(8, "big", signed=True) + data[8:12] + (0).to_bytes(4, "big") + data[16:]


class CountingFsync:
    """An fsync that counts its calls, can be made to fail (every call while `fail` is set, or the next
    `fail_next` calls, with OSError(`errno`)), or to block until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self.fail_next = 0
        self.errno = errno.EIO
        self.failures = 0
        self.gate: threading.Event | None = None

    def __call__(self, fd: int) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail or self.fail_next:
            self.fail_next = max(0, self.fail_next - 1)
            self.failures += 1
            raise OSError(self.errno, os.strerror(self.errno))
        self.calls += 1
        os.fsync(fd)
