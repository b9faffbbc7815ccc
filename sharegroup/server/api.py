"""What a handler module provides (`ApiHandler`), what it is given (`RequestContext`), and the registry.

An API family is one module under `sharegroup/server/handlers/` that exports `HANDLERS`, a tuple of
`ApiHandler`; `handlers/__init__.py` lists the modules (one line each). The registry answers "which
handler serves (key, version)" and feeds ApiVersions, so advertising and dispatch cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from .authorization import ANONYMOUS, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from .codec import build, response_class

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["ApiHandler", "CloseConnection", "DelayedClose", "HandlerRegistry", "RequestContext", "SessionExpired"]


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


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One decoded request's envelope: who asked, with which API version, on which broker."""

    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    local_host: str = "127.0.0.1"
    principal: str = ANONYMOUS  # "User:name" once authenticated (SASL or a TLS client certificate)
    listener: str = "PLAINTEXT"  # the name of the listener this connection came in on

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
        metrics = getattr(self.broker, "metrics", None)
        if metrics is not None:
            metrics.authorization_denied.labels(self.listener, AclOperation(operation).name,
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

    def response(self, data: dict[str, Any]) -> Any:
        """The kio response of this request's API and version, built from plain data (see `codec.build`)."""
        return build(response_class(self.api_key, self.api_version), data)


Handle = Callable[[RequestContext, Any], Awaitable[Any | None]]
ErrorResponse = Callable[[RequestContext, Any, int], Any]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """Serves versions `min_version..max_version` of one API.

    `handle(ctx, request)` returns the kio response, or None when no response is sent (Produce acks=0).
    `error_response(ctx, request, code)` builds the response that carries one top-level error for every
    part of the request; the connection uses it when `handle` fails unexpectedly (UNKNOWN_SERVER_ERROR).
    """

    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Handle
    error_response: ErrorResponse | None = None

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
