"""Per-group share configs set with IncrementalAlterConfigs (Kafka's GROUP resource, type 32).

The keys are Kafka's group-level share configs (`GROUP_CONFIG_KEYS`): `share.auto.offset.reset`,
`share.record.lock.duration.ms`, `share.delivery.count.limit`, `share.isolation.level`,
`share.session.timeout.ms`, `share.heartbeat.interval.ms`; and those of KIP-848 consumer groups,
`consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (Kafka 4.x; their defaults are the
broker's `group.consumer.session.timeout.ms` / `group.consumer.heartbeat.interval.ms`). A value is checked
against the broker's bounds (`group.share.min/max.*`, `group.consumer.min/max.*`) exactly as a
`--group-config` default is, and a heartbeat interval must stay below its session timeout; a bad key or
value is `ShareError(INVALID_CONFIG)` and nothing changes. Like Kafka, a group id may carry configs of
either kind whatever its type; each kind applies to groups of its type.

The values set per group are durable in one small JSON file, `DIR/groups/group-configs.json`, replaced
atomically (written, fsync'd, renamed) on every change. A group's effective settings are the broker's
defaults (`--group-config`, then the `group.share.*` keys) with its own values on top; they apply to the
share-partitions and sessions the group creates after the change (a loaded share-partition keeps the
settings it was created with until it is reloaded, as in Kafka).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..config import ShareGroupConfig
from ..errors import Errors, ShareError
from .broker_config import (CONSUMER_GROUP_CONFIG_KEYS, DLQ_COPY_RECORD, DLQ_GROUP_CONFIG_KEYS, DLQ_TOPIC_NAME,
                            GROUP_CONFIG_KEYS, ServeConfig, _parse_group_config)
from ..topics.segment_files import write_file_atomically

__all__ = ["GroupConfigStore", "SET", "DELETE", "FILE_NAME", "GROUP_CONFIG_DEFAULTS", "GROUP_CONFIG_DOCS"]

FILE_NAME = "group-configs.json"
_TIMING_PAIRS = (("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                 ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"))
_NOT_SHARE_PARTITION = frozenset(("share.session.timeout.ms", "share.heartbeat.interval.ms", *CONSUMER_GROUP_CONFIG_KEYS,
                                  *DLQ_GROUP_CONFIG_KEYS))
SET, DELETE = 0, 1  # Kafka's IncrementalAlterConfigs operations that apply to single-valued configs
# Kafka's own defaults of the group configs that no broker key sets (the others default to `group.` + key)
GROUP_CONFIG_DEFAULTS = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted",
                         DLQ_TOPIC_NAME: "", DLQ_COPY_RECORD: False}
# What DescribeConfigs answers as each group config's documentation (our words; Kafka sends its own text)
GROUP_CONFIG_DOCS = {
    DLQ_COPY_RECORD: "Whether a dead-letter record carries the original record's key, value and headers "
                     "(else only the __dlq.errors.* headers).",
    DLQ_TOPIC_NAME: "The share group's dead-letter queue topic (KIP-1191): rejected records and those that reach "
                    "the delivery count limit are written there before they are archived. Empty: no dead-letter "
                    "queue. The topic must start with errors.deadletterqueue.topic.name.prefix and opt in with "
                    "errors.deadletterqueue.group.enable=true.",
    "consumer.heartbeat.interval.ms": "How often a member of this consumer group (KIP-848) sends a heartbeat.",
    "consumer.session.timeout.ms": "A member of this consumer group without a heartbeat for this long is removed.",
    "share.auto.offset.reset": "Where a share-partition without state starts: latest, earliest or "
                               "by_duration:<ISO-8601 duration> (the first record at most that old).",
    "share.delivery.count.limit": "Deliveries of a record before it is archived as undeliverable.",
    "share.heartbeat.interval.ms": "How often a member of this share group sends a heartbeat.",
    "share.isolation.level": "read_committed delivers only committed transactional records; read_uncommitted all.",
    "share.record.lock.duration.ms": "How long a record acquired by a consumer stays locked to it before release.",
    "share.session.timeout.ms": "A member of this share group without a heartbeat for this long is removed.",
}


class GroupConfigStore:
    """The per-group values, their validation against the broker, and the effective configs."""

    def __init__(self, directory: Path | str, config: ServeConfig, base: ShareGroupConfig,
                 fsync: Callable[[int], None] | None = os.fsync) -> None:
        self.path = os.path.join(str(directory), FILE_NAME)
        self.config = config
        self.base = base
        self._fsync = fsync
        self._values: dict[str, dict[str, Any]] = self._read()
        self._check()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
        except FileNotFoundError:
            return {}
        if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("groups"), dict):
            raise ValueError(f"{self.path}: not a group configs file of version 1")
        return {group: {k: _parse_group_config(k, v, self.config.values) for k, v in values.items()}
                for group, values in doc["groups"].items()}

    # -- reading ---------------------------------------------------------------------------------------

    def overrides(self, group_id: str) -> dict[str, Any]:
        """The values set on this group (not the defaults)."""
        return dict(self._values.get(group_id, {}))

    def defaults(self) -> dict[str, Any]:
        """Every group-level key's broker default: `--group-config`, else the `group.share.*` key (for
        the `consumer.*` keys: the `group.consumer.*` key)."""
        out: dict[str, Any] = {}
        for key in GROUP_CONFIG_KEYS:
            if key in self.config.group_defaults:
                out[key] = self.config.group_defaults[key]
            elif key in GROUP_CONFIG_DEFAULTS:
                out[key] = GROUP_CONFIG_DEFAULTS[key]
            else:
                out[key] = self.config["group." + key]
        return out

    def effective(self, group_id: str) -> dict[str, tuple[Any, bool]]:
        """key -> (value, set on the group) for every group-level key."""
        own = self._values.get(group_id, {})
        return {k: (own[k], True) if k in own else (v, False) for k, v in self.defaults().items()}

    def group_config(self, group_id: str) -> ShareGroupConfig:
        """The share-partition settings of a group (the manager's config source)."""
        own = self._values.get(group_id)
        if not own:
            return self.base
        shared = {k: v for k, v in own.items() if k not in _NOT_SHARE_PARTITION}
        return ShareGroupConfig.from_properties({**_as_properties(self.base), **shared})

    def dead_letter_topic(self, group_id: str) -> str:
        """The group's `errors.deadletterqueue.topic.name` ("" = no dead-letter queue); read at each transition."""
        own = self._values.get(group_id)
        if own is not None and DLQ_TOPIC_NAME in own:
            return own[DLQ_TOPIC_NAME]
        return self.config.group_defaults.get(DLQ_TOPIC_NAME, "")

    def dead_letter_copy_record(self, group_id: str) -> bool:
        """The group's `errors.deadletterqueue.copy.record.enable`; read at each dead-letter write."""
        own = self._values.get(group_id)
        if own is not None and DLQ_COPY_RECORD in own:
            return own[DLQ_COPY_RECORD]
        return bool(self.config.group_defaults.get(DLQ_COPY_RECORD, False))

    def timing(self, group_id: str) -> tuple[int, int] | None:
        """(share.session.timeout.ms, share.heartbeat.interval.ms) of a group that set either, else None
        (the coordinator's defaults apply): the coordinator's per-group timing source."""
        return self._timing(group_id, *_TIMING_PAIRS[0])

    def consumer_timing(self, group_id: str) -> tuple[int, int] | None:
        """(consumer.session.timeout.ms, consumer.heartbeat.interval.ms) of a group that set either, else
        None: the coordinator's per-group timing source for KIP-848 consumer groups."""
        return self._timing(group_id, *_TIMING_PAIRS[1])

    def _timing(self, group_id: str, key_t: str, key_h: str) -> tuple[int, int] | None:
        own = self._values.get(group_id, {})
        if key_t not in own and key_h not in own:
            return None
        defaults = self.defaults()
        return own.get(key_t, defaults[key_t]), own.get(key_h, defaults[key_h])

    # -- changing --------------------------------------------------------------------------------------

    def validate(self, group_id: str, changes: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
        """The group's values after `changes` ((key, SET or DELETE, value)); INVALID_CONFIG when a key is
        unknown, a value is out of bounds, or an operation does not apply (APPEND/SUBTRACT)."""
        values = dict(self._values.get(group_id, {}))
        for key, op, raw in changes:
            if key not in GROUP_CONFIG_KEYS:
                raise ShareError(Errors.INVALID_CONFIG, f"Unknown group config name: {key}")
            if op == DELETE:
                values.pop(key, None)
            elif op == SET:
                _check_broker_bounds(key, raw, self.config.values)
                try:
                    values[key] = _parse_group_config(key, raw, self.config.values)
                except ValueError as exc:
                    raise ShareError(Errors.INVALID_CONFIG, str(exc)) from None
            else:
                raise ShareError(Errors.INVALID_CONFIG, f"Config {key}: only SET and DELETE apply to group configs")
        defaults = self.defaults()
        for key_t, key_h in _TIMING_PAIRS:
            timeout, interval = values.get(key_t, defaults[key_t]), values.get(key_h, defaults[key_h])
            if interval >= timeout:  # Kafka's message
                raise ShareError(Errors.INVALID_CONFIG, f"{key_t} must be greater than {key_h}")
        try:
            ShareGroupConfig.from_properties({**_as_properties(self.base), **{
                k: v for k, v in values.items() if k not in _NOT_SHARE_PARTITION}})
        except ValueError as exc:
            raise ShareError(Errors.INVALID_CONFIG, str(exc)) from None
        return values

    def alter(self, group_id: str, changes: Iterable[tuple[str, int, str | None]]) -> None:
        """Apply `changes` (see `validate`) and make them durable before returning."""
        values = self.validate(group_id, list(changes))
        updated = dict(self._values)
        if values:
            updated[group_id] = values
        else:
            updated.pop(group_id, None)
        doc = {"version": 1, "groups": updated}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_file_atomically(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(), self._fsync)
        except OSError as exc:
            raise ShareError(Errors.KAFKA_STORAGE_ERROR, f"writing {self.path}: {exc}") from exc
        self._values = updated
        self._check()

    def forget(self, group_id: str) -> None:
        """A deleted group loses its configs (Kafka deletes them with the group)."""
        if group_id in self._values:
            self.alter(group_id, [(k, DELETE, None) for k in list(self._values[group_id])])

    def _check(self) -> None:
        assert set(GROUP_CONFIG_DOCS) == set(GROUP_CONFIG_KEYS) >= set(GROUP_CONFIG_DEFAULTS)
        for group_id, values in self._values.items():
            assert values and set(values) <= set(GROUP_CONFIG_KEYS), (group_id, values)


# Kafka's GroupConfig: the lowest value its ConfigDef accepts for each integer group config, and the
# broker bounds of share.delivery.count.limit (KIP-1240's group.share.min/max.delivery.count.limit, which
# serve keeps at their defaults 2 and 10).
_AT_LEAST = {"share.record.lock.duration.ms": 1000, "share.delivery.count.limit": 2}
_DELIVERY_COUNT_BOUNDS = (("group.share.min.delivery.count.limit", 2), ("group.share.max.delivery.count.limit", 10))
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def _check_broker_bounds(key: str, raw: Any, broker: Mapping[str, Any]) -> None:
    """Kafka's refusals of a group value, with Kafka's messages: a value its ConfigDef does not accept
    ("Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"), then one
    outside the broker's min/max keys ("... must be less than or equal to group.share.max.record.lock.
    duration.ms", naming the bound's key)."""
    if key == "share.isolation.level" and str(raw).strip() not in _ISOLATION_LEVELS:
        raise ShareError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {key}: String must be one "
                         f"of: {', '.join(_ISOLATION_LEVELS)}")
    bounds = GROUP_CONFIG_KEYS.get(key, ())
    if key == "share.delivery.count.limit":
        bounds = tuple(name for name, _default in _DELIVERY_COUNT_BOUNDS)
        broker = {name: default for name, default in _DELIVERY_COUNT_BOUNDS}
    if len(bounds) != 2 or not bounds[0].startswith("group."):
        return
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ShareError(Errors.INVALID_CONFIG,
                         f"Invalid value {raw} for configuration {key}: Not a number of type INT") from None
    if value < _AT_LEAST.get(key, 1):
        raise ShareError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: Value must be at "
                         f"least {_AT_LEAST.get(key, 1)}")
    if value < broker[bounds[0]]:
        raise ShareError(Errors.INVALID_CONFIG, f"{key} must be greater than or equal to {bounds[0]}")
    if value > broker[bounds[1]]:
        raise ShareError(Errors.INVALID_CONFIG, f"{key} must be less than or equal to {bounds[1]}")


def _as_properties(config: ShareGroupConfig) -> Mapping[str, Any]:
    return {
        "share.record.lock.duration.ms": config.record_lock_duration_ms,
        "share.delivery.count.limit": config.delivery_count_limit,
        "group.share.partition.max.record.locks": config.partition_max_record_locks,
        "share.auto.offset.reset": config.auto_offset_reset,
        "share.isolation.level": config.isolation_level,
    }
