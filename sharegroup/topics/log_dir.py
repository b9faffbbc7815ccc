"""`LogDir`: whether the topic store's log directory is online, as Kafka's log-dir failure handling keeps it.

Kafka takes a whole log directory offline at the first I/O error in it (`LogDirFailureChannel`): it logs
an ERROR naming the directory, stops every log in it, and its partitions answer KAFKA_STORAGE_ERROR
until the broker restarts and recovery runs. The topic store has one log directory (`DIR/topics`), so
the first write or fsync error anywhere in it (a segment, a `log-start-offset`, `topics.json`,
`producer-ids`), or a read error, takes the whole store offline: every later append, transaction
marker, DeleteRecords, topic change and producer-id block is refused with KAFKA_STORAGE_ERROR (56)
until the broker is restarted. Reads of what was published before the fault go on (unlike Kafka, which
has other replicas to serve them: a single node keeps its acknowledged data readable).

Every fault is logged at ERROR with the file and the error (errno name and text), the first with the
note that the directory is offline.
"""

from __future__ import annotations

import errno
import logging
import os

from sharegroup.errors import Errors, ShareError

__all__ = ["LogDir", "describe_error"]

_logger = logging.getLogger("sharegroup.topics")


def describe_error(exc: BaseException) -> str:
    """An I/O error as an operator reads it: `ENOSPC (No space left on device)`; other errors as repr."""
    if not isinstance(exc, OSError) or not exc.errno:
        return repr(exc)
    name = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
    return f"{name} ({exc.strerror or os.strerror(exc.errno)})"


class LogDir:
    """The online/offline state of one log directory, shared by the store and every partition log in it."""

    __slots__ = ("path", "failure", "faults")

    def __init__(self, path: str) -> None:
        self.path = path
        self.failure: str | None = None  # the first fault, once the directory is offline
        self.faults = 0  # storage faults seen (metrics)

    @property
    def offline(self) -> bool:
        return self.failure is not None

    def check_writable(self) -> None:
        """Raise ShareError(KAFKA_STORAGE_ERROR) when the directory is offline."""
        if self.failure is not None:
            raise self.offline_error()

    def offline_error(self) -> ShareError:
        """The KAFKA_STORAGE_ERROR a write to the offline directory is refused with."""
        return ShareError(Errors.KAFKA_STORAGE_ERROR,
                          f"the log dir {self.path} is offline after a storage error ({self.failure}); "
                          "it refuses writes until the broker restarts")

    def fault(self, path: str | None, operation: str, exc: BaseException) -> ShareError:
        """Record a storage fault on `path` (`operation`: what failed, e.g. "write" or "fsync"): log it at
        ERROR, take the directory offline, and return the ShareError(KAFKA_STORAGE_ERROR) to raise."""
        if isinstance(exc, OSError) and exc.filename is not None:  # the very file (a temporary one, say)
            path = os.fsdecode(exc.filename)
        where = path or self.path
        text = describe_error(exc)
        self.faults += 1
        if self.failure is None:
            self.failure = f"{operation} of {where} failed: {text}"
            _logger.error("%s of %s failed: %s; the log dir %s is offline: it refuses writes "
                          "(KAFKA_STORAGE_ERROR) until the broker restarts", operation, where, text, self.path)
        else:
            _logger.error("%s of %s failed: %s (the log dir %s is already offline)", operation, where, text, self.path)
        return ShareError(Errors.KAFKA_STORAGE_ERROR, f"{operation} of {where} failed: {text}")
