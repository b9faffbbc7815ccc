"""Group coordinator settings for KIP-848 consumer groups, with Kafka's keys, defaults and bounds.

Kafka's `group.consumer.*` broker configs: the session timeout (45 s, within
`group.consumer.{min,max}.session.timeout.ms` = 45-60 s), the heartbeat interval (5 s, within 5-15 s,
below the session timeout), the maximum group size (unbounded: Integer.MAX_VALUE) and the server-side
assignors (`uniform,range`; the first is the default when a member names none). Bad values raise
`ValueError` naming the Kafka key, so a misconfigured broker fails at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .assignors import ASSIGNORS, DEFAULT_ASSIGNORS

__all__ = ["ConsumerGroupConfig"]

_INT32_MAX = 2**31 - 1

# field -> Kafka key
KEYS: dict[str, str] = {
    "max_size": "group.consumer.max.size",
    "session_timeout_ms": "group.consumer.session.timeout.ms",
    "min_session_timeout_ms": "group.consumer.min.session.timeout.ms",
    "max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
    "heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "min_heartbeat_interval_ms": "group.consumer.min.heartbeat.interval.ms",
    "max_heartbeat_interval_ms": "group.consumer.max.heartbeat.interval.ms",
    "assignors": "group.consumer.assignors",
}


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Consumer-group settings of the group coordinator; validated on construction."""

    max_size: int = _INT32_MAX
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS

    def __post_init__(self) -> None:
        for name, key in KEYS.items():
            value = getattr(self, name)
            if name == "assignors":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _INT32_MAX:
                raise ValueError(f"{key} ({name}) must be an integer in [1, {_INT32_MAX}], got {value!r}")
        for base in ("session_timeout_ms", "heartbeat_interval_ms"):
            value, lo, hi = getattr(self, base), getattr(self, "min_" + base), getattr(self, "max_" + base)
            if not lo <= value <= hi:
                raise ValueError(f"{KEYS[base]} ({base}) must be in [{lo}, {hi}], got {value}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"{KEYS['heartbeat_interval_ms']} must be less than {KEYS['session_timeout_ms']}, "
                             f"got {self.heartbeat_interval_ms} >= {self.session_timeout_ms}")
        if isinstance(self.assignors, str) or not self.assignors or len(set(self.assignors)) != len(self.assignors):
            raise ValueError(f"{KEYS['assignors']} must be a non-empty list of distinct names, got {self.assignors!r}")
        unknown = [a for a in self.assignors if a not in ASSIGNORS]
        if unknown:
            raise ValueError(f"{KEYS['assignors']}: unknown assignor {unknown[0]!r} "
                             f"(known: {', '.join(sorted(ASSIGNORS))})")

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]
