"""Broker configuration of `sharegroup serve`: Kafka's broker config names, defaults and bounds.

Three kinds of key exist here:

- *used* keys (`CONFIG_DEFS`): serve reads them; each has Kafka's type, default and valid range, and
  a value outside it is refused with `ValueError` naming the key (the CLI exits 2);
- *known unused* keys (`KNOWN_UNUSED`, plus the per-listener / SSL / SASL prefixes): real Kafka
  broker configs that mean nothing to a one-node broker (`log.dirs`, `process.roles`, ...). They are
  accepted with one warning each, so a `server.properties` taken from a Kafka installation works;
- anything else is a typo and is refused.

Group config defaults (`--group-config share.record.lock.duration.ms=...`) are checked against the
broker's own min/max keys, as Kafka checks a group's dynamic config against the broker's bounds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..coordinator.consumer.config import ConsumerGroupConfig
from .unused_broker_configs import KNOWN_UNUSED_PREFIXES, UNUSED_BEFORE_KAFKA_4_3, UNUSED_SINCE_KAFKA_4_3

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "CONFIG_DEFS",
    "CONSUMER_GROUP_CONFIG_KEYS",
    "GROUP_CONFIG_KEYS",
    "KNOWN_UNUSED",
    "ConfigDef",
    "ServeConfig",
    "parse_connection_overrides",
    "parse_properties",
    "parse_super_users",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One Kafka broker config: its name, type (`int`, `long`, `boolean`, `string`), default and bounds."""

    name: str
    type: str
    default: Any
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    def parse(self, raw: Any) -> Any:
        """Parse a value (a string from a properties file, or already typed); `ValueError` names the key."""
        if self.type in ("int", "long"):
            if isinstance(raw, bool):
                raise ValueError(f"{self.name} must be an integer, got {raw!r}")
            try:
                value = raw if isinstance(raw, int) else int(str(raw).strip())
            except ValueError:
                raise ValueError(f"{self.name} must be an integer, got {raw!r}") from None
            hi = self.max if self.max is not None else (INT32_MAX if self.type == "int" else INT64_MAX)
            lo = self.min if self.min is not None else -(hi + 1)
            if not lo <= value <= hi:
                raise ValueError(f"{self.name} must be in [{lo}, {hi}], got {value}")
            return value
        if self.type == "boolean":
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(f"{self.name} must be true or false, got {raw!r}")
            return text == "true"
        value = str(raw).strip()
        if self.choices and value.lower() not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, got {raw!r}")
        return value.lower() if self.choices else value


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


