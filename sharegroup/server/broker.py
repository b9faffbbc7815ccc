"""The broker process's wiring: one node that is controller, coordinator and leader of every partition.

`Broker` owns the listening socket, the handler registry, the topic store and the connections. It is
started and stopped by `sharegroup serve` (see `serve.py`) or in-process by tests:

    broker = Broker(config, store, host="127.0.0.1", port=0, node_id=1, data_dir=path,
                    share=share_services)   # optional: see share_services.py
    await broker.start(); ...; await broker.close()

Listeners: without security settings, one PLAINTEXT listener on `host:port`; with `listeners` (and TLS /
SASL settings, see `security/`) one server socket per listener, each connection knowing its listener.
`broker.host`/`broker.port` are the first listener's bound address. Each listener has an `Acceptor`
(acceptor.py) that applies Kafka's connection quotas (`max.connections`, `max.connections.per.ip`; see
connection_quotas.py) and socket buffer sizes; each connection bounds its requests in flight
(connection.py).

`broker.close()` closes the share services before the store. With share services, a closed connection
closes the share sessions it opened and a retention pass pushes moved log starts into them. Without them
(`share=None`, an embedding that serves topics only) the group APIs answer COORDINATOR_NOT_AVAILABLE.
Without `transactions` (see transactions.py) the transactional APIs answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from .acceptor import Acceptor
from .api import ApiHandler, HandlerRegistry
from .authorization import Authorizer
from .broker_config import ServeConfig
from .connection import Connection
from .connection_quotas import ConnectionQuotas
from .handlers import all_handlers
from .security.authorizer import authorizer_for
from .security.broker_security import BrokerSecurity
from .security.listeners import Listener
from .security.ssl_principal import NoMatchingRule
from .share_services import ShareServices
from .topic_admin import TopicAdmin
from .transactions import TransactionServices
from .turns import PipelineTurns
from ..topics.topic_store import TopicStore
from .wire_metrics import WireMetrics, wire_metrics_for

__all__ = ["Broker", "load_cluster_id"]

log = logging.getLogger("sharegroup.server")


def load_cluster_id(data_dir: Path) -> str:
    """The cluster id kept in `DIR/meta.properties` (Kafka's file name and key), created on first start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "meta.properties"
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id" and value.strip():
                return value.strip()
    cluster_id = _kafka_uuid_text(uuid.uuid4())
    tmp = data_dir / "meta.properties.tmp"
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\n")
    tmp.replace(path)
    return cluster_id


def _kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka prints a Uuid as 22 characters of URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


class Broker:
    """A one-node Kafka-protocol broker over a topic store; handlers reach everything through it (as
    the `api.BrokerView` it implements)."""

    def __init__(
        self,
        config: ServeConfig,
        store: TopicStore,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        node_id: int = 1,
        data_dir: Path | str = ".",
        handlers: Iterable[ApiHandler] | None = None,
        share: ShareServices | None = None,
        metrics: WireMetrics | None = None,
        authorizer: Authorizer | None = None,
        security: BrokerSecurity | None = None,
        quotas: ConnectionQuotas | None = None,
        transactions: TransactionServices | None = None,
    ) -> None:
        if handlers is None:
            handlers = all_handlers()
        self.config = config
        self.store = store
        self.host = host
        self.port = port
        self.node_id = node_id
        self.data_dir = Path(data_dir)
        self.registry = HandlerRegistry(handlers)
        self.topics = TopicAdmin(store, config)
        self.share = share  # persister, group coordinator and manager (None: no share or consumer groups)
        self.transactions = transactions  # the transaction coordinator (None: transactional APIs unavailable)
        self.cluster_id = load_cluster_id(self.data_dir)
        self.request_counts: Counter[str] = Counter()
        self.metrics = metrics if metrics is not None else wire_metrics_for()
        # Without `authorizer.class.name`: AllowEveryone. With it: the ACLs of DIR/security (AclFileError,
        # a ValueError, when that file is bad: the broker must not start without its ACLs).
        self.authorizer: Authorizer = authorizer if authorizer is not None else authorizer_for(config, self.data_dir)
        # Listeners, TLS contexts, SASL settings and SCRAM credentials (ValueError on a wrong setting).
        if security is None:
            security = BrokerSecurity.from_config(config, self.data_dir, host, port)
        self.security = security
        # max.connections (broker-wide and per listener), max.connections.per.ip and its overrides (ValueError
        # when an override's host does not resolve).
        if quotas is None:
            quotas = ConnectionQuotas.from_config(config, (listener.name for listener in security.listeners))
        self.quotas = quotas
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> bound (host, port)
        self._acceptors: list[Acceptor] = []
        # The connections being served; a closed one stays until its share sessions are closed.
        self.connections: set[Connection] = set()
        self.turns = PipelineTurns()  # pipelined requests of all connections start one per pass of the loop
        self._closing = False
        self._retention_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bind every listener and start accepting; with port 0 the bound port is stored in `self.bound`
        (and, for the first listener, in `self.host`/`self.port`)."""
        config = self.config
        for listener in self.security.listeners:
            context = self.security.contexts.get(listener.name)
            acceptor = Acceptor(listener, self.quotas, self.metrics, self._serve_connection, tls=context,
                                handshake_timeout_s=self.security.handshake_timeout_s,
                                send_buffer_bytes=config["socket.send.buffer.bytes"],
                                receive_buffer_bytes=config["socket.receive.buffer.bytes"],
                                backlog=config["socket.listen.backlog.size"])
            self._acceptors.append(acceptor)
            self.bound[listener.name] = await acceptor.start()
        self.host, self.port = self.bound[self.security.listeners[0].name]
        self._retention_task = asyncio.create_task(self._enforce_retention(), name="log retention")

    async def _enforce_retention(self) -> None:
        """Every `log.retention.check.interval.ms`, let the store drop what `log.retention.*` allows."""
        interval_s = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                moved = await self.store.enforce_retention()
            except Exception:  # a failing check must not stop later ones (logged, retried next interval)
                log.exception("log retention check failed")
                continue
            share = self.share
            for topic_id, partition, start in moved:
                log.info("retention moved the log start of %s-%d to %d", topic_id, partition, start)
                if share is not None:
                    share.log_start_moved(topic_id, partition)

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]:
        """(host, port) Metadata and FindCoordinator answer on `listener`: `advertised.listeners`, else the
        bound address; a wildcard host becomes the address the client connected to."""
        bound_host, bound_port = self.bound.get(listener, (self.host, self.port))
        host, port = self.security.advertised.get(listener, (bound_host, bound_port))
        if port == 0:
            port = bound_port
        return (local_host if host in ("", "0.0.0.0", "::") else host), port

    async def _serve_connection(self, listener: Listener, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.close()
            return
        try:
            connection = Connection(self, reader, writer, listener, self.turns)
        except NoMatchingRule as exc:  # a client certificate no ssl.principal.mapping.rules rule applies to
            log.warning("closing connection on listener %s: %s", listener.name, exc)
            self.metrics.closed_connections.inc()
            writer.close()
            return
        self.connections.add(connection)
        self.metrics.connections.inc()
        try:
            await connection.serve()
        except asyncio.CancelledError:
            if not self._closing:
                raise
            # the broker is stopping: end quietly (the streams callback would log a cancelled task)
        except Exception:  # a bug in one connection must not reach the server (logged, connection dropped)
            log.exception("connection failed")
        finally:
            try:
                share = self.share
                if share is not None and not self._closing:
                    try:  # a closed connection closes the share sessions it opened (Kafka's rule)
                        await share.connection_closed(connection.connection_id)
                    except Exception:
                        log.exception("closing the share sessions of %s failed", connection.peer)
            finally:  # counted as served until its share sessions are dealt with
                self.connections.discard(connection)
                self.metrics.connections.dec()

    @property
    def connection_ids(self) -> frozenset[str]:
        """The ids of the connections being served; a closed one stays until its share sessions are closed."""
        return frozenset(connection.connection_id for connection in self.connections)

    def count_request(self, api_name: str, latency_s: float) -> None:
        self.request_counts[api_name] += 1
        self.metrics.count_request(api_name, latency_s)

    async def close(self) -> None:
        """Stop accepting, end every connection, close the store (pending writes made durable)."""
        self._closing = True
        if self._retention_task is not None:
            self._retention_task.cancel()
            await asyncio.gather(self._retention_task, return_exceptions=True)
        for acceptor in self._acceptors:  # stops accepting, then ends the listener's connections
            await acceptor.close()
        if self.transactions is not None:  # before the share services and the store it writes through
            await self.transactions.close()
        if self.share is not None:  # before the store: the services may still read or write through it
            await self.share.close()
        await self.store.close()
