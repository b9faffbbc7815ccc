"""The simple assignor for share groups: spread partitions over members, sharing a partition among
several members when members outnumber partitions (KIP-932).

Homogeneous subscriptions (every member subscribes to the same assignable topics) are balanced over the
pool of all their partitions; heterogeneous ones are balanced topic by topic among the members
subscribed to each topic. Within one pool of P partitions and M members (`assignment.balance_pool`):

- every partition is held by `sharing = ceil(M / P)` members, so `sharing * P` slots are handed out;
- each member's quota is the floor or the ceiling of `sharing * P / M`; the larger quotas go to the
  members that already hold the most, which keeps assignments stable;
- a member keeps what it held (up to its quota, dropping the most-shared partitions first), a partition
  held by more than `sharing` members sheds the members that hold the most, and the free slots are
  filled by a round-robin over the members still below their quota that continues across partitions.

So for one pool every partition gets a member and every member gets a partition (when P >= 1), and when
P >= M the quotas are met exactly (member counts differ by at most one). When P < M a partition's last
slot may stay empty if every member still below quota already holds it; that imbalance is tolerated.
Runtime complexity: O(P * sharing + M log M + size of `current`) per pool.
"""

from __future__ import annotations

import uuid
from typing import Collection, Iterable, Mapping

from ..assignment import balance_pool

__all__ = ["simple_assign"]


def simple_assign(
    members: Mapping[str, Collection[uuid.UUID]],
    topics: Mapping[uuid.UUID, int | Collection[int]],
    current: Mapping[str, Mapping[uuid.UUID, Iterable[int]]] | None = None,
) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Assign the partitions of `topics` to `members`; keep `current` where it is still valid.

    `members` maps member id -> subscribed topic ids; `topics` maps topic id -> a partition count
    (partitions 0..n-1) or the exact collection of assignable partitions; topics a member subscribes to
    that are not in `topics` are ignored. Returns member id -> topic id -> ascending partitions, with an
    entry (possibly empty) for every member and no empty topic lists.
    """
    pools: dict[uuid.UUID, tuple[int, ...]] = {}
    for topic_id, spec in topics.items():
        if isinstance(spec, bool):
            raise ValueError(f"topic {topic_id}: partitions must be a count or a collection, got {spec!r}")
        if isinstance(spec, int):
            if spec < 0:
                raise ValueError(f"topic {topic_id}: negative partition count {spec}")
            parts: tuple[int, ...] = tuple(range(spec))
        else:
            if any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in spec):
                raise ValueError(f"topic {topic_id}: partitions must be ints >= 0, got {spec!r}")
            parts = tuple(sorted(set(spec)))
        if parts:
            pools[topic_id] = parts
    subscriptions = {m: frozenset(t for t in subscribed if t in pools) for m, subscribed in members.items()}
    current = current or {}
    result: dict[str, dict[uuid.UUID, list[int]]] = {member_id: {} for member_id in members}
    if not subscriptions:
        return result
    distinct = set(subscriptions.values())
    if len(distinct) == 1:
        (topic_ids,) = distinct
        order = sorted(topic_ids)
        pool = [(t, p) for t in order for p in pools[t]]
        pool_set = set(pool)
        held = {
            m: {(t, p) for t, ps in current.get(m, {}).items() if t in topic_ids for p in ps} & pool_set
            for m in subscriptions
        }
        for m, items in balance_pool(sorted(subscriptions), pool, held).items():
            out = result[m]
            for t, p in sorted(items):
                out.setdefault(t, []).append(p)
        return result
    for topic_id in sorted(pools):
        subscribers = sorted(m for m, subscribed in subscriptions.items() if topic_id in subscribed)
        if not subscribers:
            continue
        pool_t = list(pools[topic_id])
        pool_set_t = set(pool_t)
        held_t = {m: set(current.get(m, {}).get(topic_id, ())) & pool_set_t for m in subscribers}
        for m, items in balance_pool(subscribers, pool_t, held_t).items():
            if items:
                result[m][topic_id] = sorted(items)
    return result
