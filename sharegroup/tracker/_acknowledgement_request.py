"""The acknowledgement request parser of the pure tracker.

Layer 1. The Cython twin's counterpart is `_native/acknowledgement_request.pxi`.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import Errors, ShareError
from ..types import AcknowledgeType

_ACKNOWLEDGE_TYPE_IDS = frozenset(int(t) for t in AcknowledgeType)


def parse_acknowledgement_request(batches: Sequence[Sequence]) -> list[tuple[int, int, tuple]]:
    """Check an acknowledgement request as Kafka's broker does before the leader sees it.

    Raises `ShareError` (INVALID_REQUEST) for a malformed batch, offsets that are not integers,
    first > last, batches not ascending and disjoint, an empty or wrongly sized types tuple, or an
    unknown type; otherwise returns one (first, last, types) per batch.
    Runtime complexity: O(batches + acknowledge types).
    """
    plan: list[tuple[int, int, tuple]] = []
    prev_last = -1
    for ab in batches:
        try:
            first, last, types = ab[0], ab[1], ab[2]
        except (TypeError, IndexError):
            raise ShareError(Errors.INVALID_REQUEST, f"malformed acknowledgement batch {ab!r}") from None
        if not isinstance(first, int) or not isinstance(last, int) or isinstance(first, bool):
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement offsets must be integers: {ab!r}")
        if first < 0 or first > last:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement batch first offset {first} > last offset {last}")
        if plan and first <= prev_last:
            raise ShareError(
                Errors.INVALID_REQUEST,
                f"acknowledgement batches must be ascending and disjoint ({first} <= {prev_last})",
            )
        if isinstance(types, int):
            types = (types,)
        try:
            types = tuple(types)
        except TypeError:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledge types must be a tuple of ints: {ab!r}") from None
        if not types:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement batch {first}-{last} has no acknowledge types")
        if len(types) != 1 and len(types) != last - first + 1:
            raise ShareError(
                Errors.INVALID_REQUEST,
                f"acknowledgement batch {first}-{last} has {len(types)} types for {last - first + 1} offsets",
            )
        for t in types:
            if not isinstance(t, int) or isinstance(t, bool) or t not in _ACKNOWLEDGE_TYPE_IDS:
                raise ShareError(Errors.INVALID_REQUEST, f"unknown acknowledge type {t!r}")
        plan.append((first, last, tuple(int(t) for t in types)))
        prev_last = last
    return plan
