"""Fetch (key 1), versions 4-17: classic reads of the topic logs, for consumers without a share group.

(librdkafka turns on RecordBatch v2 only when the broker advertises Produce >= 3 and Fetch >= 4.)

- Topics by name (v4-12) or by id (v13+); per partition the stored batches from the one holding
  `fetch_offset` on, byte-for-byte as the log keeps them, whole batches adding up to at most
  `partition_max_bytes` and, over the whole response, `max_bytes` - except that the first partition
  with data always gets at least one whole batch (Kafka's KIP-74 rule, so a batch larger than the
  limits is never stuck).
- `isolation_level` 1 (read_committed) stops at the last stable offset and lists the aborted
  transactions among the batches; 0 reads up to the high watermark (here the log end: one node).
- Every partition reports high watermark, last stable offset and log start offset. A fetch offset
  outside [log start, high watermark] is OFFSET_OUT_OF_RANGE with -1 offsets (the client then resets
  with ListOffsets); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION (v4-12) or UNKNOWN_TOPIC_ID (v13+).
- Long polling: with less than `min_bytes` ready and no partition in error, the fetch waits up to
  `max_wait` for an append to any partition of the store, then reads again; never past `max_wait`.
- Authorization: READ on each topic, checked before existence (TOPIC_AUTHORIZATION_FAILED per
  partition); by topic id an unknown id is UNKNOWN_TOPIC_ID first (ids are not secret). A follower's
  fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster instead, else every partition is refused;
  allowed, it is still refused per partition, as Kafka refuses a replica it does not know (this node
  is every partition's only replica): UNKNOWN_LEADER_EPOCH when it names a leader epoch, else
  NOT_LEADER_OR_FOLLOWER. A `current_leader_epoch` above the leader's (0) is UNKNOWN_LEADER_EPOCH.
- Fetch sessions (KIP-227) are not offered: every response has session id 0, so clients keep sending
  full requests. A full request (session epoch 0 or -1) is served whatever session id it names (Kafka
  closes such a session); an incremental one (any other epoch) names a session that cannot exist:
  FETCH_SESSION_ID_NOT_FOUND at the top with no partitions, as Kafka answers a session error.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from kio.schema.errors import ErrorCode

from ...errors import ShareError
from ..api import ApiHandler, RequestContext
from ..authorization import CLUSTER_NAME, AclOperation, ResourceType
from ...topics.topic_store import TopicStore

READ_COMMITTED = 1
LEADER_EPOCH = 0  # this node leads every partition from the start, never re-elected
FULL_EPOCHS = (0, -1)  # KIP-227: a full request (0 would open a session, -1 asks for none)
_signals: "weakref.WeakKeyDictionary[TopicStore, AppendSignal]" = weakref.WeakKeyDictionary()


class AppendSignal:
    """Wakes waiting fetches when the store publishes an append (subscribed once per store)."""

    def __init__(self, store: TopicStore) -> None:
        self._waiters: set[asyncio.Future[None]] = set()
        store.subscribe(self._on_append)

    def arm(self) -> asyncio.Future[None]:
        """A future completed by the next append (arm before reading, so no append is missed)."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.add(future)
        return future

    def disarm(self, future: asyncio.Future[None]) -> None:
        """Forget a future whose fetch is answered (no append came): idle fetches must not pile up."""
        self._waiters.discard(future)

    def waiting(self) -> int:
        return len(self._waiters)

    def _on_append(self, topic_id: Any, partition: int, end_offset: int = -1) -> None:
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)


def _signal(store: TopicStore) -> AppendSignal:
    signal = _signals.get(store)
    if signal is None:
        signal = _signals[store] = AppendSignal(store)
    return signal


