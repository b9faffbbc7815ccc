"""Dead-letter queues of share groups (KIP-1191), the leader's side: the sink protocol and the requests.

A share-partition whose group has a dead-letter queue moves a rejected record, and one that reaches the
delivery count limit, to ARCHIVING; once that state is durable it hands the records to a
`DeadLetterSink` and, when the sink is done (written or failed: the record is archived either way),
completes them to ARCHIVED. The sink is implemented at the edge (`sharegroup/server/dead_letter.py`
writes Kafka's DLQ records to a topic of the broker's own store); the manager never imports it.
"""

from __future__ import annotations

import enum
import uuid
from typing import NamedTuple, Protocol, Sequence

from ..types import AcknowledgeType, RecordState, StateBatch

__all__ = ["DeadLetterBatch", "DeadLetterCause", "DeadLetterSink", "dead_letter_batches"]

_ARCHIVING = int(RecordState.ARCHIVING)
_REJECT = int(AcknowledgeType.REJECT)


class DeadLetterCause(enum.Enum):
    """Why a record is dead-lettered; the value is Kafka's `__dlq.errors.message` header text."""

    CLIENT_REJECT = "Offset rejected by client."
    DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


class DeadLetterBatch(NamedTuple):
    """Consecutive source offsets [first_offset, last_offset] of one share-partition to dead-letter, with
    their delivery count and cause: one DLQ record is written per offset."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    first_offset: int
    last_offset: int
    delivery_count: int
    cause: DeadLetterCause


class DeadLetterSink(Protocol):
    """Where a share-partition sends its ARCHIVING records (the edge implements it)."""

    def enabled(self, group_id: str) -> bool:
        """Whether `group_id` has a dead-letter queue (KIP-1191's gate: `share.version` >= 2 and a non-empty
        `errors.deadletterqueue.topic.name`). Called at every transition, so it must be cheap."""
        ...

    async def write(self, batches: Sequence[DeadLetterBatch]) -> None:
        """Write one DLQ record per offset of `batches` and return once they are durable, or once the write
        has failed (logged and counted by the sink). Never raises for a failed write: the records are
        archived either way."""
        ...


def dead_letter_batches(group_id: str, topic_id: uuid.UUID, partition: int, runs: Sequence[StateBatch],
                        delivery_count_limit: int, acknowledgements: Sequence[Sequence] | None = None,
                        ) -> list[DeadLetterBatch]:
    """The ARCHIVING runs among `runs` (a write's state batches) as dead-letter batches.

    The cause of an offset is CLIENT_REJECT when `acknowledgements` (the request that made the runs) says
    REJECT for it and DELIVERY_COUNT_EXCEEDED when it says anything else (a RELEASE at the limit). Without
    acknowledgements (a member left, a lock expired, or a new leader replays ARCHIVING records) it is
    derived from the delivery count as Kafka derives it on replay: at or over the limit, exceeded; else
    rejected. O(runs + ARCHIVING offsets when acknowledgements are given)."""
    out: list[DeadLetterBatch] = []
    for first, last, state, count in runs:
        if state != _ARCHIVING:
            continue
        if acknowledgements is None:
            cause = (DeadLetterCause.DELIVERY_COUNT_EXCEEDED if count >= delivery_count_limit
                     else DeadLetterCause.CLIENT_REJECT)
            out.append(DeadLetterBatch(group_id, topic_id, partition, first, last, count, cause))
            continue
        for lo, hi, cause in _causes(first, last, acknowledgements):
            if out and out[-1].last_offset + 1 == lo and out[-1].cause is cause and out[-1].delivery_count == count:
                out[-1] = out[-1]._replace(last_offset=hi)
            else:
                out.append(DeadLetterBatch(group_id, topic_id, partition, lo, hi, count, cause))
    return out


def _causes(first: int, last: int, acknowledgements: Sequence[Sequence]) -> list[tuple[int, int, DeadLetterCause]]:
    """[first, last] cut into runs of one cause by the acknowledge types of `acknowledgements`."""
    out: list[tuple[int, int, DeadLetterCause]] = []
    for batch in acknowledgements:
        b_first, b_last, types = batch[0], batch[1], batch[2]
        if b_last < first or b_first > last:
            continue
        if isinstance(types, int):
            types = (types,)
        for offset in range(max(first, b_first), min(last, b_last) + 1):
            t = types[0] if len(types) == 1 else types[offset - b_first]
            cause = DeadLetterCause.CLIENT_REJECT if t == _REJECT else DeadLetterCause.DELIVERY_COUNT_EXCEEDED
            if out and out[-1][1] + 1 == offset and out[-1][2] is cause:
                out[-1] = (out[-1][0], offset, cause)
            else:
                out.append((offset, offset, cause))
    return out
