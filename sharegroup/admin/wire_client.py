"""A small blocking Kafka wire client over kio, for the operator's tools (`share-groups`, `configs`).

It speaks to any broker (ours or Kafka 4.x): it asks ApiVersions first and sends each API at the
highest version both sides know (`WANTED` gives ours), finds a group's coordinator with
FindCoordinator (key type GROUP, as Kafka's admin client does for share groups) and a partition's
leader with Metadata, and keeps one connection per node. Every socket operation has a timeout.
With a `ClientSecurity` (the tools' `--command-config`) each connection speaks TLS and/or logs in
with SASL right after ApiVersions, as Kafka's clients do.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from ..server.codec import build
from .client_security import ClientSecurity, LoginFailed

__all__ = ["AdminError", "Connection", "WireAdmin", "WANTED"]

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
# api key -> (lowest version we can use, highest version we send)
WANTED = {
    2: (1, 7),      # ListOffsets
    3: (1, 12),     # Metadata
    10: (4, 6),     # FindCoordinator (coordinator_keys)
    16: (4, 5),     # ListGroups (states filter; types filter from v5)
    32: (1, 4),     # DescribeConfigs
    42: (0, 2),     # DeleteGroups
    44: (0, 1),     # IncrementalAlterConfigs
    50: (0, 0),     # DescribeUserScramCredentials
    51: (0, 0),     # AlterUserScramCredentials
    77: (1, 1),     # ShareGroupDescribe
    90: (0, 1),     # DescribeShareGroupOffsets
    91: (0, 0),     # AlterShareGroupOffsets
    92: (0, 0),     # DeleteShareGroupOffsets
}
GROUP_KEY = 0
CLIENT_ID = "sharegroup-admin"


class AdminError(Exception):
    """A failure the tool reports as an error line (connection, unsupported API, bad answer)."""


class Connection:
    """One blocking connection to one broker."""

    def __init__(self, host: str, port: int, timeout_s: float, security: ClientSecurity | None = None) -> None:
        security = security if security is not None else ClientSecurity()
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise AdminError(f"cannot connect to {host}:{port}: {exc}") from None
        self.address = f"{host}:{port}"
        if security.context is not None:
            try:
                self.sock = security.context.wrap_socket(self.sock, server_hostname=host)
            except (OSError, ssl.SSLError) as exc:
                self.sock.close()
                raise AdminError(f"{self.address}: TLS handshake failed ({security.protocol}): {exc}") from None
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            self.versions = self._api_versions()
            security.login(lambda key, version, fields: self._exchange(
                key, version, build(load_request_schema(key, version), fields)))
        except LoginFailed as exc:
            self.sock.close()
            raise AdminError(str(exc)) from None
        except AdminError:
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        body = load_request_schema(API_VERSIONS, 0)()
        response = self._exchange(API_VERSIONS, 0, body)
        if int(response.error_code) != 0:
            raise AdminError(f"{self.address}: ApiVersions failed with error {int(response.error_code)}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    def version_for(self, api_key: int) -> int:
        lowest, highest = WANTED[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None or theirs[1] < lowest or theirs[0] > highest:
            raise AdminError(f"the broker at {self.address} does not support API key {api_key} "
                             f"at versions {lowest}-{highest}")
        return min(highest, theirs[1])

    def send(self, api_key: int, data: dict[str, Any]) -> tuple[int, Any]:
        """Send `data` (plain dict, see `codec.build`) at the negotiated version; (version, response)."""
        version = self.version_for(api_key)
        body = build(load_request_schema(api_key, version), data)
        return version, self._exchange(api_key, version, body)

    def _exchange(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation_id += 1
        cls = type(body)
        header_cls = RequestHeaderV2 if cls.__header_schema__ is RequestHeaderV2 else RequestHeaderV1
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                                  correlation_id=self.correlation_id, client_id=CLIENT_ID))
        entity_writer(cls)(buf, body)
        payload = buf.getvalue()
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._read(4))[0]
            frame = self._read(size)
        except ssl.SSLError as exc:  # a TLS alert (TLS 1.3 sends the refusal of a certificate after the handshake)
            raise (self._closed() if not self.versions else AdminError(f"{self.address}: {exc}")) from None
        except OSError as exc:
            raise AdminError(f"{self.address}: {exc}") from None
        response_cls = load_response_schema(api_key, version)
        header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        if header.correlation_id != self.correlation_id:
            raise AdminError(f"{self.address}: answer to request {header.correlation_id}, "
                             f"expected {self.correlation_id}")
        response, _ = entity_reader(response_cls)(frame, offset)
        return response

    def _closed(self) -> AdminError:
        hint = ""
        if isinstance(self.sock, ssl.SSLSocket) and not self.versions:
            # TLS 1.3 finishes the client's side of the handshake before the broker checks its certificate.
            hint = (" right after the TLS handshake (a listener that requires a client certificate "
                    "refuses one without; see ssl.keystore.location in --command-config)")
        return AdminError(f"{self.address}: the broker closed the connection{hint}")

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise self._closed()
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"bad --bootstrap-server entry {item!r} (expected HOST:PORT)")
        out.append((host.strip("[]"), int(port)))
    return out


class WireAdmin:
    """Connections to the cluster behind `bootstrap` ("HOST:PORT,..."), by node."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.timeout_s = timeout_s
        self.security = security
        self._nodes: dict[tuple[str, int], Connection] = {}
        errors = []
        self.bootstrap: Connection | None = None
        for host, port in parse_bootstrap(bootstrap):
            try:
                self.bootstrap = self._connect(host, port)
                break
            except AdminError as exc:
                errors.append(str(exc))
        if self.bootstrap is None:
            raise AdminError("; ".join(errors))

    def _connect(self, host: str, port: int) -> Connection:
        key = (host, port)
        if key not in self._nodes:
            self._nodes[key] = Connection(host, port, self.timeout_s, self.security)
        return self._nodes[key]

    def close(self) -> None:
        for connection in self._nodes.values():
            connection.close()
        self._nodes.clear()

    def __enter__(self) -> "WireAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routing -----------------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None) -> Any:
        """Metadata of these topics (None: all), from the bootstrap broker."""
        assert self.bootstrap is not None
        _v, response = self.bootstrap.send(METADATA, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return response

    def coordinator(self, group_id: str) -> tuple[Connection, str, int]:
        """The connection to the group's coordinator, with its "host:port" and node id."""
        assert self.bootstrap is not None
        _v, response = self.bootstrap.send(FIND_COORDINATOR, {"key_type": GROUP_KEY, "coordinator_keys": [group_id]})
        (found,) = response.coordinators
        if int(found.error_code) != 0:
            raise AdminError(f"FindCoordinator for group {group_id!r} failed with error {int(found.error_code)}"
                             + (f": {found.error_message}" if found.error_message else ""))
        return self._connect(found.host, int(found.port)), f"{found.host}:{int(found.port)}", int(found.node_id)

    def node(self, node_id: int, metadata: Any) -> Connection:
        for broker in metadata.brokers:
            if int(broker.node_id) == node_id:
                return self._connect(broker.host, int(broker.port))
        raise AdminError(f"no broker {node_id} in the cluster metadata")