# Kafka 4.x names, defaults and validators (KafkaConfig / ServerLogConfigs / GroupCoordinatorConfig /
# ShareGroupConfig / ShareCoordinatorConfig / SocketServerConfigs).
CONFIG_DEFS: dict[str, ConfigDef] = _defs(
    ConfigDef("num.partitions", "int", 1, 1, doc="partitions of an auto-created topic, and of CreateTopics -1"),
    ConfigDef("default.replication.factor", "int", 1, 1, doc="replication factor of auto-created topics"),
    ConfigDef("auto.create.topics.enable", "boolean", True, doc="create a topic on a Metadata request for it"),
    ConfigDef("socket.request.max.bytes", "int", 104_857_600, 1, doc="largest request frame accepted"),
    ConfigDef("message.max.bytes", "int", 1_048_588, 0, doc="largest record batch a Produce may carry"),
    ConfigDef("connections.max.idle.ms", "long", 600_000, doc="idle connections are closed after this (-1 never)"),
    ConfigDef("log.segment.bytes", "int", 1_073_741_824, 1_048_576, doc="size of one topic log segment file"),
    ConfigDef("log.retention.ms", "long", None, -1, doc="retention by age; -1 unlimited; unset: the hours key"),
    ConfigDef("log.retention.minutes", "int", None, -1,
              doc="retention by age in minutes, used when log.retention.ms is unset"),
    ConfigDef("log.retention.hours", "int", 168, -1,
              doc="retention by age in hours, used when log.retention.ms and .minutes are unset"),
    ConfigDef("log.retention.bytes", "long", -1, -1, doc="retention by size per partition; -1 unlimited"),
    ConfigDef("log.retention.check.interval.ms", "long", 300_000, 1, doc="how often retention is enforced"),
    ConfigDef("log.message.timestamp.before.max.ms", "long", INT64_MAX, 0,
              doc="how far behind the broker's clock a produced CreateTime timestamp may be"),
    ConfigDef("log.message.timestamp.after.max.ms", "long", 3_600_000, 0,
              doc="how far ahead of the broker's clock a produced CreateTime timestamp may be"),
    ConfigDef("transaction.max.timeout.ms", "int", 900_000, 1, doc="bound of InitProducerId's transaction timeout"),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, 1,
              doc="how often the transaction coordinator aborts transactions past their timeout"),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, 1,
              doc="how often transactional ids past transactional.id.expiration.ms are removed"),
    ConfigDef("transactional.id.expiration.ms", "int", 604_800_000, 1,
              doc="a transactional id idle (no transaction) this long is forgotten"),
    ConfigDef("transaction.partition.verification.enable", "boolean", True,
              doc="KIP-890: a transactional produce must go to a partition of the producer's ongoing transaction"),
    ConfigDef("offsets.topic.num.partitions", "int", 50, 1,
              doc="partitions of __consumer_offsets, which name a group's offsets partition in a transaction"),
    ConfigDef("group.share.record.lock.duration.ms", "int", 30_000, 1000, 3_600_000,
              doc="how long an acquired record stays locked to its share consumer"),
    ConfigDef("group.share.min.record.lock.duration.ms", "int", 15_000, 1000, 3_600_000,
              doc="lower bound of a group's share.record.lock.duration.ms"),
    ConfigDef("group.share.max.record.lock.duration.ms", "int", 60_000, 1000, 3_600_000,
              doc="upper bound of a group's share.record.lock.duration.ms"),
    ConfigDef("group.share.delivery.count.limit", "int", 5, 2, 10,
              doc="deliveries of a record before it is archived as undeliverable"),
    ConfigDef("group.share.partition.max.record.locks", "int", 2000, 100, 10_000,
              doc="most records of one share-partition acquired at once"),
    ConfigDef("group.share.max.share.sessions", "int", 2000, 1, doc="most share sessions this broker keeps"),
    ConfigDef("group.share.max.size", "int", 200, 1, 1000, doc="most members of one share group"),
    ConfigDef("group.share.session.timeout.ms", "int", 45_000, 1,
              doc="a share group member without a heartbeat for this long is removed"),
    ConfigDef("group.share.min.session.timeout.ms", "int", 45_000, 1,
              doc="lower bound of a group's share.session.timeout.ms"),
    ConfigDef("group.share.max.session.timeout.ms", "int", 60_000, 1,
              doc="upper bound of a group's share.session.timeout.ms"),
    ConfigDef("group.share.heartbeat.interval.ms", "int", 5000, 1,
              doc="how often a share group member sends a heartbeat"),
    ConfigDef("group.share.min.heartbeat.interval.ms", "int", 5000, 1,
              doc="lower bound of a group's share.heartbeat.interval.ms"),
    ConfigDef("group.share.max.heartbeat.interval.ms", "int", 15_000, 1,
              doc="upper bound of a group's share.heartbeat.interval.ms"),
    ConfigDef("group.share.assignment.interval.ms", "int", 1000, 0, 15_000,
              doc="shortest time between two assignments of a share group"),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, 0, 500,
              doc="share state updates written between two snapshots"),
    # Share-state maintenance (ShareCoordinatorConfig; the two intervals are Kafka internal configs).
    ConfigDef("share.coordinator.state.topic.prune.interval.ms", "int", 300_000, 1,
              doc="how often the share state log is pruned below every live key's latest snapshot"),
    ConfigDef("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300_000, 1,
              doc="how often share-partitions not written for this long get a fresh snapshot"),
    # Kafka's bound is 1; the share state log's smallest segment is 1024 bytes (SegmentLog).
    ConfigDef("share.coordinator.state.topic.segment.bytes", "int", 104_857_600, 1024,
              doc="size of one share state log segment file (and segment.bytes of a state topic serve creates)"),
    ConfigDef("authorizer.class.name", "string", "", doc="ACL authorization (see AUTHORIZER_CLASS_NAMES); empty: none"),
    ConfigDef("super.users", "string", "", doc="principals allowed everything, ';'-separated (User:admin;User:ops)"),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", False, doc="allow actions on resources without any ACL"),
    # Classic groups and committed offsets (GroupCoordinatorConfig / OffsetConfig).
    ConfigDef("group.min.session.timeout.ms", "int", 6_000, 0, doc="shortest JoinGroup session timeout"),
    ConfigDef("group.max.session.timeout.ms", "int", 1_800_000, 0, doc="longest JoinGroup session timeout"),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3_000, 0, doc="first rebalance of an empty group waits this"),
    ConfigDef("group.max.size", "int", 2_147_483_647, 1, doc="members of one classic group"),
    ConfigDef("offsets.retention.minutes", "int", 10_080, 1, doc="committed offsets of idle groups expire after this"),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600_000, 1, doc="how often offsets expire"),
    ConfigDef("offset.metadata.max.bytes", "int", 4_096, 0, doc="longest committed offset metadata"),
    ConfigDef("group.consumer.max.size", "int", INT32_MAX, 1, doc="most members of one consumer group (KIP-848)"),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45_000, 1,
              doc="a consumer group member without a heartbeat for this long is removed"),
    ConfigDef("group.consumer.min.session.timeout.ms", "int", 45_000, 1,
              doc="lower bound of a group's consumer.session.timeout.ms"),
    ConfigDef("group.consumer.max.session.timeout.ms", "int", 60_000, 1,
              doc="upper bound of a group's consumer.session.timeout.ms"),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, 1,
              doc="how often a consumer group member sends a heartbeat"),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", "int", 5000, 1,
              doc="lower bound of a group's consumer.heartbeat.interval.ms"),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", "int", 15_000, 1,
              doc="upper bound of a group's consumer.heartbeat.interval.ms"),
    ConfigDef("group.consumer.assignors", "string", "uniform,range", doc="server-side assignors; the first is default"),
)

