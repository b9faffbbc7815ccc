"""serve's log output never makes the event loop wait for stderr (`sharegroup/server/log_output.py`)."""

from __future__ import annotations

import logging
import re
import struct
import threading

from sharegroup.server.log_output import LogOutput
from tests.server_harness import IO_TIMEOUT_S, RawClient, ServeProcess

GARBAGE_CONNECTIONS = 1000  # each logs a ~110-byte WARNING: well over what a 64 KiB pipe holds


class _BlockedStream:
    """A stream whose writes wait until `release` (stderr that nobody reads)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.text: list[str] = []

    def write(self, text: str) -> int:
        assert self.released.wait(IO_TIMEOUT_S), "the stream was never released"
        self.text.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_logging_never_waits_for_a_blocked_stream_and_reports_what_it_dropped():
    """Rule: a record is queued without waiting; past the queue's bound it is dropped and counted, and the
    writer reports the count once the stream takes writes again."""
    stream = _BlockedStream()
    output = LogOutput(stream, logging.WARNING, "%(levelname)s %(name)s: %(message)s", max_queued=5).start()
    log = logging.getLogger("sharegroup.test_log_output")
    done = threading.Event()

    def log_many() -> None:
        for i in range(50):
            log.warning("record %d", i)
        done.set()

    thread = threading.Thread(target=log_many)
    thread.start()
    assert done.wait(IO_TIMEOUT_S), "logging waited for the blocked stream"
    stream.released.set()
    output.stop()
    thread.join(IO_TIMEOUT_S)
    text = "".join(stream.text)
    assert "WARNING sharegroup.test_log_output: record 0" in text
    assert "log records dropped: stderr was not read" in text
    written = text.count("sharegroup.test_log_output: record")
    dropped = sum(int(n) for n in re.findall(r"(\d+) log records dropped", text))  # reported once or more
    assert written + dropped == 50 and dropped > 0
    assert logging.getLogger().handlers.count(output.handler) == 0  # stop removed it


def test_a_broker_whose_stderr_nobody_reads_keeps_serving_through_a_flood_of_logged_closes(tmp_path):
    """Rule: what clients make the broker log (here: a WARNING per connection closed for a bad frame) cannot
    stall it, even when its stderr is a pipe nobody reads (as this harness runs it): after a flood that
    fills the pipe many times over, another client is still answered."""
    server = ServeProcess(tmp_path / "data")
    try:
        for _ in range(GARBAGE_CONNECTIONS):
            offender = RawClient(server.port)
            try:
                offender.send_raw(struct.pack(">i", 8) + b"\xff" * 8)  # API key -1: not a request
                assert offender.is_closed_by_peer()
            finally:
                offender.close()
        client = RawClient(server.port)
        try:
            client.send_raw(client.frame(18, 127, None, header_version=2))  # ApiVersions of an unknown version
            _cid, body = client.read_v0_response(18)
            assert body.error_code == 35  # UNSUPPORTED_VERSION: the broker answered
        finally:
            client.close()
    finally:
        server.kill()
