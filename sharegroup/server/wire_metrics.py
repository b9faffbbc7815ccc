"""Prometheus metrics of the wire: requests and latency per API, bytes in and out, connections and their
limits (rejected per IP, acceptors blocked by max.connections, reads paused, timeouts), and security:
SASL logins and re-authentications per listener and mechanism (succeeded / failed, Kafka's
`successful-authentication-total` and friends) and authorization denials per listener, operation and
resource type.

Created once per `CollectorRegistry` (as the leader's and the persister's metrics are), so several
brokers in one process (tests) share the families; `sharegroup serve --metrics-port` exposes them with
the engine's metrics.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..metrics import REGISTRY, PerRegistry  # the engine's registry and its once-per-registry memoiser

__all__ = ["WireMetrics", "wire_metrics_for"]

_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WireMetrics:
    """The broker's request, byte and connection metric families in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("sharegroup_server_requests", "Requests handled, by API.", ("api",), registry=registry)
        self.request_latency_seconds = Histogram(
            "sharegroup_server_request_latency_seconds",
            "Time from a request's decoding to its response being written, by API.",
            ("api",), buckets=_LATENCY_BUCKETS_S, registry=registry,
        )
        self._per_api: dict[str, tuple[Any, Any]] = {}  # api -> (requests, latency) label children
        self.bytes_in = Counter("sharegroup_server_bytes_in", "Request bytes read (size prefixes included).", registry=registry)
        self.bytes_out = Counter("sharegroup_server_bytes_out", "Response bytes written.", registry=registry)
        self.connections = Gauge("sharegroup_server_connections", "Open client connections.", registry=registry)
        self.closed_connections = Counter(
            "sharegroup_server_closed_connections",
            "Connections the broker closed because of bad input (oversized or undecodable frames, unserved APIs).",
            registry=registry,
        )
        self.connections_rejected = Counter(
            "sharegroup_server_connections_rejected",
            "Connections closed as soon as they were accepted because their IP address already had "
            "max.connections.per.ip connections (or its max.connections.per.ip.overrides limit), by listener.",
            ("listener",), registry=registry)
        self.acceptor_blocked_seconds = Counter(
            "sharegroup_server_acceptor_blocked_seconds",
            "Time a listener accepted nothing because max.connections (broker-wide or the listener's) was "
            "reached (Kafka's AcceptorBlockedPercent as a total), by listener.", ("listener",), registry=registry)
        self.reads_paused = Counter(
            "sharegroup_server_reads_paused",
            "Times a connection stopped being read because it had MAX_IN_FLIGHT_REQUESTS requests unanswered or "
            "its send buffer over its bound (a client not reading its responses, or pipelining).", registry=registry)
        self.connections_timed_out = Counter(
            "sharegroup_server_connections_timed_out",
            "Connections closed by connections.max.idle.ms, by reason: idle (no request), request (a request "
            "not received whole in time), responses (responses not read in time).", ("reason",), registry=registry)
        by_login = ("listener", "mechanism")
        self.successful_authentication = Counter(
            "sharegroup_server_successful_authentication",
            "SASL logins that succeeded, by listener and mechanism.", by_login, registry=registry)
        self.failed_authentication = Counter(
            "sharegroup_server_failed_authentication",
            "SASL logins that failed (wrong credentials, unknown mechanism, a request out of turn), by listener "
            "and mechanism (NONE: before an enabled mechanism was chosen).", by_login, registry=registry)
        self.successful_reauthentication = Counter(
            "sharegroup_server_successful_reauthentication",
            "SASL re-authentications (connections.max.reauth.ms) that succeeded, by listener and mechanism.",
            by_login, registry=registry)
        self.failed_reauthentication = Counter(
            "sharegroup_server_failed_reauthentication",
            "SASL re-authentications that failed, by listener and mechanism.", by_login, registry=registry)
        self.expired_connections_killed = Counter(
            "sharegroup_server_expired_connections_killed",
            "Connections closed because their SASL session lifetime (connections.max.reauth.ms) ran out without "
            "a re-authentication (Kafka's expired-connections-killed-count).", registry=registry)
        self.authorization_denied = Counter(
            "sharegroup_server_authorization_denied",
            "Authorization checks the authorizer denied, by listener, operation and resource type (the checks "
            "behind *_authorized_operations fields are not counted).",
            ("listener", "operation", "resource_type"), registry=registry)

    def count_request(self, api: str, latency_s: float) -> None:
        """One handled request of `api` and its latency (the label children are looked up once per API:
        this runs for every request)."""
        children = self._per_api.get(api)
        if children is None:  # bounded: one entry per API served
            children = self._per_api[api] = (self.requests.labels(api), self.request_latency_seconds.labels(api))
        children[0].inc()
        children[1].observe(latency_s)

    def count_authentication(self, listener: str, mechanism: str, succeeded: bool, reauthentication: bool) -> None:
        """One SASL (re-)authentication outcome on `listener`."""
        if reauthentication:
            family = self.successful_reauthentication if succeeded else self.failed_reauthentication
        else:
            family = self.successful_authentication if succeeded else self.failed_authentication
        family.labels(listener, mechanism).inc()


_wire_metrics_for = PerRegistry(WireMetrics, REGISTRY)


def wire_metrics_for(registry: CollectorRegistry | None = None) -> WireMetrics:
    """The wire metrics in `registry` (default: the engine's REGISTRY), created on first use."""
    return _wire_metrics_for(registry)