# The authorizer class names that enable ACL authorization (Kafka's KRaft and ZooKeeper-era names; both
# mean the ACL authorizer of sharegroup/server/security). Any other non-empty name is refused.
AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by ';' (Kafka's separator), each `Type:name`; `ValueError` else."""
    users = frozenset(part.strip() for part in text.split(";") if part.strip())
    for user in users:
        if ":" not in user:
            raise ValueError(f"super.users: {user!r} is not a principal (expected Type:name, e.g. User:admin)")
    return users


# Listeners, TLS and SASL (SocketServerConfigs / SslConfigs / BrokerSecurityConfigs); read by
# `sharegroup/server/security/`. Unset `listeners`: one PLAINTEXT listener on --host/--port.
CONFIG_DEFS.update(_defs(
    ConfigDef("listeners", "string", None, doc="NAME://HOST:PORT,...; unset: PLAINTEXT on --host/--port"),
    ConfigDef("advertised.listeners", "string", None, doc="what Metadata answers per listener; unset: listeners"),
    ConfigDef("listener.security.protocol.map", "string",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              doc="listener name -> security protocol, NAME:PROTOCOL,..."),
    ConfigDef("ssl.keystore.type", "string", "JKS", doc="only PEM is supported"),
    ConfigDef("ssl.keystore.location", "string", None, doc="the broker's key and certificate file (PEM)"),
    ConfigDef("ssl.keystore.password", "string", None, doc="password of the keystore file"),
    ConfigDef("ssl.keystore.certificate.chain", "string", None,
              doc="the broker's certificate chain given inline (PEM)"),
    ConfigDef("ssl.keystore.key", "string", None, doc="the broker's private key given inline (PEM)"),
    ConfigDef("ssl.key.password", "string", None, doc="password of the broker's private key"),
    ConfigDef("ssl.truststore.type", "string", "JKS", doc="only PEM is supported"),
    ConfigDef("ssl.truststore.location", "string", None,
              doc="certificates trusted to sign client certificates (PEM file)"),
    ConfigDef("ssl.truststore.password", "string", None, doc="password of the truststore file"),
    ConfigDef("ssl.truststore.certificates", "string", None, doc="trusted certificates given inline (PEM)"),
    ConfigDef("ssl.client.auth", "string", "none", choices=("none", "requested", "required"),
              doc="whether TLS clients must show a certificate: none, requested or required"),
    ConfigDef("ssl.enabled.protocols", "string", "TLSv1.2,TLSv1.3", doc="TLS versions accepted"),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", doc="the TLS protocol used"),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT",
              doc="rules mapping a client certificate's name to a principal"),
    ConfigDef("sasl.enabled.mechanisms", "string", "GSSAPI", doc="SASL mechanisms offered to clients"),
    ConfigDef("sasl.jaas.config", "string", None, doc="JAAS login configuration of the broker's SASL mechanisms"),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100, 0,
              doc="a failed authentication is answered after this delay"),
    ConfigDef("connections.max.reauth.ms", "long", 0, 0,
              doc="SASL sessions must re-authenticate within this; 0: never"),
    ConfigDef("sasl.server.max.receive.size", "int", 524_288, 1,
              doc="largest SASL message accepted before authentication"),
))
_SASL_MECHANISM_PREFIXES = ("plain.", "scram-sha-256.", "scram-sha-512.", "gssapi.", "oauthbearer.")

