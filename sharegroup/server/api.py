"""What a handler module provides (`ApiHandler`), what it is given (`RequestContext` over a `BrokerView`),
the exceptions that cross the server, and the registry.

An API family is one module under `sharegroup/server/handlers/` that exports `HANDLERS`, a tuple of
`ApiHandler`; `handlers/__init__.py` lists the modules (one line each). The registry answers "which
handler serves (key, version)" and feeds ApiVersions, so advertising and dispatch cannot disagree.

This module is the leaf of the server's seams: the handlers, the connection and the SASL gate import
it, never `broker.py`. They see the broker as a `BrokerView` (exactly what they use of it), which
`broker.Broker` implements (checked by mypy in tests/typecheck_contracts.py). So it imports nothing of
the server that imports it back: only modules below the seam (the topic store, the share services,
security settings, configs, metrics, codec).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generator, Iterable, Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from .authorization import ANONYMOUS, SUPPORTED_OPERATIONS, AclOperation, Authorizer, ResourceType
from .broker_config import ServeConfig
from .codec import EncodedResponse, build, response_class
from .security.broker_security import BrokerSecurity
from .share_services import ShareServices
from .topic_admin import TopicAdmin
from .transactions import TransactionServices
from ..topics.topic_store import TopicStore
from .wire_metrics import WireMetrics

__all__ = ["ApiHandler", "BrokerView", "CloseConnection", "DelayedClose", "HandlerRegistry", "Later", "Ready",
           "RequestContext", "SessionExpired"]


# -- the exceptions that cross the server (raised by handlers and the SASL gate, handled by the connection) --


class CloseConnection(Exception):
    """A frame this broker refuses by closing the connection (Kafka's answer to undecodable input).

    A failed SASL login closes after `delay_s`, sending `response` (a whole frame) first when set.
    """

    response: bytes | None = None
    delay_s: float = 0.0


class DelayedClose(CloseConnection):
    """Close after `delay_s`, first sending `response` (a full frame, or None): a failed login."""

    def __init__(self, reason: str, response: bytes | None, delay_s: float) -> None:
        super().__init__(reason)
        self.response = response
        self.delay_s = delay_s


class SessionExpired(CloseConnection):
    """A request other than a re-authentication on a connection whose SASL session lifetime has run out
    (the connection counts it among the expired connections killed)."""


# -- answers that wait (a Produce's start returns one; the connection queues them in request order) ----


class Later:
    """An awaitable that calls `fn(*args)` only when awaited: dropped unawaited (its connection closed
    first), it leaves no coroutine behind that was never awaited."""

    __slots__ = ("_fn", "_args")

    def __init__(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._fn = fn
        self._args = args

    def __await__(self) -> Generator[Any, None, Any]:
        return (yield from self._fn(*self._args).__await__())


class Ready:
    """An answer known already, as an awaitable."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.value
        yield  # a generator: awaiting it never suspends


# -- what handlers and the connection see of the broker ----------------------------------------------


class BrokerView(Protocol):
    """The broker as handlers and the connection use it; `broker.Broker` implements it."""

    config: ServeConfig  # the broker's configs (`sharegroup serve` flags, `--override`s, defaults)
    node_id: int
    cluster_id: str
    store: TopicStore  # the topic store: topics, their partition logs, producer ids
    topics: TopicAdmin  # topic look-ups and creation over the store, with Kafka's validation
    share: ShareServices | None  # persister, group coordinator, manager; None: the group APIs are unavailable
    transactions: TransactionServices | None  # the transaction coordinator; None: transactional APIs unavailable
    authorizer: Authorizer  # AllowEveryone, or the StandardAuthorizer of `authorizer.class.name`
    security: BrokerSecurity  # listeners, TLS contexts, SASL settings, SCRAM credentials
    metrics: WireMetrics
    registry: HandlerRegistry  # the APIs served (dispatch, ApiVersions, error responses)

    def advertised_endpoint(self, listener: str, local_host: str) -> tuple[str, int]:
        """(host, port) clients should use for this node on `listener` (see `Broker.advertised_endpoint`)."""
        ...

    def count_request(self, api_name: str, latency_s: float) -> None:
        """Count one handled request of `api_name` and its latency."""
        ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One decoded request's envelope: who asked, with which API version, on which broker."""

    broker: BrokerView
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    local_host: str = "127.0.0.1"
    principal: str = ANONYMOUS  # "User:name" once authenticated (SASL or a TLS client certificate)
    listener: str = "PLAINTEXT"  # the name of the listener this connection came in on
    connection_id: str = ""  # unique per connection of this broker (what share sessions are tied to)

    @property
    def client_host(self) -> str:
        """The client's IP address (what an ACL's host is compared with)."""
        host, _, _ = self.peer.rpartition(":")
        return host or self.peer

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal may do `operation` on the literal resource `name` (a denial is
        counted in the wire metrics)."""
        allowed = self.broker.authorizer.authorize(self.principal, self.client_host, operation, resource_type, name)
        if not allowed:
            self._count_denial(operation, resource_type)
        return allowed

    def _count_denial(self, operation: AclOperation, resource_type: ResourceType) -> None:
        self.broker.metrics.authorization_denied.labels(self.listener, AclOperation(operation).name,
                                                        ResourceType(resource_type).name).inc()

    def authorized_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether this request's principal may do `operation` on at least one resource of this type."""
        allowed = self.broker.authorizer.authorize_by_resource_type(self.principal, self.client_host, operation,
                                                                    resource_type)
        if not allowed:
            self._count_denial(operation, resource_type)
        return allowed

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The bit field (bit = operation id) of the operations this principal may do on `name`, over the
        operations that apply to its type: what `*_authorized_operations` fields report."""
        authorize = self.broker.authorizer.authorize  # a probe, not a refusal: no denial is counted
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if authorize(self.principal, self.client_host, op, resource_type, name))

    @property
    def advertised_host(self) -> str:
        """The host clients should use for this node on this request's listener: its advertised or
        bound address, or, when it listens on every interface, the address this connection came in on."""
        return self.broker.advertised_endpoint(self.listener, self.local_host)[0]

    @property
    def advertised_port(self) -> int:
        """The port clients should use for this node on this request's listener."""
        return self.broker.advertised_endpoint(self.listener, self.local_host)[1]

    def response(self, data: dict[str, Any]) -> ResponsePayload:
        """The kio response of this request's API and version, built from plain data (see `codec.build`)."""
        return build(response_class(self.api_key, self.api_version), data)


# A handler is given the decoded kio request of one of the versions it serves (each version is its own
# kio class; the handler reads the fields by name) and answers with a kio response of the same version.
# (Or an `EncodedResponse`: a constant answer encoded once.)
Handle = Callable[[RequestContext, RequestPayload], Awaitable[ResponsePayload | EncodedResponse | None]]
ErrorResponse = Callable[[RequestContext, RequestPayload, int], ResponsePayload]
# The ordered part of a request whose answer may wait while the connection's next request starts
# (Produce: its appends are placed before it returns; the awaitable it returns waits for the disk).
Start = Callable[[RequestContext, RequestPayload], Awaitable[Awaitable[ResponsePayload | EncodedResponse | None]]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """Serves versions `min_version..max_version` of one API.

    `handle(ctx, request)` returns the kio response, or None when no response is sent (Produce acks=0).
    `error_response(ctx, request, code)` builds the response that carries one top-level error for every
    part of the request; the connection uses it when `handle` fails unexpectedly (UNKNOWN_SERVER_ERROR).
    `start(ctx, request)`, when set, is `handle` in two parts: it returns once the request's effects are
    ordered (what a later request of the connection may not overtake), with an awaitable of the response;
    the connection then begins its next request while this one's answer waits (a request whose handler
    has no `start` waits until every earlier one is answered: Kafka's one request at a time).
    """

    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Handle
    error_response: ErrorResponse | None = None
    start: Start | None = None

    def __post_init__(self) -> None:
        assert 0 <= self.min_version <= self.max_version, (self.name, self.min_version, self.max_version)


class HandlerRegistry:
    """The APIs this broker serves, by API key."""

    def __init__(self, handlers: Iterable[ApiHandler]) -> None:
        self._by_key: dict[int, ApiHandler] = {}
        for handler in handlers:
            if handler.api_key in self._by_key:
                raise ValueError(f"API key {handler.api_key} ({handler.name}) registered twice")
            self._by_key[handler.api_key] = handler
        self._check()

    def _check(self) -> None:
        for key, handler in self._by_key.items():
            assert key == handler.api_key
            for version in (handler.min_version, handler.max_version):
                response_class(key, version)  # kio must know every version we advertise

    def get(self, api_key: int, api_version: int) -> ApiHandler | None:
        """The handler for this key and version, or None when this broker does not serve it."""
        handler = self._by_key.get(api_key)
        if handler is None or not handler.min_version <= api_version <= handler.max_version:
            return None
        return handler

    def handler(self, api_key: int) -> ApiHandler | None:
        return self._by_key.get(api_key)

    def advertised(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) of every served API, by key: the ApiVersions answer."""
        return [(k, h.min_version, h.max_version) for k, h in sorted(self._by_key.items())]
