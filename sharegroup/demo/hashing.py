"""Decisions as hashes, for both demos' workloads: `stable_hash64` of small integers (the same in every
process and run) and `rate_threshold`, the hash value below which an event of a given probability happens.
"""

from __future__ import annotations

__all__ = ["rate_threshold", "stable_hash64"]

_MASK_64 = (1 << 64) - 1


def stable_hash64(*parts: int) -> int:
    """A 64-bit hash of small integers (splitmix64 steps), the same in every process and run."""
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = ((h ^ (part & _MASK_64)) * 0xBF58476D1CE4E5B9) & _MASK_64
        h ^= h >> 31
        h = (h * 0x94D049BB133111EB) & _MASK_64
        h ^= h >> 29
    return h


def rate_threshold(rate: float) -> int:
    """The hash value below which an event of probability `rate` happens."""
    return min(int(rate * 2.0**64), 1 << 64)