# Connection limits and socket buffers (SocketServerConfigs); read by `sharegroup/server/connection_quotas.py`,
# `acceptor.py` and `connection.py`. `max.connections` may also be set per listener
# (`listener.name.<l>.max.connections`).
CONFIG_DEFS.update(_defs(
    ConfigDef("max.connections", "int", INT32_MAX, 0,
              doc="most connections open at once; a new one waits to be accepted until one closes"),
    ConfigDef("max.connections.per.ip", "int", INT32_MAX, 0,
              doc="most connections from one IP address; more are closed at once (0 needs overrides)"),
    ConfigDef("max.connections.per.ip.overrides", "string", "",
              doc="per-IP or host name limits, HOST:COUNT,... (e.g. hostName:100,127.0.0.1:200)"),
    ConfigDef("socket.send.buffer.bytes", "int", 102_400, -1, doc="SO_SNDBUF of client sockets; -1: the OS default"),
    ConfigDef("socket.receive.buffer.bytes", "int", 102_400, -1,
              doc="SO_RCVBUF of client sockets; -1: the OS default"),
    ConfigDef("socket.listen.backlog.size", "int", 50, 1, doc="connections waiting to be accepted, per listener"),
))
_VALID_HOST = re.compile(r"^[0-9A-Za-z\-%._:]+$")  # Kafka's check of an override's host (Utils.validHostPattern)


def parse_connection_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `HOST:COUNT,...` as {host: count}. The count follows the last
    `:` (so an IPv6 address needs no brackets); `ValueError` naming the key for a bad entry."""
    key = "max.connections.per.ip.overrides"
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ValueError(f"{key}: invalid entry {item!r} (expected HOST:COUNT, e.g. 127.0.0.1:200)")
        if not _VALID_HOST.match(host):
            raise ValueError(f"{key} contains invalid addresses : {host}")
        try:
            value = int(count.strip())
        except ValueError:
            raise ValueError(f"{key}: the count of {item!r} must be an integer") from None
        if not 0 <= value <= INT32_MAX:
            raise ValueError(f"{key}: the count of {item!r} must be in [0, {INT32_MAX}]")
        out[host] = value
    return out


def _check_connection_limits(values: Mapping[str, Any]) -> None:
    """Kafka's start-up checks of the connection limits: overrides parse; 0 per IP only with overrides."""
    overrides = parse_connection_overrides(values["max.connections.per.ip.overrides"])
    if values["max.connections.per.ip"] == 0 and not overrides:
        raise ValueError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                         "property is set.")