def _error_partition(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


def _leader_epoch_error(current_leader_epoch: int, is_follower: bool) -> int:
    """Kafka's checks before a read: a known leader epoch (>= 0) above this leader's (always 0) is
    UNKNOWN_LEADER_EPOCH; a follower is none of the partition's replicas (this node is the only one):
    UNKNOWN_LEADER_EPOCH when it names an epoch, else NOT_LEADER_OR_FOLLOWER. 0 when the read may go on."""
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    if is_follower:
        return ErrorCode.unknown_leader_epoch if current_leader_epoch >= 0 else ErrorCode.not_leader_or_follower
    return ErrorCode.none


def _within(batches: tuple, limit: int, at_least_one: bool) -> tuple:
    """The leading batches whose sizes add up to at most `limit` bytes (the store may read one batch
    past it), or the first batch alone when it is larger and `at_least_one`."""
    taken = 0
    for count, batch in enumerate(batches):
        taken += len(batch.records)
        if taken > limit:
            return batches[:max(count, 1 if at_least_one else 0)]
    return batches


class _Readable:
    """READ on a topic, decided once per topic name per request (or CLUSTER_ACTION for a follower)."""

    def __init__(self, ctx: RequestContext, request: Any) -> None:
        self.ctx = ctx
        replica_state = getattr(request, "replica_state", None)
        replica_id = int(replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1))
        self.is_follower = replica_id >= 0
        self.follower_allowed = None if replica_id < 0 else ctx.authorized(
            AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        self._decided: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if self.follower_allowed is not None:
            return self.follower_allowed
        decided = self._decided.get(name)
        if decided is None:
            decided = self._decided[name] = self.ctx.authorized(AclOperation.READ, ResourceType.TOPIC, name)
        return decided


def _read_partitions(ctx: RequestContext, request: Any, read_committed: bool,
                     readable: _Readable) -> tuple[list[dict[str, Any]], int]:
    store = ctx.broker.store
    by_id = ctx.api_version >= 13
    budget = max(0, int(request.max_bytes))
    total = 0
    responses = []
    for topic in request.topics:
        info = store.topic_by_id(topic.topic_id) if by_id else store.topic_by_name(topic.topic)
        ident = {"topic_id": topic.topic_id} if by_id else {"topic": topic.topic}
        unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        partitions = []
        denied = (not readable(topic.topic)) if not by_id else (info is not None and not readable(info.name))
        for p in topic.partitions:
            index = int(p.partition)
            if denied:
                partitions.append(_error_partition(index, ErrorCode.topic_authorization_failed))
                continue
            if info is None or not store.has_partition(info.topic_id, index):
                partitions.append(_error_partition(index, unknown if info is None else ErrorCode.unknown_topic_or_partition))
                continue
            epoch_error = _leader_epoch_error(int(getattr(p, "current_leader_epoch", -1)), readable.is_follower)
            if epoch_error:
                partitions.append(_error_partition(index, epoch_error))
                continue
            limit = min(int(p.partition_max_bytes), budget - total)
            if not total:  # the first partition with data gets at least one batch (KIP-74)
                limit = max(limit, 1)
            try:
                if limit <= 0:  # the response is full: offsets only, no records
                    read = store.read(info.topic_id, index, int(p.fetch_offset), 1, read_committed=read_committed)
                    batches: tuple = ()
                else:
                    read = store.read(info.topic_id, index, int(p.fetch_offset), limit, read_committed=read_committed)
                    batches = _within(read.batches, limit, at_least_one=not total)
            except ShareError as exc:
                partitions.append(_error_partition(index, int(exc.error)))
                continue
            records = b"".join(bytes(b.records) for b in batches)
            total += len(records)
            aborted = None
            if read_committed:
                aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                           for a in read.aborted_transactions]
            partitions.append({
                "partition_index": index, "error_code": ErrorCode.none, "high_watermark": read.high_watermark,
                "last_stable_offset": read.last_stable_offset, "log_start_offset": read.log_start_offset,
                "aborted_transactions": aborted, "preferred_read_replica": -1, "records": records,
            })
        responses.append({**ident, "partitions": partitions})
    return responses, total


async def handle(ctx: RequestContext, request: Any) -> Any:
    if int(getattr(request, "session_epoch", -1)) not in FULL_EPOCHS:  # incremental: a session we never made
        return ctx.response({"throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found,
                             "session_id": 0, "responses": []})
    read_committed = int(request.isolation_level) == READ_COMMITTED
    loop = asyncio.get_running_loop()
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = loop.time() + max_wait_s
    signal = _signal(ctx.broker.store)
    readable = _Readable(ctx, request)
    while True:
        appended = signal.arm()
        try:
            responses, total = _read_partitions(ctx, request, read_committed, readable)
            remaining = deadline - loop.time()
            failed = any(part["error_code"] for topic in responses for part in topic["partitions"])
            if total >= int(request.min_bytes) or failed or remaining <= 0:
                break
            try:
                await asyncio.wait_for(appended, remaining)
            except asyncio.TimeoutError:
                responses, total = _read_partitions(ctx, request, read_committed, readable)
                break
        finally:
            signal.disarm(appended)
    return ctx.response({"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
                         "responses": responses})


def error_response(ctx: RequestContext, request: Any, code: int) -> Any:
    by_id = ctx.api_version >= 13
    responses = [{**({"topic_id": t.topic_id} if by_id else {"topic": t.topic}),
                  "partitions": [_error_partition(int(p.partition), code) for p in t.partitions]}
                 for t in request.topics]
    return ctx.response({"throttle_time": 0, "error_code": code, "session_id": 0, "responses": responses})


HANDLERS = (ApiHandler(1, "Fetch", 4, 17, handle, error_response),)
