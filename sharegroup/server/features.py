"""The feature levels of `sharegroup serve` (Kafka's `kafka-features`), reported by ApiVersions v3+.

`share.version` is finalized at 2, as on a freshly formatted Kafka 4.4 cluster: level 2 turns on
dead-letter queues for share groups (KIP-1191). Nothing changes the levels (no UpdateFeatures), so the
finalized features epoch is 0 for the broker's life.
"""

from __future__ import annotations

__all__ = ["FEATURES", "FINALIZED_FEATURES_EPOCH", "SHARE_VERSION"]

# Feature name -> (min supported, max supported, finalized level).
FEATURES = {"share.version": (0, 2, 2)}
FINALIZED_FEATURES_EPOCH = 0
SHARE_VERSION = FEATURES["share.version"][2]
