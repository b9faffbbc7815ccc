"""Settings of classic groups and committed offsets, with Kafka's broker keys, defaults and bounds.

| field                         | Kafka key                              | default          |
|-------------------------------|----------------------------------------|------------------|
| min_session_timeout_ms        | group.min.session.timeout.ms           | 6000             |
| max_session_timeout_ms        | group.max.session.timeout.ms           | 1800000 (30 min) |
| initial_rebalance_delay_ms    | group.initial.rebalance.delay.ms       | 3000             |
| max_size                      | group.max.size                         | 2147483647       |
| offsets_retention_minutes     | offsets.retention.minutes              | 10080 (7 days)   |
| offsets_retention_check_interval_ms | offsets.retention.check.interval.ms | 600000        |
| offset_metadata_max_bytes     | offset.metadata.max.bytes              | 4096             |

A JoinGroup whose session timeout lies outside [min, max] is INVALID_SESSION_TIMEOUT. The initial
rebalance delay holds the first generation of an Empty group back so that consumers starting together
land in one generation. A new member (one that has not completed a join yet) that goes silent is
dropped after `new_member_join_timeout_ms` (Kafka's fixed five minutes). Bad values raise ValueError
naming the Kafka key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ...config import int_properties

__all__ = ["ClassicGroupConfig", "NEW_MEMBER_JOIN_TIMEOUT_MS"]

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
_INT32_MAX = 2**31 - 1

# field -> (Kafka key, min, max)
_KEYS: dict[str, tuple[str, int, int]] = {
    "min_session_timeout_ms": ("group.min.session.timeout.ms", 0, _INT32_MAX),
    "max_session_timeout_ms": ("group.max.session.timeout.ms", 0, _INT32_MAX),
    "initial_rebalance_delay_ms": ("group.initial.rebalance.delay.ms", 0, _INT32_MAX),
    "max_size": ("group.max.size", 1, _INT32_MAX),
    "offsets_retention_minutes": ("offsets.retention.minutes", 1, _INT32_MAX),
    "offsets_retention_check_interval_ms": ("offsets.retention.check.interval.ms", 1, 2**63 - 1),
    "offset_metadata_max_bytes": ("offset.metadata.max.bytes", 0, _INT32_MAX),
    "new_member_join_timeout_ms": ("", 1, _INT32_MAX),
}


@dataclass(frozen=True, slots=True)
class ClassicGroupConfig:
    """Classic-group and offset settings of the group coordinator; validated on construction."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = _INT32_MAX
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    def __post_init__(self) -> None:
        for name, (key, lo, hi) in _KEYS.items():
            value = getattr(self, name)
            label = f"{key} ({name})" if key else name
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{label} must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{label} must be in [{lo}, {hi}], got {value}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError(
                f"group.min.session.timeout.ms ({self.min_session_timeout_ms}) must not exceed "
                f"group.max.session.timeout.ms ({self.max_session_timeout_ms})"
            )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "ClassicGroupConfig":
        """Build from Kafka broker property names; values may be strings; unknown keys raise ValueError."""
        by_key = {key: name for name, (key, _lo, _hi) in _KEYS.items() if key}
        return cls(**int_properties(properties, by_key, "classic group property"))

    def to_properties(self) -> dict[str, str]:
        keys = {name: key for name, (key, _lo, _hi) in _KEYS.items() if key}
        return {keys[f.name]: str(getattr(self, f.name)) for f in fields(self) if f.name in keys}
