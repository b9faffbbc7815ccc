"""`LogConfig`: Kafka's log settings for the topic store, with Kafka's keys, defaults and bounds.

Broker keys (`server.properties`, `--override`) set the defaults; CreateTopics may override some per topic
with Kafka's topic keys. A bad broker value is a `ValueError` naming the key (refused at start-up); a bad
topic value is `ShareError(INVALID_CONFIG)`, as Kafka answers CreateTopics.

| field | broker key | topic key | default | bounds |
|---|---|---|---|---|
| segment_bytes | log.segment.bytes | segment.bytes | 1 GiB | >= 14 (Kafka's `LegacyRecord.RECORD_OVERHEAD_V0`) |
| retention_ms | log.retention.ms (or .minutes / .hours) | retention.ms | 7 days | >= -1 (-1: no limit) |
| retention_bytes | log.retention.bytes | retention.bytes | -1 (no limit) | any long |
| max_message_bytes | message.max.bytes | max.message.bytes | 1048588 | >= 0 |
| num_partitions | num.partitions | — | 1 | >= 1 |
| retention_check_interval_ms | log.retention.check.interval.ms | — | 300000 (5 min) | >= 1 |
| producer_id_expiration_ms | producer.id.expiration.ms | — | 86400000 (1 day) | >= 1 |
| auto_create_topics_enable | auto.create.topics.enable | — | true | — |
| message_timestamp_before_max_ms | log.message.timestamp.before.max.ms | message.timestamp.before.max.ms | 2^63-1 (no limit) | >= 0 |
| message_timestamp_after_max_ms | log.message.timestamp.after.max.ms | message.timestamp.after.max.ms | 3600000 (1 hour) | >= 0 |

The two timestamp bounds are how far a CreateTime record timestamp may lie before / after the broker's
clock when it is produced (Kafka's LogValidator; `record_batch.check_timestamps`); Kafka 4.0 lowered the
after bound's default from no limit to one hour.

`log_append_time` is the topic key `message.timestamp.type` (CreateTime / LogAppendTime; its broker key
`log.message.timestamp.type` is accepted but not acted on, so topics default to CreateTime): with
LogAppendTime the broker stamps each appended batch with its own clock (`record_batch.stamp_log_append_time`)
and the two bounds do not apply, as in Kafka.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from sharegroup.errors import Errors, ShareError

from .topic_config_defs import TOPIC_CONFIG_DEFS

__all__ = ["LogConfig", "TOPIC_CONFIG_KEYS"]

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
SEGMENT_BYTES_MIN = 14

# field -> (broker key, topic key or None, min, max)
_INT_FIELDS: dict[str, tuple[str, str | None, int, int]] = {
    "segment_bytes": ("log.segment.bytes", "segment.bytes", SEGMENT_BYTES_MIN, _INT_MAX),
    "retention_ms": ("log.retention.ms", "retention.ms", -1, _LONG_MAX),
    "retention_bytes": ("log.retention.bytes", "retention.bytes", -(2**63), _LONG_MAX),
    "max_message_bytes": ("message.max.bytes", "max.message.bytes", 0, _INT_MAX),
    "num_partitions": ("num.partitions", None, 1, _INT_MAX),
    "retention_check_interval_ms": ("log.retention.check.interval.ms", None, 1, _LONG_MAX),
    "producer_id_expiration_ms": ("producer.id.expiration.ms", None, 1, _INT_MAX),
    "message_timestamp_before_max_ms": ("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms",
                                        0, _LONG_MAX),
    "message_timestamp_after_max_ms": ("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms",
                                       0, _LONG_MAX),
}

# Kafka topic configs the store accepts (each value checked by its Kafka type and bounds) without acting
# on them: a single node has no replicas to wait for or throttle, records are stored as the producer
# compressed them, and flushing / indexing / segment rolling are the store's own. Keys outside
# TOPIC_CONFIG_DEFS are refused with INVALID_CONFIG, as Kafka 4.x refuses an unknown topic config.
_ACCEPTED_TOPIC_KEYS = frozenset(TOPIC_CONFIG_DEFS) - {v[1] for v in _INT_FIELDS.values() if v[1]}


def _refusal(key: str, value: str) -> str | None:
    """Why the store cannot honour a (valid) value of an accepted key, else None: refused rather than
    silently ignored. A remote-storage topic is refused with Kafka's own message for a broker without
    tiered storage."""
    if key == "cleanup.policy" and set(value.split(",")) != {"delete"}:
        return f"cleanup.policy={value} is not supported by this broker (no log compaction; only delete)"
    if key == "remote.storage.enable" and value == "true":
        return ("Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage.")
    return None


_TIMESTAMP_TYPE = "message.timestamp.type"  # acted on: LogAppendTime makes the broker stamp each batch
TOPIC_CONFIG_KEYS = frozenset({v[1] for v in _INT_FIELDS.values() if v[1]}) | _ACCEPTED_TOPIC_KEYS


def _parse_int(text: object) -> int:
    if isinstance(text, bool):
        raise ValueError("a boolean is not an integer")
    if isinstance(text, int):
        return text
    if isinstance(text, str) and text.strip().lstrip("-").isdigit():
        return int(text.strip())
    raise ValueError(f"not an integer: {text!r}")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Log settings of the topic store (broker defaults) or of one topic (with its overrides)."""

    segment_bytes: int = 2**30
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1_048_588
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    retention_check_interval_ms: int = 300_000  # how often the broker calls TopicStore.enforce_retention
    producer_id_expiration_ms: int = 86_400_000
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime: the broker stamps each batch

    def __post_init__(self) -> None:
        for name, (key, _, low, high) in _INT_FIELDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{key} must be an integer in [{low}, {high}], got {value!r}")
        if not isinstance(self.auto_create_topics_enable, bool):
            raise ValueError(f"auto.create.topics.enable must be true or false, got {self.auto_create_topics_enable!r}")
        if not isinstance(self.log_append_time, bool):
            raise ValueError(f"log_append_time must be true or false, got {self.log_append_time!r}")

    @classmethod
    def from_broker_configs(cls, configs: Mapping[str, object]) -> LogConfig:
        """Build from Kafka broker keys (string values as in server.properties). Keys this class does
        not know are ignored (the broker's config parser owns them); bad values raise ValueError."""
        kw: dict[str, object] = {}
        for name, (key, _, _, _) in _INT_FIELDS.items():
            if key in configs:
                try:
                    kw[name] = _parse_int(configs[key])
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
        if "retention_ms" not in kw:  # Kafka: log.retention.ms, else .minutes, else .hours
            for key, scale in (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)):
                if key in configs:
                    try:
                        value = _parse_int(configs[key])
                    except ValueError as exc:
                        raise ValueError(f"{key}: {exc}") from None
                    kw["retention_ms"] = value * scale if value >= 0 else -1
                    break
        if "auto.create.topics.enable" in configs:
            raw = str(configs["auto.create.topics.enable"]).strip().lower()
            if raw not in ("true", "false"):
                raise ValueError(f"auto.create.topics.enable must be true or false, got {raw!r}")
            kw["auto_create_topics_enable"] = raw == "true"
        return cls(**kw)  # type: ignore[arg-type]

    def for_topic(self, configs: Mapping[str, object] | None, *, stored: bool = False) -> LogConfig:
        """These defaults with a topic's overrides applied (CreateTopics configs, Kafka's topic keys).
        Raises ShareError(INVALID_CONFIG) naming the key for an unknown key or a bad value. `stored`
        overrides (read back from the topics file) have only the keys acted on checked, so a topic an
        older version accepted with a key or value checked more strictly now still opens."""
        if not configs:
            return self
        kw: dict[str, int] = {}
        by_topic_key = {v[1]: name for name, v in _INT_FIELDS.items() if v[1]}
        if stored:
            configs = {k: v for k, v in configs.items() if k in by_topic_key or k == _TIMESTAMP_TYPE}
        for key, raw in configs.items():
            if key in by_topic_key:
                name = by_topic_key[key]
                _, _, low, high = _INT_FIELDS[name]
                kind = "INT" if high == _INT_MAX else "LONG"  # Kafka's messages (ConfigDef's parse and Range)
                try:
                    value = _parse_int(raw)
                except ValueError:
                    value = None
                if value is None or not -high - 1 <= value <= high:
                    raise ShareError(Errors.INVALID_CONFIG,
                                     f"Invalid value {raw} for configuration {key}: Not a number of type {kind}")
                if value < low:
                    raise ShareError(Errors.INVALID_CONFIG,
                                     f"Invalid value {raw} for configuration {key}: Value must be at least {low}")
                kw[name] = value
            elif key in _ACCEPTED_TOPIC_KEYS:
                value_text = TOPIC_CONFIG_DEFS[key].parse(raw)
                refusal = _refusal(key, value_text)
                if refusal is not None:
                    raise ShareError(Errors.INVALID_CONFIG, refusal)
                if key == _TIMESTAMP_TYPE:
                    kw["log_append_time"] = value_text == "LogAppendTime"
            else:
                raise ShareError(Errors.INVALID_CONFIG, f"Unknown topic config name: {key}")
        lags = [int(TOPIC_CONFIG_DEFS[k].parse(configs.get(k, TOPIC_CONFIG_DEFS[k].default)))
                for k in ("min.compaction.lag.ms", "max.compaction.lag.ms")]
        if lags[0] > lags[1]:
            raise ShareError(Errors.INVALID_CONFIG, "conflict topic config setting "
                             f"min.compaction.lag.ms ({lags[0]}) > max.compaction.lag.ms ({lags[1]})")
        return dataclasses.replace(self, **kw)