# Group-level share configs settable as defaults with --group-config, with the broker key whose
# min/max bound them (Kafka's GroupConfig validation) and, for strings, the allowed values.
GROUP_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.delivery.count.limit": (),
    "share.auto.offset.reset": ("latest", "earliest", "by_duration:"),
    "share.isolation.level": ("read_uncommitted", "read_committed"),
    # KIP-848 consumer groups' own timing (Kafka 4.x), bounded by the broker's group.consumer.min/max.*.
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
}
CONSUMER_GROUP_CONFIG_KEYS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")

# A key serve reads (CONFIG_DEFS) is never reported as unused, whichever list still names it.
KNOWN_UNUSED = (UNUSED_BEFORE_KAFKA_4_3 | UNUSED_SINCE_KAFKA_4_3) - CONFIG_DEFS.keys()


def _is_known_unused(key: str) -> bool:
    return key in KNOWN_UNUSED or key.startswith(KNOWN_UNUSED_PREFIXES)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text: `key=value` or `key: value` lines, `#`/`!` comments, `\\` continuations."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:cut].strip(), line[cut + 1:].strip()) if cut >= 0 else (line.strip(), "")
        out[key] = value
    if pending:
        key, _, value = pending.partition("=")
        out[key.strip()] = value.strip()
    return out


