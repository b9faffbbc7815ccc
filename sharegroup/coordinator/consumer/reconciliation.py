"""Reconciliation of one consumer-group member towards its target assignment (Kafka's
CurrentAssignmentBuilder), as a pure function of what the group knows.

The rule that makes partitions exclusive: a member is given a partition of its target only when no
other member holds it (assigned or pending revocation); until then the member waits in
UNRELEASED_PARTITIONS. A member whose target drops partitions it holds must first revoke them: it
stays at its epoch in UNREVOKED_PARTITIONS with those partitions pending revocation until a
heartbeat reports owned partitions without them (a heartbeat that does not report its owned
partitions counts as still owning them). Only then does it move to the target epoch.
"""

from __future__ import annotations

import uuid
from typing import Callable, Mapping, NamedTuple

from ..assignment import Assignment
from .group import MemberState

__all__ = ["Reconciled", "reconcile"]


class Reconciled(NamedTuple):
    """A member's next state: epoch, state, assigned partitions and partitions pending revocation."""

    member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    member_epoch: int,
    state: MemberState,
    assigned: Assignment,
    pending_revocation: Assignment,
    target_epoch: int,
    target: Assignment,
    owned_by_other: Callable[[uuid.UUID, int], bool],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> Reconciled:
    """The member's next state. `owned_by_other(topic, partition)` says whether some other member
    holds a partition; `owned` is what the member's heartbeat reports owning (None: not reported)."""
    current = Reconciled(member_epoch, state, assigned, pending_revocation)
    if state is MemberState.STABLE:
        if member_epoch == target_epoch:
            return current
        return _next(member_epoch, assigned, target_epoch, target, owned_by_other, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, pending_revocation):
            return current
        return _next(member_epoch + 1, assigned, target_epoch, target, owned_by_other, owned)
    return _next(member_epoch, assigned, target_epoch, target, owned_by_other, owned)


def _owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    return any(partitions.get(t, frozenset()) & ps for t, ps in owned.items())


def _next(
    member_epoch: int,
    assigned: Assignment,
    target_epoch: int,
    target: Assignment,
    owned_by_other: Callable[[uuid.UUID, int], bool],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> Reconciled:
    new_assigned: Assignment = {}
    revoke: Assignment = {}
    to_assign: Assignment = {}
    unreleased = False
    for topic_id in set(target) | set(assigned):
        wanted = target.get(topic_id, frozenset())
        have = assigned.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            new_assigned[topic_id] = keep
        if have - keep:
            revoke[topic_id] = have - keep
        free = frozenset(p for p in wanted - keep if not owned_by_other(topic_id, p))
        unreleased = unreleased or len(free) < len(wanted - keep)
        if free:
            to_assign[topic_id] = free
    if revoke and _owns_any(owned, revoke):
        # Keep the epoch and wait for the member to give these up.
        return Reconciled(member_epoch, MemberState.UNREVOKED_PARTITIONS, new_assigned, revoke)
    for topic_id, partitions in to_assign.items():
        new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(target_epoch, state, new_assigned, {})
