"""Helpers for the `sharegroup serve` tests: an in-process broker on a background loop, the real CLI as a
subprocess, and a raw kio client for what real clients never send."""

from __future__ import annotations

import asyncio
import io
import os
import pathlib
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer

ROOT = pathlib.Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 20.0
IO_TIMEOUT_S = 10.0


def batch_bytes(count: int = 1, key: bytes | None = b"k", value: bytes = b"v", producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A valid uncompressed RecordBatch v2 of `count` records at base offset 0 (kio's record codec)."""
    import datetime as _dt

    from kio.records.schema import NewRecordBatch, Record, RecordHeader
    from kio.records.writers import write_new_batch

    now = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
    records = tuple(
        Record(attributes=0, timestamp=now, offset=i, key=key, value=value + b"%d" % i,
               headers=(RecordHeader(key=b"h", value=b"%d" % i),))
        for i in range(count)
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, records=records, attributes=0))
    return buf.getvalue()


def stored_batches(store: Any, topic_id: uuid.UUID, partition: int) -> list[bytes]:
    """Every record batch a partition holds, as stored, read through the store's PartitionLogs side."""
    out: list[bytes] = []
    offset, end = 0, store.log_end_offset(topic_id, partition)
    while offset < end:
        result = store.read(topic_id, partition, offset, 1 << 20)
        out.extend(bytes(b.records) for b in result.batches)
        offset = result.batches[-1].last_offset + 1
    return out


# -- an in-process broker on its own event loop thread ----------------------------------------------


async def _open_store(data_dir: pathlib.Path, config: Any, clock: Any = None) -> Any:
    """The durable topic store of `sharegroup serve` in `data_dir`."""
    from sharegroup.server.serve import open_store

    return await open_store(data_dir, config, clock=clock)


class BrokerThread:
    """Runs a `Broker` on a private event loop in a daemon thread (for blocking clients in the test)."""

    def __init__(self, data_dir: pathlib.Path, store: Any = None, overrides: dict[str, Any] | None = None,
                 host: str = "127.0.0.1", share: bool = False, group_configs: dict[str, Any] | None = None,
                 clock: Any = None, transactions: bool = False) -> None:
        from sharegroup.server.broker import Broker
        from sharegroup.server.broker_config import ServeConfig

        self.config = ServeConfig.build(overrides or {}, (), (group_configs or {}).items())
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        if store is None:  # clock: the store's and the share state's (None: the system clock)
            store = self.call(_open_store(data_dir, self.config, clock))
        self.store = store
        self.share = None
        if share:  # the share-group services of `sharegroup serve` (persister, coordinator, manager)
            from sharegroup.server.serve import open_share_services

            self.share = self.call(open_share_services(data_dir, self.config, store, clock=clock))
        self.transactions = None
        if transactions:  # the transaction coordinator (over the share services' group coordinator, if any)
            from sharegroup.server.serve import open_transaction_services

            self.transactions = self.call(open_transaction_services(data_dir, self.config, store, self.share,
                                                                    clock=clock))
        self.broker = Broker(self.config, self.store, host=host, port=0, node_id=1, data_dir=data_dir,
                             share=self.share, transactions=self.transactions)
        if self.share is not None:
            self.call(self.share.start())
        if self.transactions is not None:
            self.call(self.transactions.start())
        self.call(self.broker.start())

    def call(self, coro, timeout: float = IO_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    def connection_ids(self) -> frozenset[str]:
        """The ids of the connections the broker serves (read on its loop)."""
        async def read() -> frozenset[str]:
            return self.broker.connection_ids

        return self.call(read())

    def connection_id_of(self, client_port: int) -> str:
        """The id of the served connection whose client is at 127.0.0.1:`client_port`."""
        (found,) = [i for i in self.connection_ids() if f"-127.0.0.1:{client_port}-" in i]
        return found

    def wait_until_closed(self, connection_id: str) -> None:
        """Until the broker has finished closing this connection (its share sessions dealt with); bounded."""
        deadline = time.monotonic() + IO_TIMEOUT_S
        while connection_id in self.connection_ids():
            assert time.monotonic() < deadline, f"the broker did not finish closing {connection_id}"
            time.sleep(0.01)

    def stop(self) -> None:
        try:
            self.call(self.broker.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(IO_TIMEOUT_S)
            self.loop.close()


# -- the real CLI as a subprocess ---------------------------------------------------------------------


class ServeProcess:
    """`python -m sharegroup serve --port 0 --data DIR ...`; waits (bounded) for the readiness line."""

    def __init__(self, data_dir: pathlib.Path, *extra: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.args = [sys.executable, "-m", "sharegroup", "serve", "--port", "0", "--data", str(data_dir), *extra]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.started_at = time.monotonic()
        self.line = self._read_ready_line()
        self.ready_after_s = time.monotonic() - self.started_at
        host_port = self.line.split(" listening on ", 1)[1].split(" ", 1)[0]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)

    def _read_ready_line(self) -> str:
        """The readiness line; the listener lines before it (with `listeners` set) go to `listener_lines`."""
        result: list[str] = []
        self.listener_lines: list[str] = []

        def read() -> None:
            line = self.proc.stdout.readline()
            while line.startswith("sharegroup serve: listener "):
                self.listener_lines.append(line.rstrip("\n"))
                line = self.proc.stdout.readline()
            result.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(READY_TIMEOUT_S)
        if not result or not result[0]:
            self.kill()
            raise AssertionError(f"no readiness line; stderr: {self.proc.stderr.read()[-2000:]}")
        return result[0].rstrip("\n")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def terminate(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=IO_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate(timeout=IO_TIMEOUT_S)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=IO_TIMEOUT_S)


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "sharegroup", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


# -- a raw kio client ----------------------------------------------------------------------------------


class RawClient:
    """A blocking socket speaking kio-encoded requests; for frames real clients never send."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=IO_TIMEOUT_S)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, api_key: int, version: int, body: Any, correlation_id: int | None = None,
              header_version: int | None = None) -> bytes:
        self.correlation_id += 1
        cid = self.correlation_id if correlation_id is None else correlation_id
        cls = load_request_schema(api_key, version) if body is not None else None
        flexible = (cls.__header_schema__ is RequestHeaderV2) if cls is not None else (header_version == 2)
        if header_version is not None:
            flexible = header_version == 2
        header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                                  correlation_id=cid, client_id="raw-test"))
        if body is not None:
            entity_writer(type(body))(buf, body)
        payload = buf.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send_raw(self.frame(api_key, version, body))
        return self.read_response(api_key, version)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        cls = load_response_schema(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        assert header.correlation_id == self.correlation_id, (header.correlation_id, self.correlation_id)
        body, _ = entity_reader(cls)(frame, offset)
        return body

    def read_v0_response(self, api_key: int) -> tuple[int, Any]:
        frame = self.read_frame()
        header, offset = entity_reader(ResponseHeaderV0)(frame, 0)
        body, _ = entity_reader(load_response_schema(api_key, 0))(frame, offset)
        return header.correlation_id, body

    def is_closed_by_peer(self) -> bool:
        """True when the broker closed this connection (EOF), within the I/O timeout."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
