"""Kafka 4.x's topic-level configs (LogConfig's keys): type, default, broker synonyms, bounds, a short doc.

`TOPIC_CONFIG_DEFS` lists every non-internal topic config a Kafka 4.x broker describes for a topic (no
`message.format.version`, `message.downconversion.enable` or `message.timestamp.difference.max.ms`: 4.0
removed them). Each def can `parse` a CreateTopics / IncrementalAlterConfigs value as Kafka's ConfigDef
parses it (INVALID_CONFIG with Kafka's "Invalid value V for configuration K: ..." message) and render it
as DescribeConfigs shows it. `broker_keys` are the broker configs a topic inherits its default from, in
Kafka's precedence order (e.g. `log.retention.ms`, `.minutes`, `.hours`); the first names the synonym.
`broker_defaults` are Kafka's own defaults of those broker keys (None: the key has no default).

Which of these keys `sharegroup serve` acts on, and which it only accepts and describes, is in
`docs/topic-store.md` ("Topic configs").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sharegroup.errors import Errors, ShareError

__all__ = ["CONFIG_TYPE_IDS", "TOPIC_CONFIG_DEFS", "TopicConfigDef", "java_double_text"]

INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1
# Kafka's DescribeConfigs ConfigType ids
CONFIG_TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_THROTTLED = re.compile(r"^(\*|\s*\d+\s*:\s*\d+\s*(,\s*\d+\s*:\s*\d+\s*)*)?$")


def java_double_text(value: float) -> str:
    """A double as Java's `Double.toString` writes the plain cases (0.5, 1.0); DescribeConfigs shows that."""
    return repr(float(value))


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One topic config: Kafka's type (`int`, `long`, `double`, `boolean`, `string`, `list`), default (as
    DescribeConfigs shows it), broker synonyms (first one names it) with their Kafka defaults, bounds."""

    name: str
    type: str
    default: str
    broker_keys: tuple[str, ...] = ()
    broker_defaults: tuple[str | None, ...] = ()
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    @property
    def config_type(self) -> int:
        return CONFIG_TYPE_IDS[self.type]

    def _invalid(self, raw: Any, why: str) -> ShareError:
        return ShareError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {self.name}: {why}")

    def parse(self, raw: Any) -> str:
        """Check `raw` as Kafka's ConfigDef does and return it as DescribeConfigs shows it."""
        text = str(raw).strip()
        if self.type in ("int", "long", "double"):
            return self._number(raw, text)
        if self.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise self._invalid(raw, "Expected value to be either true or false")
            return text.lower()
        if self.type == "list":
            items = [item.strip() for item in text.split(",")] if text else []
            if self.name.endswith(".throttled.replicas"):
                if not _THROTTLED.match(text):
                    raise self._invalid(raw, "must be the literal '*' or a list of replicas in the following "
                                             "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
            for item in items:  # Kafka names the first element it refuses, not the whole list
                if self.choices and item not in self.choices:
                    raise self._invalid(item, f"String must be one of: {', '.join(self.choices)}")
            return ",".join(items)
        if self.choices and text not in self.choices:
            raise self._invalid(raw, f"String must be one of: {', '.join(self.choices)}")
        return text

    def _number(self, raw: Any, text: str) -> str:
        kind = self.type.upper()
        pattern = r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?" if self.type == "double" else r"[+-]?\d+"
        if not re.fullmatch(pattern, text):
            raise self._invalid(raw, f"Not a number of type {kind}")
        value: float = float(text) if self.type == "double" else int(text)
        top = INT_MAX if self.type == "int" else LONG_MAX
        if self.type != "double" and not -top - 1 <= value <= top:
            raise self._invalid(raw, f"Not a number of type {kind}")
        if self.name == "compression.gzip.level" and value != -1 and not 1 <= value <= 9:
            raise self._invalid(raw, "Value must be between 1 and 9 or equal to -1")
        if self.min is not None and value < self.min:
            raise self._invalid(raw, f"Value must be at least {_bound(self.min)}")
        if self.max is not None and value > self.max:
            raise self._invalid(raw, f"Value must be no more than {_bound(self.max)}")
        return java_double_text(value) if self.type == "double" else str(value)


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _d(name: str, type_: str, default: str, broker: tuple[tuple[str, str | None], ...] = (), min: float | None = None,
       max: float | None = None, choices: tuple[str, ...] = (), doc: str = "") -> TopicConfigDef:
    return TopicConfigDef(name, type_, default, tuple(k for k, _ in broker), tuple(v for _, v in broker),
                          min, max, choices, doc)


_L = str(LONG_MAX)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _d("cleanup.policy", "list", "delete", (("log.cleanup.policy", "delete"),), choices=("compact", "delete"),
       doc="What happens to old segments: 'delete' drops them by retention, 'compact' keeps each key's last record."),
    _d("compression.gzip.level", "int", "-1", (("compression.gzip.level", "-1"),),
       doc="The gzip level used when compression.type is gzip (1-9, or -1 for the codec's default)."),
    _d("compression.lz4.level", "int", "9", (("compression.lz4.level", "9"),), 1, 17,
       doc="The lz4 level used when compression.type is lz4."),
    _d("compression.type", "string", "producer", (("compression.type", "producer"),), choices=_COMPRESSION,
       doc="The codec batches are stored with; 'producer' keeps each batch as its producer compressed it."),
    _d("compression.zstd.level", "int", "3", (("compression.zstd.level", "3"),), -131072, 22,
       doc="The zstd level used when compression.type is zstd."),
    _d("delete.retention.ms", "long", "86400000", (("log.cleaner.delete.retention.ms", "86400000"),), 0,
       doc="How long a compacted topic keeps delete tombstones."),
    _d("errors.deadletterqueue.group.enable", "boolean", "false",
       doc="Whether share groups may write dead-letter records to this topic (KIP-1191): a topic opts in to "
           "being a dead-letter queue."),
    _d("file.delete.delay.ms", "long", "60000", (("log.segment.delete.delay.ms", "60000"),), 0,
       doc="How long a deleted segment file waits before it is removed from disk."),
    _d("flush.messages", "long", _L, (("log.flush.interval.messages", _L),), 1,
       doc="Force an fsync of the log after this many messages."),
    _d("flush.ms", "long", _L, (("log.flush.interval.ms", None), ("log.flush.scheduler.interval.ms", _L)), 0,
       doc="Force an fsync of the log when this much time has passed since the last one."),
    _d("follower.replication.throttled.replicas", "list", "",
       doc="Replicas (partition:broker, or *) whose replication is throttled on the follower side."),
    _d("index.interval.bytes", "int", "4096", (("log.index.interval.bytes", "4096"),), 0,
       doc="How many bytes of records lie between two offset index entries."),
    _d("leader.replication.throttled.replicas", "list", "",
       doc="Replicas (partition:broker, or *) whose replication is throttled on the leader side."),
    _d("local.retention.bytes", "long", "-2", (("log.local.retention.bytes", "-2"),), -2,
       doc="With tiered storage, the local size limit of a partition; -2 means retention.bytes."),
    _d("local.retention.ms", "long", "-2", (("log.local.retention.ms", "-2"),), -2,
       doc="With tiered storage, how long segments stay on local disk; -2 means retention.ms."),
    _d("max.compaction.lag.ms", "long", _L, (("log.cleaner.max.compaction.lag.ms", _L),), 1,
       doc="The longest a record may stay uncompacted in a compacted topic."),
    _d("max.message.bytes", "int", "1048588", (("message.max.bytes", "1048588"),), 0,
       doc="The largest record batch a producer may append to this topic."),
    _d("message.timestamp.after.max.ms", "long", "3600000", (("log.message.timestamp.after.max.ms", "3600000"),), 0,
       doc="How far ahead of the broker's clock a CreateTime record timestamp may be."),
    _d("message.timestamp.before.max.ms", "long", _L, (("log.message.timestamp.before.max.ms", _L),), 0,
       doc="How far behind the broker's clock a CreateTime record timestamp may be."),
    _d("message.timestamp.type", "string", "CreateTime", (("log.message.timestamp.type", "CreateTime"),),
       choices=("CreateTime", "LogAppendTime"),
       doc="Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."),
    _d("min.cleanable.dirty.ratio", "double", "0.5", (("log.cleaner.min.cleanable.ratio", "0.5"),), 0, 1,
       doc="The share of uncompacted log that makes a compacted topic eligible for cleaning."),
    _d("min.compaction.lag.ms", "long", "0", (("log.cleaner.min.compaction.lag.ms", "0"),), 0,
       doc="The shortest time a record stays uncompacted in a compacted topic."),
    _d("min.insync.replicas", "int", "1", (("min.insync.replicas", "1"),), 1,
       doc="How many in-sync replicas an acks=all write needs."),
    _d("preallocate", "boolean", "false", (("log.preallocate", "false"),),
       doc="Whether a new segment file is preallocated on disk."),
    _d("remote.log.copy.disable", "boolean", "false",
       doc="With tiered storage, stop copying segments to remote storage (remote data becomes read-only)."),
    _d("remote.log.delete.on.disable", "boolean", "false",
       doc="With tiered storage, delete the remote data when remote.storage.enable is turned off."),
    _d("remote.storage.enable", "boolean", "false",
       doc="Whether the topic uses tiered (remote) storage."),
    _d("retention.bytes", "long", "-1", (("log.retention.bytes", "-1"),),
       doc="The size a partition may grow to before its oldest segments are deleted; -1 means no limit."),
    _d("retention.ms", "long", "604800000",
       (("log.retention.ms", None), ("log.retention.minutes", None), ("log.retention.hours", "168")), -1,
       doc="How long records are kept before their segment is deleted; -1 means no limit."),
    _d("segment.bytes", "int", "1073741824", (("log.segment.bytes", "1073741824"),), 1048576,
       doc="The size of one segment file of the log."),
    _d("segment.index.bytes", "int", "10485760", (("log.index.size.max.bytes", "10485760"),), 4,
       doc="The size of a segment's offset index file."),
    _d("segment.jitter.ms", "long", "0", (("log.roll.jitter.ms", None), ("log.roll.jitter.hours", "0")), 0,
       doc="The largest random time taken off a segment's scheduled roll."),
    _d("segment.ms", "long", "604800000", (("log.roll.ms", None), ("log.roll.hours", "168")), 1,
       doc="Roll a new segment after this long even if the current one is not full."),
    _d("unclean.leader.election.enable", "boolean", "false", (("unclean.leader.election.enable", "false"),),
       doc="Whether a replica outside the ISR may become leader, at the cost of losing records."),
)}