def split_assignment(text: str) -> tuple[str, str]:
    """`KEY=VALUE` of `--override` / `--group-config`; `ValueError` when there is no `=`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """The validated broker configuration: every used key with its value (Kafka's default when unset).

    `warnings` lists one line per real-but-unused Kafka key that was given; `group_defaults` holds
    the `--group-config` defaults applied to every share group; `static_keys` names the used keys that
    were given (Kafka's STATIC_BROKER_CONFIG source, even when the value equals the default).
    """

    values: Mapping[str, Any]
    group_defaults: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    listener_configs: Mapping[str, Any] = field(default_factory=dict)  # listener.name.<l>.[<mech>.]<key>
    static_keys: frozenset[str] = frozenset()  # used keys given in server.properties / --override

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def log_retention_ms(self) -> int:
        """Kafka's precedence: log.retention.ms, else minutes, else hours (-1 anywhere: unlimited)."""
        if self.values["log.retention.ms"] is not None:
            return self.values["log.retention.ms"]
        if self.values["log.retention.minutes"] is not None:
            minutes = self.values["log.retention.minutes"]
            return -1 if minutes < 0 else minutes * 60_000
        hours = self.values["log.retention.hours"]
        return -1 if hours < 0 else hours * 3_600_000

    @classmethod
    def build(
        cls,
        properties: Mapping[str, Any] = (),
        overrides: Iterable[tuple[str, Any]] = (),
        group_configs: Iterable[tuple[str, Any]] = (),
    ) -> "ServeConfig":
        """Validate `properties` (a server.properties), then `overrides` on top, then the group defaults.

        Raises `ValueError` naming the first offending key: a typo, a value out of Kafka's bounds, or an
        inconsistent pair (a default outside its min/max).
        """
        given: dict[str, Any] = dict(properties)
        for key, value in overrides:
            given[key] = value
        values: dict[str, Any] = {name: d.default for name, d in CONFIG_DEFS.items()}
        warnings: list[str] = []
        listener_configs: dict[str, Any] = {}
        for key, raw in given.items():
            d = CONFIG_DEFS.get(key) or _listener_config_def(key)
            if d is not None and key not in CONFIG_DEFS:
                listener_configs[key.lower() if key.startswith("listener.name.") else key] = d.parse(raw)
            elif d is not None:
                values[key] = d.parse(raw)
            elif _is_known_unused(key):
                warnings.append(f"sharegroup serve: warning: Kafka broker config {key!r} is not used by serve; ignored")
            else:
                raise ValueError(f"unknown broker config {key!r} (not a Kafka broker config)")
        _check_ranges(values)
        _check_authorizer(values)
        _check_connection_limits(values)
        # A per-listener key of a listener serve does not have (a Kafka install's CONTROLLER listener) is unused.
        names = {n.lower() for n in re.findall(r"([A-Za-z][A-Za-z0-9_]*)://", values["listeners"] or "PLAINTEXT://")}
        for key in [k for k in listener_configs if k.split(".")[2] not in names]:
            del listener_configs[key]
            warnings.append(f"sharegroup serve: warning: Kafka broker config {key!r} is not used by serve; ignored")
        group_defaults: dict[str, Any] = {}
        for key, raw in group_configs:
            if key in CONSUMER_GROUP_CONFIG_KEYS:  # their defaults are the group.consumer.* broker keys
                raise ValueError(f"--group-config {key}: set the broker's group.{key} instead")
            group_defaults[key] = _parse_group_config(key, raw, values)
        return cls(values=values, group_defaults=group_defaults, warnings=tuple(warnings),
                   listener_configs=listener_configs, static_keys=frozenset(k for k in given if k in CONFIG_DEFS))


def _listener_config_def(key: str) -> ConfigDef | None:
    """The def of a used per-listener key `listener.name.<l>.[<mechanism>.]<key>`, else None."""
    if not key.startswith("listener.name."):
        return None
    _listener, dot, rest = key[len("listener.name."):].partition(".")
    if not dot:
        return None
    rest = rest.lower()
    for prefix in _SASL_MECHANISM_PREFIXES:
        if rest.startswith(prefix) and rest[len(prefix):] in ("sasl.jaas.config", "connections.max.reauth.ms"):
            rest = rest[len(prefix):]
    d = CONFIG_DEFS.get(rest)
    per_listener = rest.startswith(("ssl.", "sasl.")) or rest in ("connections.max.reauth.ms", "max.connections")
    if d is None or not per_listener:
        return None
    return ConfigDef(key, d.type, d.default, d.min, d.max, d.choices)


def _check_ranges(values: Mapping[str, Any]) -> None:
    """Kafka's cross-key rules: each share-group default lies within its min/max pair."""
    for base in ("record.lock.duration.ms", "session.timeout.ms", "heartbeat.interval.ms"):
        lo_key, hi_key, key = f"group.share.min.{base}", f"group.share.max.{base}", f"group.share.{base}"
        lo, hi, value = values[lo_key], values[hi_key], values[key]
        if lo > hi:
            raise ValueError(f"{lo_key} ({lo}) must not exceed {hi_key} ({hi})")
        if not lo <= value <= hi:
            raise ValueError(f"{key} must be in [{lo}, {hi}] ({lo_key}, {hi_key}), got {value}")
    if values["group.share.heartbeat.interval.ms"] >= values["group.share.session.timeout.ms"]:
        raise ValueError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
        raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")


def _check_authorizer(values: Mapping[str, Any]) -> None:
    """An authorizer class this broker has (by Kafka's names), and parseable super users."""
    name = values["authorizer.class.name"]
    if name and name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name {name!r} is not supported (expected {' or '.join(AUTHORIZER_CLASS_NAMES)})")
    parse_super_users(values["super.users"])
    consumer_group_config(values)  # its own checks: bounds, known assignors


_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def consumer_group_config(values: Mapping[str, Any]) -> "ConsumerGroupConfig":
    """The coordinator's settings of KIP-848 consumer groups from the `group.consumer.*` keys (the
    assignors by name, or by the class names of Kafka's built-in ones)."""
    return ConsumerGroupConfig(
        max_size=values["group.consumer.max.size"],
        session_timeout_ms=values["group.consumer.session.timeout.ms"],
        heartbeat_interval_ms=values["group.consumer.heartbeat.interval.ms"],
        min_session_timeout_ms=values["group.consumer.min.session.timeout.ms"],
        max_session_timeout_ms=values["group.consumer.max.session.timeout.ms"],
        min_heartbeat_interval_ms=values["group.consumer.min.heartbeat.interval.ms"],
        max_heartbeat_interval_ms=values["group.consumer.max.heartbeat.interval.ms"],
        assignors=tuple(_ASSIGNOR_CLASSES.get(a.strip(), a.strip())
                        for a in str(values["group.consumer.assignors"]).split(",") if a.strip()),
    )


def _parse_group_config(key: str, raw: Any, broker: Mapping[str, Any]) -> Any:
    bounds = GROUP_CONFIG_KEYS.get(key)
    if bounds is None:
        raise ValueError(f"unknown group config {key!r} (expected one of {', '.join(sorted(GROUP_CONFIG_KEYS))})")
    if key in DLQ_GROUP_CONFIG_KEYS:
        return _parse_dlq_group_config(key, raw)
    if key in ("share.auto.offset.reset", "share.isolation.level"):
        text = str(raw).strip()
        lowered = text.lower()
        if lowered in bounds or (key == "share.auto.offset.reset" and lowered.startswith("by_duration:")):
            if lowered.startswith("by_duration:"):
                from ..config import parse_iso8601_duration_ms

                parse_iso8601_duration_ms(text[len("by_duration:"):])  # ValueError on a bad duration
                return "by_duration:" + text[len("by_duration:"):]
            return lowered
        raise ValueError(f"{key} must be one of {', '.join(b.rstrip(':') for b in bounds)}, got {raw!r}")
    try:
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {raw!r}") from None
    if key == "share.delivery.count.limit":
        lo, hi = CONFIG_DEFS["group.share.delivery.count.limit"].min, CONFIG_DEFS["group.share.delivery.count.limit"].max
        lo_name, hi_name = "", ""
    else:
        lo_name, hi_name = bounds
        lo, hi = broker[lo_name], broker[hi_name]
    if not lo <= value <= hi:
        where = f" ({lo_name}, {hi_name})" if lo_name else ""
        raise ValueError(f"{key} must be in [{lo}, {hi}]{where}, got {value}")
    return value


# -- KIP-1191 dead-letter queues for share groups (Kafka 4.4, share.version 2) --------------------------
# The two broker keys (GroupCoordinatorConfig: dynamic cluster configs in Kafka, static here like every
# broker key of serve) and the two group keys, whose defaults no broker key sets. Read by
# `sharegroup/server/dead_letter.py`.
CONFIG_DEFS.update(_defs(
    ConfigDef("errors.deadletterqueue.topic.name.prefix", "string", "dlq.",
              doc="dead-letter queue topics of share groups must start with this prefix; empty: any name"),
    ConfigDef("errors.deadletterqueue.auto.create.topics.enable", "boolean", False,
              doc="create a share group's missing dead-letter queue topic (with the prefix) on its first write"),
))
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
DLQ_GROUP_CONFIG_KEYS = (DLQ_TOPIC_NAME, DLQ_COPY_RECORD)
GROUP_CONFIG_KEYS.update({DLQ_TOPIC_NAME: (), DLQ_COPY_RECORD: ()})


def _parse_dlq_group_config(key: str, raw: Any) -> Any:
    """A DLQ group value as Kafka's GroupConfig checks it: the copy flag is a boolean; the topic name is any
    string but one starting with `__` (internal topics are never dead-letter queues); `ValueError` else."""
    text = str(raw).strip()
    if key == DLQ_COPY_RECORD:
        if isinstance(raw, bool):
            return raw
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Invalid value {raw} for configuration {key}: Expected value to be either true or false")
        return text.lower() == "true"
    if text.startswith("__"):
        raise ValueError(f"Invalid value {raw} for configuration {key}: a dead-letter queue topic name cannot start "
                         "with '__' (internal topics are not allowed)")
    return text
