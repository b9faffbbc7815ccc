"""Group coordinator settings for share groups, with Kafka's keys, defaults and bounds (KIP-932).

Bad values raise `ValueError` naming the Kafka key, so a misconfigured coordinator fails at start-up
rather than misbehaving later. The bounds are Kafka's broker-side ones: the session timeout and the
heartbeat interval must lie within `group.share.{min,max}.session.timeout.ms` and
`group.share.{min,max}.heartbeat.interval.ms` (Kafka's defaults 45-60 s and 5-15 s unless given), and
the heartbeat interval must be below the session timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ...config import int_properties

__all__ = ["GroupConfig"]

# field -> (Kafka key, min, max)
_BOUNDS: dict[str, tuple[str, int, int]] = {
    "max_size": ("group.share.max.size", 1, 1000),
    "min_session_timeout_ms": ("group.share.min.session.timeout.ms", 1, 2**31 - 1),
    "max_session_timeout_ms": ("group.share.max.session.timeout.ms", 1, 2**31 - 1),
    "min_heartbeat_interval_ms": ("group.share.min.heartbeat.interval.ms", 1, 2**31 - 1),
    "max_heartbeat_interval_ms": ("group.share.max.heartbeat.interval.ms", 1, 2**31 - 1),
    "assignment_interval_ms": ("group.share.assignment.interval.ms", 0, 15_000),
}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Share-group settings of the group coordinator; validated on construction."""

    max_size: int = 200
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignment_interval_ms: int = 1_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000

    def __post_init__(self) -> None:
        for name, (key, lo, hi) in _BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{key} ({name}) must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{key} ({name}) must be in [{lo}, {hi}], got {value}")
        for base, name in (("session.timeout.ms", "session_timeout_ms"),
                           ("heartbeat.interval.ms", "heartbeat_interval_ms")):
            value, lo, hi = getattr(self, name), getattr(self, "min_" + name), getattr(self, "max_" + name)
            key = f"group.share.{base}"
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{key} ({name}) must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{key} ({name}) must be in [{lo}, {hi}], got {value}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                "group.share.heartbeat.interval.ms (heartbeat_interval_ms) must be less than "
                f"group.share.session.timeout.ms (session_timeout_ms), got {self.heartbeat_interval_ms} >= "
                f"{self.session_timeout_ms}"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> "GroupConfig":
        """Build from Kafka broker property names (`group.share.max.size`, ...); values may be strings.

        Unknown keys raise `ValueError`, so a typo is not silently ignored.
        """
        by_key = {key: name for name, (key, _lo, _hi) in _BOUNDS.items()}
        by_key["group.share.session.timeout.ms"] = "session_timeout_ms"
        by_key["group.share.heartbeat.interval.ms"] = "heartbeat_interval_ms"
        return cls(**int_properties(properties, by_key, "group coordinator property"))

    def to_properties(self) -> dict[str, str]:
        """The Kafka broker properties equal to this configuration."""
        keys = {name: key for name, (key, _lo, _hi) in _BOUNDS.items()}
        keys.update(session_timeout_ms="group.share.session.timeout.ms",
                    heartbeat_interval_ms="group.share.heartbeat.interval.ms")
        return {keys[f.name]: str(getattr(self, f.name)) for f in fields(self)}
