"""Share sessions: the partitions a member fetches from this broker, and the epoch that orders its requests.

Kafka's `ShareSessionCache`, `ShareSession` and share-session contexts. A session is keyed by
(group id, member id). Epoch rules (as Kafka's):

- ShareFetch at epoch 0 opens a session (replacing one the member had; that session's acquired records
  are *not* released) listing the request's partitions; acknowledgements at epoch 0 are INVALID_REQUEST;
  a full cache answers SHARE_SESSION_LIMIT_REACHED.
- Any later request carries exactly the epoch the broker expects (the last one + 1, wrapping from
  2^31-1 to 1, never back to 0), else INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND.
  Each accepted ShareFetch *and* ShareAcknowledge moves the expected epoch on.
- Epoch -1 (final) needs a session; the manager closes it after the request's acknowledgements.
- ShareAcknowledge at epoch 0 is INVALID_SHARE_SESSION_EPOCH.

A session belongs to the connection that opened it (Kafka keys its disconnect tracking by connection id):
when that connection closes, `connection_closed` removes the sessions it still owns and nothing else. A
member that re-opened its session on a new connection keeps it, whenever the old connection's close is
handled.

A subsequent ShareFetch fetches every partition of the session; its response lists only partitions
with records, with an error, or flagged for an update (newly added, or recovered from an error).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Iterable

from ..errors import Errors, ShareError
from ..share_messages import FINAL_EPOCH, INITIAL_EPOCH

__all__ = [
    "ContextKind",
    "ShareFetchContext",
    "ShareSession",
    "ShareSessionCache",
    "TopicPartition",
    "next_epoch",
]

MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]


def next_epoch(epoch: int) -> int:
    """The epoch that follows `epoch` (Kafka's ShareRequestMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1


class ShareSession:
    """One member's share session: its partitions in fetch order, each with an update-in-response flag.

    `partitions` maps (topic id, partition) to `requires_update_in_response`: a partition added by a
    subsequent request, or one whose last response carried an error, is listed in the next response even
    without records, so the client learns the outcome once.
    """

    __slots__ = ("key", "epoch", "partitions", "connection_id")

    def __init__(self, key: SessionKey, partitions: Iterable[TopicPartition], connection_id: str | None = None) -> None:
        self.key = key
        self.connection_id = connection_id  # the connection that opened it (None: an embedder without one)
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.partitions: dict[TopicPartition, bool] = dict.fromkeys(partitions, False)

    @property
    def group_id(self) -> str:
        return self.key[0]

    @property
    def member_id(self) -> str:
        return self.key[1]

    def update(self, requested: Iterable[TopicPartition], forgotten: Iterable[TopicPartition]) -> None:
        """Add the requested partitions not yet in the session (flagged for the response), then drop the
        forgotten ones (adds run first, as in Kafka)."""
        partitions = self.partitions
        for tp in requested:
            if tp not in partitions:
                partitions[tp] = True
        for tp in forgotten:
            partitions.pop(tp, None)

    def _check(self) -> None:
        assert self.epoch == FINAL_EPOCH or 1 <= self.epoch <= MAX_EPOCH, self.epoch


class ContextKind(enum.Enum):
    FULL = "full"  # epoch 0: the request lists every partition; the response lists every partition
    SUBSEQUENT = "subsequent"  # fetch the whole session; list only what changed
    FINAL = "final"  # epoch -1: fetch nothing; the session closes after the acknowledgements


@dataclass(slots=True)
class ShareFetchContext:
    """How one ShareFetch relates to its session: what to fetch and which partitions to list."""

    kind: ContextKind
    request_epoch: int
    session: ShareSession | None
    fetch_partitions: list[TopicPartition]

    def is_current(self, cache: "ShareSessionCache") -> Errors:
        """NONE while the session this request opened or advanced is still the member's current session
        at the epoch this request set; otherwise the top-level error its response must carry (a
        concurrent request moved the epoch, or the session was closed or replaced meanwhile)."""
        if self.kind is ContextKind.FINAL:
            return Errors.NONE
        session = self.session
        assert session is not None
        if cache.get(*session.key) is not session:
            return Errors.SHARE_SESSION_NOT_FOUND
        if session.epoch != next_epoch(self.request_epoch):
            return Errors.INVALID_SHARE_SESSION_EPOCH
        return Errors.NONE

    def listed(self, tp: TopicPartition, has_records: bool, has_error: bool) -> bool:
        """Whether the response lists partition `tp`, updating the session's flags and order as Kafka's
        `maybeUpdateResponseData` does. Call once per fetched partition, in fetch order."""
        if self.kind is ContextKind.FULL:
            return True
        if self.kind is ContextKind.FINAL:
            return False
        partitions = self.session.partitions  # type: ignore[union-attr]
        flagged = partitions.get(tp)
        if flagged is None:  # forgotten by a concurrent request: list it only if it carries something
            return has_records or has_error
        if has_error:
            partitions[tp] = True  # re-sent once after the error clears
            return True
        if has_records:
            partitions[tp] = False
            del partitions[tp]  # a partition that returned records moves to the end of the session
            partitions[tp] = False
            return True
        if flagged:
            partitions[tp] = False
            return True
        return False


class ShareSessionCache:
    """Every share session of this broker, bounded by `group.share.max.share.sessions`.

    Sessions leave by re-opening at epoch 0, by a final-epoch request, when the member leaves or expires
    (`remove`), when its group is deleted (`remove_group`), when the connection that opened them closes
    (`connection_closed`) or when the broker closes. All operations are O(1) except `remove_group`
    (O(sessions of the group)), `connection_closed` (O(sessions of the connection)) and `partition_count`
    (O(sessions)).
    """

    def __init__(self, max_entries: int) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"group.share.max.share.sessions must be an integer >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._sessions: dict[SessionKey, ShareSession] = {}
        self._members: dict[str, set[str]] = {}
        # connection id -> the sessions it opened and still owns (bounded by the sessions themselves)
        self._connections: dict[str, set[SessionKey]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partition_count(self) -> int:
        """Partitions over all sessions (Kafka's SharePartitionsCount gauge)."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def members_of(self, group_id: str) -> list[str]:
        return sorted(self._members.get(group_id, ()))

    def new_fetch_context(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        requested: list[TopicPartition],
        forgotten: list[TopicPartition],
        ack_present: bool,
        connection_id: str | None = None,
    ) -> ShareFetchContext:
        """Apply a ShareFetch's epoch to the cache (Kafka's `newContext`); raises ShareError with the
        top-level error and leaves the cache unchanged when the request is refused. A session opened at
        epoch 0 belongs to `connection_id` from this moment on (before any fetching or long polling)."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self._sessions.get(key)
            if session is None:
                raise ShareError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
            return ShareFetchContext(ContextKind.FINAL, epoch, session, [])
        if epoch == INITIAL_EPOCH:
            if ack_present:
                raise ShareError(Errors.INVALID_REQUEST, "acknowledgements are not allowed at share session epoch 0")
            replaced = key in self._sessions
            if not replaced and len(self._sessions) >= self.max_entries:
                raise ShareError(
                    Errors.SHARE_SESSION_LIMIT_REACHED,
                    f"the broker holds {len(self._sessions)} share sessions (group.share.max.share.sessions)",
                )
            if replaced:
                self.remove(group_id, member_id)
            session = self._sessions[key] = ShareSession(key, requested, connection_id)
            self._members.setdefault(group_id, set()).add(member_id)
            if connection_id is not None:
                self._connections.setdefault(connection_id, set()).add(key)
            return ShareFetchContext(ContextKind.FULL, epoch, session, list(session.partitions))
        session = self._sessions.get(key)
        if session is None:
            raise ShareError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        if session.epoch != epoch:
            raise ShareError(
                Errors.INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch}, expected {session.epoch}"
            )
        session.update(requested, forgotten)
        session.epoch = next_epoch(epoch)
        return ShareFetchContext(ContextKind.SUBSEQUENT, epoch, session, list(session.partitions))

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """Apply a ShareAcknowledge's epoch (Kafka's `acknowledgeSessionUpdate`); raises ShareError."""
        if epoch == INITIAL_EPOCH:
            raise ShareError(Errors.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session")
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise ShareError(
                Errors.INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch}, expected {session.epoch}"
            )
        session.epoch = next_epoch(epoch)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            members = self._members[group_id]
            members.discard(member_id)
            if not members:
                del self._members[group_id]
            owner = session.connection_id
            if owner is not None:
                owned = self._connections[owner]
                owned.discard(session.key)
                if not owned:
                    del self._connections[owner]
        return session

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """Remove and return the sessions `connection_id` opened and still owns. A session the member
        re-opened on another connection meanwhile belongs to that connection and is left alone."""
        keys = sorted(self._connections.get(connection_id, ()))
        return [s for key in keys if (s := self.remove(*key)) is not None]

    def remove_group(self, group_id: str) -> list[ShareSession]:
        return [s for m in self.members_of(group_id) if (s := self.remove(group_id, m)) is not None]

    def clear(self) -> None:
        self._sessions.clear()
        self._members.clear()
        self._connections.clear()

    def _check(self) -> None:
        assert len(self._sessions) <= self.max_entries, (len(self._sessions), self.max_entries)
        assert sum(len(m) for m in self._members.values()) == len(self._sessions)
        for (group_id, member_id), session in self._sessions.items():
            assert member_id in self._members[group_id]
            assert session.key == (group_id, member_id)
            assert session.connection_id is None or session.key in self._connections[session.connection_id]
            session._check()
        owned = [(connection_id, key) for connection_id, keys in self._connections.items() for key in keys]
        assert all(self._sessions[key].connection_id == connection_id for connection_id, key in owned), owned
