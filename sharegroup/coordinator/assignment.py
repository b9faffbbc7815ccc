"""Assignments as share and consumer groups hold them (topic id -> partitions), their record and API
forms, and the pool balancing both group types' assignors build on (`share/assignor.py`,
`consumer/assignors.py`).
"""

from __future__ import annotations

import uuid
from typing import Hashable, Iterable

from .records import TopicPartitions

__all__ = ["Assignment", "assignment_dict", "assignment_from_tuple", "assignment_tuple", "balance_pool"]

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


def assignment_tuple(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    """An assignment in record form: topics ascending by id, partitions ascending, no empty topics."""
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def assignment_from_tuple(entries: Iterable[TopicPartitions]) -> Assignment:
    return {t: frozenset(ps) for t, ps in entries if ps}


def assignment_dict(assignment: Assignment) -> dict[uuid.UUID, list[int]]:
    """An assignment as the API returns it: topics and partitions ascending."""
    return {t: sorted(ps) for t, ps in sorted(assignment.items())}


def balance_pool(
    members: list[str], pool: list[Hashable], held: dict[str, set], sharing: int | None = None
) -> dict[str, set]:
    """Balance one pool of partitions (in `pool` order) over `members` (sorted), starting from `held`
    (each a subset of the pool, modified in place and returned). Each partition goes to `sharing`
    members: ceil(M / P) for share groups, 1 for consumer groups (whose partitions are exclusive)."""
    n_members, n_partitions = len(members), len(pool)
    if n_partitions == 0:
        return {m: set() for m in members}
    if sharing is None:
        sharing = -(-n_members // n_partitions)
    slots = sharing * n_partitions
    # Larger quotas to the members that hold the most already: fewer partitions move.
    order = sorted(members, key=lambda m: (-len(held[m]), m))
    base, extra = divmod(slots, n_members)
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    holders: dict[Hashable, set[str]] = {item: set() for item in pool}
    for m in order:
        for item in held[m]:
            holders[item].add(m)
    position = {item: i for i, item in enumerate(pool)}

    # 1. Members above quota give up their most-shared partitions first, then their last ones.
    for m in order:
        excess = len(held[m]) - quota[m]
        if excess > 0:
            for item in sorted(held[m], key=lambda it: (-len(holders[it]), -position[it]))[:excess]:
                held[m].discard(item)
                holders[item].discard(m)
    # 2. Partitions held by more than `sharing` members shed the members holding the most.
    for item in pool:
        owners = holders[item]
        if len(owners) > sharing:
            for m in sorted(owners, key=lambda m: (-len(held[m]), m))[: len(owners) - sharing]:
                held[m].discard(item)
                owners.discard(m)
    # 3. Fill the free slots, one pass over the partitions, round-robin over members below quota.
    unfilled = [m for m in order if len(held[m]) < quota[m]]
    cursor = 0
    for item in pool:
        if not unfilled:
            break
        owners = holders[item]
        need = sharing - len(owners)
        skipped = 0
        while need > 0 and unfilled and skipped < len(unfilled):
            cursor %= len(unfilled)
            m = unfilled[cursor]
            if m in owners:
                cursor += 1
                skipped += 1
                continue
            held[m].add(item)
            owners.add(m)
            need -= 1
            skipped = 0
            if len(held[m]) >= quota[m]:
                unfilled.pop(cursor)  # the next member slides into `cursor`
            else:
                cursor += 1
    return held
