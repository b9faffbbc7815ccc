"""The server-side assignors of KIP-848 consumer groups: `uniform` (the default) and `range`.

A consumer group's partitions are exclusive: every partition of a subscribed topic goes to exactly
one member subscribed to it (members may get none when they outnumber the partitions).

- `uniform` balances the number of partitions per member and keeps a member's current target where
  it can (sticky). With homogeneous subscriptions it is the share assignor's pool balancing with one
  member per partition, so counts differ by at most one. With heterogeneous subscriptions each
  partition still goes only to a subscriber: the members keep what they hold, free partitions go to
  the least loaded subscriber (topics with fewer subscribers first), then partitions move from the
  most to the least loaded subscriber until no move narrows the gap.
- `range` gives each member, topic by topic, a contiguous range: the subscribers of a topic sorted
  by member id, each gets P // M partitions and the first P % M one more. Members subscribed to the
  same topics with the same partition counts get the same indexes of each (co-partitioning). It is
  not sticky.

Runtime complexity: uniform O(P log P + M log M) with homogeneous subscriptions; with heterogeneous
ones O(P * M) for the first placement and O(P * M) per balancing move, each move narrowing the spread
(fine for the tens of members and thousands of partitions of a test broker, not tuned beyond); range
O(P + M log M) per topic.
"""

from __future__ import annotations

import uuid
from typing import Callable, Collection, Mapping

from ..assignment import balance_pool

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNORS", "range_assign", "uniform_assign"]

Members = Mapping[str, Collection[uuid.UUID]]
Topics = Mapping[uuid.UUID, int]
Current = Mapping[str, Mapping[uuid.UUID, Collection[int]]]
Result = dict[str, dict[uuid.UUID, list[int]]]


def uniform_assign(members: Members, topics: Topics, current: Current | None = None) -> Result:
    """Assign every partition of `topics` (topic id -> partition count) to one subscriber among
    `members` (member id -> subscribed topic ids), balanced and sticky to `current`."""
    current = current or {}
    subscriptions = {m: frozenset(t for t in subs if topics.get(t, 0) > 0) for m, subs in members.items()}
    result: Result = {m: {} for m in members}
    if len(set(subscriptions.values())) == 1:
        (topic_ids,) = set(subscriptions.values())
        pool = [(t, p) for t in sorted(topic_ids) for p in range(topics[t])]
        pool_set = set(pool)
        held = {m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} & pool_set for m in subscriptions}
        _drop_double_holders(held)
        for m, items in balance_pool(sorted(subscriptions), pool, held, sharing=1).items():
            for t, p in sorted(items):
                result[m].setdefault(t, []).append(p)
        return result
    return _heterogeneous(subscriptions, topics, current, result)


def _drop_double_holders(held: dict[str, set]) -> None:
    """A current assignment is exclusive; if it is not, the first member (by id) keeps the partition."""
    seen: set = set()
    for m in sorted(held):
        held[m] -= seen
        seen |= held[m]


def _heterogeneous(subscriptions: dict[str, frozenset[uuid.UUID]], topics: Topics, current: Current,
                   result: Result) -> Result:
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in sorted(subscriptions):
        for t in subscriptions[m]:
            subscribers.setdefault(t, []).append(m)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for m in sorted(subscriptions):
        for t, ps in current.get(m, {}).items():
            if t in subscriptions[m]:
                for p in ps:
                    if 0 <= p < topics[t]:
                        owner.setdefault((t, p), m)
    count = {m: 0 for m in subscriptions}
    for m in owner.values():
        count[m] += 1
    for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        for p in range(topics[t]):
            if (t, p) not in owner:
                m = min(subscribers[t], key=lambda m: (count[m], m))
                owner[(t, p)] = m
                count[m] += 1
    # Balance: move a partition from a member to a less loaded subscriber while that narrows the gap
    # by at least two. Each move lowers sum(count^2), so the loop ends; it is bounded anyway.
    for _ in range(len(owner) * max(1, len(subscriptions))):
        best = None
        for (t, p), m in sorted(owner.items()):
            target = min(subscribers[t], key=lambda x: (count[x], x))
            if count[target] + 1 < count[m] and (best is None or count[m] - count[target] > best[0]):
                best = (count[m] - count[target], (t, p), m, target)
        if best is None:
            break
        _gap, tp, source, target = best
        owner[tp] = target
        count[source] -= 1
        count[target] += 1
    for (t, p), m in sorted(owner.items()):
        result[m].setdefault(t, []).append(p)
    return result


def range_assign(members: Members, topics: Topics, current: Current | None = None) -> Result:
    """Per topic, contiguous ranges over the subscribers sorted by member id (`current` is unused)."""
    result: Result = {m: {} for m in members}
    by_topic: dict[uuid.UUID, list[str]] = {}
    for m in sorted(members):
        for t in members[m]:
            if topics.get(t, 0) > 0:
                by_topic.setdefault(t, []).append(m)
    for t, subs in sorted(by_topic.items()):
        base, extra = divmod(topics[t], len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = base + (1 if i < extra else 0)
            if n:
                result[m][t] = list(range(start, start + n))
            start += n
    return result


Assignor = Callable[[Members, Topics, "Current | None"], Result]
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNORS: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
