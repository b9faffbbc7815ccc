"""Share-group configuration with Kafka's keys, defaults and valid ranges (ShareGroupConfig, KIP-932).

Bad values raise `ValueError` naming the Kafka key, so a misconfigured broker fails at start-up rather
than misbehaving later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Mapping

__all__ = ["BrokerConfig", "ShareGroupConfig", "int_properties", "parse_iso8601_duration_ms"]

_AUTO_OFFSET_RESETS = ("latest", "earliest")
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_ACQUIRE_MODES = ("batch_optimized", "record_limit")

# field -> (broker key, group-level key, min, max); ranges are Kafka 4.2's.
_INT_KEYS: dict[str, tuple[str, str, int, int]] = {
    "record_lock_duration_ms": ("group.share.record.lock.duration.ms", "share.record.lock.duration.ms", 1000, 3_600_000),
    "delivery_count_limit": ("group.share.delivery.count.limit", "share.delivery.count.limit", 2, 10),
    "partition_max_record_locks": ("group.share.partition.max.record.locks", "share.partition.max.record.locks", 100, 10_000),
}
_STR_KEYS: dict[str, tuple[str, ...]] = {
    "auto_offset_reset": ("share.auto.offset.reset", "group.share.auto.offset.reset"),
    "isolation_level": ("share.isolation.level", "group.share.isolation.level"),
    "acquire_mode": ("share.acquire.mode", "group.share.acquire.mode"),
}

# java.time.Duration.parse syntax: PnDTnHnMn.nS (days, hours, minutes, seconds; no years or months).
_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)(?:[.,](?P<f>\d{1,9}))?S)?)?$",
    re.IGNORECASE,
)


def parse_iso8601_duration_ms(text: str) -> int:
    """Parse an ISO-8601 duration such as `PT1H30M` or `P2D` into milliseconds (non-negative only)."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes, seconds = (int(m.group(k) or 0) for k in "dhms")
    frac = m.group("f") or ""
    millis = int((frac + "000")[:3]) if frac else 0
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + millis


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """Kafka's share-group settings for one share-partition leader; validated on construction."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2_000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    acquire_mode: str = "batch_optimized"

    def __post_init__(self) -> None:
        for name, (key, _group_key, lo, hi) in _INT_KEYS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{key} ({name}) must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{key} ({name}) must be in [{lo}, {hi}], got {value}")
        reset = self.auto_offset_reset
        if not isinstance(reset, str) or (
            reset not in _AUTO_OFFSET_RESETS and not reset.startswith("by_duration:")
        ):
            raise ValueError(
                f"share.auto.offset.reset (auto_offset_reset) must be latest, earliest or by_duration:<ISO-8601>, got {reset!r}"
            )
        if reset.startswith("by_duration:"):
            try:
                parse_iso8601_duration_ms(reset[len("by_duration:"):])
            except ValueError as exc:
                raise ValueError(f"share.auto.offset.reset (auto_offset_reset): {exc}") from None
        if self.isolation_level not in _ISOLATION_LEVELS:
            raise ValueError(
                f"share.isolation.level (isolation_level) must be one of {_ISOLATION_LEVELS}, got {self.isolation_level!r}"
            )
        if self.acquire_mode not in _ACQUIRE_MODES:
            raise ValueError(f"share.acquire.mode (acquire_mode) must be one of {_ACQUIRE_MODES}, got {self.acquire_mode!r}")

    @property
    def auto_offset_reset_duration_ms(self) -> int | None:
        """For `by_duration:<d>`, the duration in ms; otherwise None."""
        if self.auto_offset_reset.startswith("by_duration:"):
            return parse_iso8601_duration_ms(self.auto_offset_reset[len("by_duration:"):])
        return None

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "ShareGroupConfig":
        """Build from Kafka property names (broker `group.share.*` or group-level `share.*`).

        Group-level keys win over broker keys, as in Kafka. Unknown keys raise `ValueError`, so a typo
        is not silently ignored. Values may be strings, as they are in a properties file.
        """
        known: dict[str, str] = {}
        for name, (broker_key, group_key, _lo, _hi) in _INT_KEYS.items():
            known[broker_key] = name
            known[group_key] = name
        for name, keys in _STR_KEYS.items():
            for key in keys:
                known[key] = name
        values: dict[str, Any] = {}
        priority: dict[str, int] = {}
        for key, raw in properties.items():
            if key not in known:
                raise ValueError(f"unknown share-group property {key!r}")
            name = known[key]
            rank = 1 if key.startswith("share.") else 0
            if name in _INT_KEYS:
                try:
                    value: Any = int(str(raw).strip()) if not isinstance(raw, int) else raw
                except ValueError:
                    raise ValueError(f"{key} must be an integer, got {raw!r}") from None
            else:
                value = str(raw).strip().lower() if not str(raw).startswith("by_duration:") else str(raw).strip()
            if rank >= priority.get(name, -1):
                values[name] = value
                priority[name] = rank
        return cls(**values)

    def to_properties(self) -> dict[str, str]:
        """The group-level Kafka properties equal to this configuration."""
        out: dict[str, str] = {}
        for f in fields(self):
            if f.name in _INT_KEYS:
                out[_INT_KEYS[f.name][1]] = str(getattr(self, f.name))
            else:
                out[_STR_KEYS[f.name][0]] = str(getattr(self, f.name))
        return out


# BrokerConfig field -> (Kafka broker key, min, max); defaults and ranges are Kafka 4.2's where Kafka has
# the setting. `fetch.max.bytes` is the broker's cap on one fetch response (Kafka: 55 MiB, >= 1024).
_BROKER_KEYS: dict[str, tuple[str, int, int]] = {
    "max_share_sessions": ("group.share.max.share.sessions", 1, 2**31 - 1),
    "partition_max_record_locks": ("group.share.partition.max.record.locks", 100, 10_000),
    "record_lock_duration_ms": ("group.share.record.lock.duration.ms", 1000, 3_600_000),
    "min_record_lock_duration_ms": ("group.share.min.record.lock.duration.ms", 1000, 3_600_000),
    "max_record_lock_duration_ms": ("group.share.max.record.lock.duration.ms", 1000, 3_600_000),
    "delivery_count_limit": ("group.share.delivery.count.limit", 2, 10),
    "fetch_max_bytes": ("fetch.max.bytes", 1024, 2**31 - 1),
}


def int_properties(properties: Mapping[str, Any], by_key: Mapping[str, str], what: str) -> dict[str, int]:
    """Integer-valued Kafka properties (ints, or strings as in a properties file) by field name.

    `by_key` maps each accepted Kafka key to its field; an unknown key, a bool or a value that is no
    integer raises `ValueError` naming the key, so a typo is never silently ignored.
    """
    values: dict[str, int] = {}
    for key, raw in properties.items():
        name = by_key.get(key)
        if name is None:
            raise ValueError(f"unknown {what} {key!r}")
        if isinstance(raw, bool):
            raise ValueError(f"{key} must be an integer, got {raw!r}")
        try:
            values[name] = raw if isinstance(raw, int) else int(str(raw).strip())
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {raw!r}") from None
    return values


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker-wide settings of the share path (Kafka's `group.share.*` broker keys); validated on
    construction. The share-group defaults (`share_group_config()`) apply to every group whose
    coordinator gives no configuration of its own."""

    max_share_sessions: int = 2_000
    partition_max_record_locks: int = 2_000
    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5
    fetch_max_bytes: int = 57_671_680

    def __post_init__(self) -> None:
        for name, (key, lo, hi) in _BROKER_KEYS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{key} ({name}) must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{key} ({name}) must be in [{lo}, {hi}], got {value}")
        if not self.min_record_lock_duration_ms <= self.record_lock_duration_ms <= self.max_record_lock_duration_ms:
            raise ValueError(
                "group.share.record.lock.duration.ms (record_lock_duration_ms) must lie within "
                f"[group.share.min.record.lock.duration.ms, group.share.max.record.lock.duration.ms] = "
                f"[{self.min_record_lock_duration_ms}, {self.max_record_lock_duration_ms}], "
                f"got {self.record_lock_duration_ms}"
            )

    def share_group_config(self) -> ShareGroupConfig:
        """The share-group settings a group gets when nothing overrides the broker's defaults."""
        return ShareGroupConfig(
            record_lock_duration_ms=self.record_lock_duration_ms,
            delivery_count_limit=self.delivery_count_limit,
            partition_max_record_locks=self.partition_max_record_locks,
        )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "BrokerConfig":
        """Build from Kafka broker property names; values may be strings, as in a properties file.

        Unknown keys raise `ValueError`, so a typo is not silently ignored.
        """
        by_key = {key: name for name, (key, _lo, _hi) in _BROKER_KEYS.items()}
        return cls(**int_properties(properties, by_key, "broker share property"))

    def to_properties(self) -> dict[str, str]:
        """The Kafka broker properties equal to this configuration."""
        return {key: str(getattr(self, name)) for name, (key, _lo, _hi) in _BROKER_KEYS.items()}
