"""Topic metadata as the group coordinator sees it: names -> (topic id, partition count), and log ends.

The coordinator pulls metadata through `TopicsLookup` on every heartbeat; a change in a topic the
group subscribes to (created, deleted, recreated with a new id, resized) changes the group's metadata
hash and bumps the group epoch, and share-partitions of topics that are gone are dropped.
`InMemoryTopics` is a small implementation for tests
and the demo.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Mapping, NamedTuple, Protocol, runtime_checkable

from ..errors import Errors, ShareError

__all__ = ["TopicInfo", "TopicsLookup", "InMemoryTopics", "metadata_hash"]


class TopicInfo(NamedTuple):
    """One topic of the cluster metadata."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@runtime_checkable
class TopicsLookup(Protocol):
    """What the coordinator needs to know about topics: each topic by name and by id (so `alter_offsets`
    can set offsets of a topic the group has never consumed), every name (for consumer groups that
    subscribe by regular expression), and log end offsets (for lag)."""

    def lookup(self, name: str) -> TopicInfo | None: ...

    def lookup_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def names(self) -> list[str]: ...

    def latest_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        """The log end offset of a partition (for lag); raises ShareError when it cannot be known."""
        ...


class InMemoryTopics:
    """A mutable topic catalogue with log end offsets, for tests and the demo."""

    def __init__(self) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._latest: dict[tuple[uuid.UUID, int], int] = {}

    def create_topic(self, name: str, num_partitions: int, topic_id: uuid.UUID | None = None) -> TopicInfo:
        """Create `name` with partitions 0..num_partitions-1 (a new random id unless one is given)."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a topic name must be a non-blank string, got {name!r}")
        if name in self._by_name:
            raise ValueError(f"topic {name!r} already exists")
        _check_count(num_partitions)
        info = TopicInfo(topic_id if topic_id is not None else uuid.uuid4(), name, num_partitions)
        if info.topic_id in self._by_id:
            raise ValueError(f"topic id {info.topic_id} already exists")
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        return info

    def set_partitions(self, name: str, num_partitions: int) -> TopicInfo:
        """Change the partition count of `name` (Kafka only grows topics; tests may also shrink them)."""
        old = self._by_name[name]
        _check_count(num_partitions)
        info = old._replace(num_partitions=num_partitions)
        self._by_name[name] = info
        self._by_id[info.topic_id] = info
        return info

    def delete_topic(self, name: str) -> None:
        info = self._by_name.pop(name)
        del self._by_id[info.topic_id]
        for key in [k for k in self._latest if k[0] == info.topic_id]:
            del self._latest[key]

    def set_latest_offset(self, topic_id: uuid.UUID, partition: int, offset: int) -> None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"a log end offset must be an int >= 0, got {offset!r}")
        self._latest[(topic_id, partition)] = offset

    # -- TopicsLookup ----------------------------------------------------------------------------------

    def lookup(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def lookup_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return list(self._by_name)

    def latest_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        info = self._by_id.get(topic_id)
        if info is None or not 0 <= partition < info.num_partitions:
            raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {partition} of topic {topic_id}")
        return self._latest.get((topic_id, partition), 0)


def _check_count(num_partitions: int) -> None:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 0:
        raise ValueError(f"a partition count must be an int >= 0, got {num_partitions!r}")


def metadata_hash(image: Mapping[str, TopicInfo]) -> int:
    """A stable signed 64-bit hash of the topics a group subscribes to (Kafka's MetadataHash): it
    changes when any of them is created, deleted, recreated with a new id or resized. 0 for no topics.
    Stable across processes (Python's own `hash` of a str is not), so it can be persisted."""
    if not image:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(image):
        info = image[name]
        digest.update(f"{name}\x00{info.topic_id.hex}\x00{info.num_partitions}\x01".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)
