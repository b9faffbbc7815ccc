"""SharePartitionManager: what a broker embeds to answer ShareFetch and ShareAcknowledge.

It owns every share-partition of the process (`partitions.py`), the share sessions (`sessions.py`),
the waiting fetches (`delayed_fetch.py`) and one acquisition-lock timer (`lock_timer.py`). A request is
answered whole:

1. check it (`validation.py`) and apply its session epoch;
2. apply its acknowledgements, per partition, before acquiring anything;
3. visit the fetched partitions in rotating order: read the acquirable ones' batch headers from the
   `PartitionLogs` within MaxBytes (`fetch_budget.py`) and acquire from them with one MaxRecords
   budget; a partition's response carries the acquired ranges and exactly the log batches that hold
   them (handles, never re-encoded);
4. if nothing was acquired (or MinBytes is not met), wait for an event on one of its partitions or
   MaxWaitMs, then try again; acknowledgements carried by the fetch do not cut the wait short.

Authorization is the embedder's: `share_fetch` and `share_acknowledge` take an optional
`topic_authorized(topic_id) -> bool` (READ on the topic, decided by the broker's ACLs). It is asked once
per distinct topic after the session step, as Kafka does; the partitions of a refused topic answer
TOPIC_AUTHORIZATION_FAILED, are not fetched, and their acknowledgements are not applied.

It also implements the group coordinator's listener (`on_member_left`, `on_group_deleted`,
`on_offsets_deleted`) by duck typing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable, Iterable, Sequence

from ..clock import Clock, SystemClock
from ..config import BrokerConfig, ShareGroupConfig
from ..errors import Errors, ShareError
from ..logs import LogBatch, LogRead, PartitionLogs
from .dead_letters import DeadLetterSink
from .share_partition import SharePartitionStatus
from ..persistence import Persister
from ..share_messages import (
    FINAL_EPOCH,
    ShareAcknowledgePartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
    ShareAcquireMode,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchTopicResponse,
)
from ..types import AcknowledgementBatch
from .batches import batches_holding, counts_by_type, whole_batches_within
from .delayed_fetch import DelayedFetchPurgatory, WaitOutcome
from .fetch_budget import can_acquire_records, read_partitions, sync_log_start
from .lock_timer import LockTimer
from .observer import GroupConfigSource, ManagerObserver
from .partitions import DROPPING_ERRORS, SharePartitionCache, SharePartitionEntry, log_error
from .sessions import ContextKind, ShareFetchContext, ShareSessionCache, TopicPartition
from .validation import ParsedRequest, check_acknowledgement_batches, parse_acknowledge, parse_fetch

__all__ = ["SharePartitionManager"]

log = logging.getLogger(__name__)

MemberKey = tuple[str, str]
AckResult = tuple[Errors, str | None]
TopicAuthorized = Callable[[uuid.UUID], bool]
NOT_AUTHORIZED: AckResult = (Errors.TOPIC_AUTHORIZATION_FAILED, None)


def _denied_topics(topic_authorized: TopicAuthorized | None, partitions: Iterable[TopicPartition]) -> frozenset[uuid.UUID]:
    """The topics of `partitions` the embedder refuses (one decision per distinct topic)."""
    if topic_authorized is None:
        return frozenset()
    return frozenset(t for t in {tp[0] for tp in partitions} if not topic_authorized(t))


class SharePartitionManager:
    """Every share-partition, share session, waiting fetch and lock timer of one broker process.

    `coordinator` is anything with `group_config(group_id) -> ShareGroupConfig` (the group coordinator);
    without one every group gets `config.share_group_config()`. Call `await start()` before serving (it
    starts the lock timer) and `await close()` at the end; `async with` does both. An embedder that
    schedules time itself (a simulation on a ManualClock) may skip `start()` and call
    `await expire_due_locks()` when `lock_timer.next_deadline_ms` falls due: nothing then runs in the
    background. The topic logs' appends must reach `on_append` (e.g. `logs.subscribe(mgr.on_append)`).
    `dead_letters` (a `DeadLetterSink`) gives share groups dead-letter queues (KIP-1191); without one no
    record is ever ARCHIVING.
    """

    def __init__(
        self,
        *,
        persister: Persister,
        logs: PartitionLogs,
        coordinator: GroupConfigSource | None = None,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        observer: ManagerObserver | None = None,
        dead_letters: DeadLetterSink | None = None,
    ) -> None:
        self.config = config if config is not None else BrokerConfig()
        self.clock = clock if clock is not None else SystemClock()
        self.logs = logs
        self.observer = observer if observer is not None else ManagerObserver()
        self._coordinator = coordinator
        self._default_group_config = self.config.share_group_config()
        self._sessions = ShareSessionCache(self.config.max_share_sessions)
        self._partitions = SharePartitionCache(
            persister=persister, logs=logs, clock=self.clock, group_config=self.group_config,
            on_loaded=self._on_loaded, dead_letters=dead_letters,
        )
        self._purgatory = DelayedFetchPurgatory(self.clock, on_expired=self._on_fetches_expired)
        self._lock_timer = LockTimer(self.clock, self._expire_entry)
        # Share-partitions where a member may hold acquired records: what a leave or session close releases.
        self._held: dict[MemberKey, dict[SharePartitionEntry, None]] = {}
        self._started = False
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the acquisition-lock timer service (needs the running event loop)."""
        if self._closed:
            raise RuntimeError("a closed SharePartitionManager cannot start again")
        if not self._started:
            self._started = True
            self._lock_timer.start()

    async def close(self) -> None:
        """Answer waiting fetches, stop the lock timer, release every acquired record, close sessions."""
        if self._closed:
            return
        self._closed = True
        self._purgatory.close()
        await self._lock_timer.stop()
        held, self._held = self._held, {}
        await asyncio.gather(*(self._release(member_key, entries) for member_key, entries in held.items()))
        self._sessions.clear()
        for entry in self._partitions:  # unfinished dead-letter writes stay ARCHIVING: the next start replays them
            entry.sp.cancel_dead_letters()

    async def __aenter__(self) -> "SharePartitionManager":
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- what the outside can see ----------------------------------------------------------------------

    def group_config(self, group_id: str) -> ShareGroupConfig:
        """The share-group configuration of `group_id`: the coordinator's, else the broker defaults."""
        if self._coordinator is not None:
            config = self._coordinator.group_config(group_id)
            if config is not None:
                return config
        return self._default_group_config

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    @property
    def session_partition_count(self) -> int:
        return self._sessions.partition_count

    @property
    def waiting_fetch_count(self) -> int:
        return len(self._purgatory)

    @property
    def share_partition_count(self) -> int:
        return len(self._partitions)

    @property
    def in_flight_count(self) -> int:
        """Records in the in-flight windows of every share-partition (O(share-partitions))."""
        return sum(e.sp.in_flight_count for e in self._partitions if e.sp.status is SharePartitionStatus.ACTIVE)

    @property
    def sessions(self) -> ShareSessionCache:
        return self._sessions

    @property
    def lock_timer(self) -> LockTimer:
        return self._lock_timer

    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int):
        """The cached `SharePartition` of (group, topic, partition), or None (read-only use)."""
        entry = self._partitions.get(group_id, topic_id, partition)
        return None if entry is None else entry.sp

    async def expire_due_locks(self) -> int:
        """Run one lock-timer pass now (the service runs the same pass when a deadline falls due)."""
        return await self._lock_timer.expire_due()

    def _check(self) -> None:
        self._sessions._check()
        self._partitions._check()
        self._purgatory._check()
        self._lock_timer._check()

    # -- events from the log and the group coordinator --------------------------------------------------

    def on_append(self, topic_id: uuid.UUID, partition: int, end_offset: int = -1) -> None:
        """The topic log grew: wake the fetches waiting on it (O(fetches waiting on that partition))."""
        self._purgatory.wake_partition(topic_id, partition)

    def on_log_start_moved(self, topic_id: uuid.UUID, partition: int) -> None:
        """Retention moved the log start of a partition: every loaded share-partition of it moves its
        start offset up now (records below it are archived), not only at its next fetch."""
        for entry in self._partitions:
            if entry.topic_id == topic_id and entry.partition == partition and not entry.dropped \
                    and entry.sp.status is SharePartitionStatus.ACTIVE:
                try:
                    sync_log_start(self.logs, entry)
                except ShareError as exc:
                    log.warning("log start move of %s-%d not applied to %r: %s", topic_id, partition, entry, exc)
                self._purgatory.wake_share_partition(*entry.key)

    async def on_member_left(self, group_id: str, member_id: str) -> None:
        """The member left or its membership expired: close its session and release its records
        (delivery counts kept, so a member that keeps crashing on a record cannot loop forever)."""
        self._sessions.remove(group_id, member_id)
        await self._release_member(group_id, member_id)

    async def on_connection_closed(self, connection_id: str) -> None:
        """The connection `connection_id` closed: close the share sessions it opened and still owns and
        release their members' records (Kafka's disconnect rule). A session its member re-opened on
        another connection belongs to that one and stays, with the records the member holds."""
        for session in self._sessions.connection_closed(connection_id):
            if self._sessions.get(*session.key) is None:  # not re-opened while an earlier release ran
                await self._release_member(*session.key)

    async def on_group_deleted(self, group_id: str) -> None:
        """Drop the group's share-partitions and sessions (its durable state is gone)."""
        self._sessions.remove_group(group_id)
        for key in [k for k in self._held if k[0] == group_id]:
            del self._held[key]
        for entry in self._partitions.of_group(group_id):
            self._drop(entry, Errors.UNKNOWN_TOPIC_OR_PARTITION)

    async def on_offsets_deleted(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        """Drop the group's share-partitions of these topics; the next request re-reads their state."""
        topics = set(topic_ids)
        for entry in self._partitions.of_group(group_id):
            if entry.topic_id in topics:
                self._drop(entry, Errors.UNKNOWN_TOPIC_OR_PARTITION)

    # -- ShareFetch ----------------------------------------------------------------------------------

    async def share_fetch(self, request: ShareFetchRequest, topic_authorized: TopicAuthorized | None = None,
                          connection_id: str | None = None) -> ShareFetchResponse:
        """Answer one ShareFetch whole (acknowledgements, session, acquisition, long polling). A session
        it opens belongs to `connection_id` (see `on_connection_closed`)."""
        started_ms = self.clock.now_ms()
        response = await self._share_fetch(request, topic_authorized, connection_id)
        self.observer.share_fetch_done(request, response, self.clock.now_ms() - started_ms)
        return response

    async def _share_fetch(self, request: ShareFetchRequest, topic_authorized: TopicAuthorized | None,
                           connection_id: str | None = None) -> ShareFetchResponse:
        if self._closed:
            return ShareFetchResponse(error_code=Errors.UNKNOWN_SERVER_ERROR, error_message="the broker is closing")
        try:
            parsed = parse_fetch(request)
        except ShareError as exc:
            return ShareFetchResponse(error_code=exc.error, error_message=exc.message)
        group_id, member_id = request.group_id, request.member_id
        try:
            context = self._sessions.new_fetch_context(
                group_id, member_id, request.share_session_epoch, parsed.requested, parsed.forgotten,
                parsed.ack_present, connection_id,
            )
        except ShareError as exc:
            if exc.error is Errors.SHARE_SESSION_LIMIT_REACHED and request.max_wait_ms > 0:
                # As Kafka: hold the refusal for MaxWaitMs so a full broker is not hammered.
                await self.wait_for_records(group_id, [], self.clock.now_ms() + request.max_wait_ms)
            return ShareFetchResponse(error_code=exc.error, error_message=exc.message)
        config = self.group_config(group_id)
        denied = _denied_topics(topic_authorized, [*context.fetch_partitions, *parsed.acks])
        ack_results = await self._acknowledge(group_id, member_id, parsed, request.is_renew_ack, denied)
        data: dict[TopicPartition, ShareFetchPartitionData] = {}
        if context.kind is ContextKind.FINAL:
            await self._close_session(group_id, member_id)
        elif not request.is_renew_ack:
            fetched = await self._fetch(context, request, denied)
            if isinstance(fetched, Errors):
                return ShareFetchResponse(error_code=fetched, error_message="the share session moved on meanwhile")
            data = fetched
        return self._fetch_response(context, data, ack_results, config)

    def _fetch_response(
        self,
        context: ShareFetchContext,
        data: dict[TopicPartition, ShareFetchPartitionData],
        ack_results: dict[TopicPartition, AckResult],
        config: ShareGroupConfig,
    ) -> ShareFetchResponse:
        listed: dict[TopicPartition, ShareFetchPartitionData] = {}
        for tp, item in data.items():
            if context.listed(tp, bool(item.acquired_records), item.error_code is not Errors.NONE):
                listed[tp] = item
        for tp, (code, message) in ack_results.items():
            entry = listed.get(tp)
            if entry is None:
                entry = listed[tp] = ShareFetchPartitionData(tp[1])
            entry.acknowledge_error_code = code
            entry.acknowledge_error_message = message
        topics: dict[uuid.UUID, ShareFetchTopicResponse] = {}
        for (topic_id, _p), item in listed.items():
            topic = topics.get(topic_id)
            if topic is None:
                topic = topics[topic_id] = ShareFetchTopicResponse(topic_id)
            topic.partitions.append(item)
        return ShareFetchResponse(
            acquisition_lock_timeout_ms=config.record_lock_duration_ms, responses=list(topics.values())
        )

    async def _fetch(
        self, context: ShareFetchContext, request: ShareFetchRequest, denied: frozenset[uuid.UUID] = frozenset(),
    ) -> dict[TopicPartition, ShareFetchPartitionData] | Errors:
        """Acquire for the context's partitions in rotated order; the result is in that order. The
        partitions of `denied` topics are not fetched: they answer TOPIC_AUTHORIZATION_FAILED."""
        order = list(context.fetch_partitions)
        epoch = context.request_epoch
        if context.kind is ContextKind.SUBSEQUENT and len(order) > 1 and epoch % len(order):
            k = epoch % len(order)  # Kafka's round-robin: element k goes first
            order = order[k:] + order[:k]
        allowed = [tp for tp in order if tp[0] not in denied] if denied else order
        data = await self._fetch_partitions(allowed, request, context)
        if isinstance(data, Errors):
            return data
        for tp in order:
            if tp[0] in denied:
                data[tp] = ShareFetchPartitionData(tp[1], error_code=Errors.TOPIC_AUTHORIZATION_FAILED)
        return {tp: data[tp] for tp in order if tp in data}

    async def _fetch_partitions(
        self, order: list[TopicPartition], request: ShareFetchRequest, context: ShareFetchContext,
    ) -> dict[TopicPartition, ShareFetchPartitionData] | Errors:
        """Read the acquirable partitions of `order` within MaxBytes (`fetch_budget`) and acquire with
        one MaxRecords budget; if nothing came (or MinBytes is not met), wait for an event on one of the
        partitions or MaxWaitMs, then try again. A fetch carrying acknowledgements waits like any other
        (Kafka's delayed share fetch); MinBytes 0 answers with whatever is acquirable at once."""
        group_id = request.group_id
        entries, failed = await self._partitions.get_all(group_id, order)
        data = {tp: ShareFetchPartitionData(tp[1], error_code=exc.error, error_message=exc.message)
                for tp, exc in failed.items()}
        if not entries or request.max_records == 0 or request.max_bytes == 0:
            return data
        deadline_ms = self.clock.now_ms() + request.max_wait_ms
        max_bytes = min(request.max_bytes, self.config.fetch_max_bytes)
        expired = False
        while True:
            moved = context.is_current(self._sessions)
            if moved is not Errors.NONE:
                return moved  # acquire nothing the response would not ship
            ready = []
            for tp in order:
                entry = entries.get(tp)
                if entry is None:
                    continue
                if entry.dropped:
                    data[tp] = ShareFetchPartitionData(tp[1], error_code=entry.drop_error,
                                                       error_message="the share-partition was dropped")
                    del entries[tp]
                else:
                    ready.append((tp, entry))
            if not ready:
                return data
            final = expired or self._closed or self.clock.now_ms() >= deadline_ms
            acquirable = [(tp, entry) for tp, entry in ready if can_acquire_records(entry.sp)]
            if acquirable:
                reads, available = read_partitions(self.logs, acquirable, max_bytes, self._drop)
                errors = any(isinstance(r, ShareError) for r in reads.values())
                # Kafka's MinBytes: the bytes the reads found; MinBytes 0 answers with whatever is acquirable.
                waits = request.min_bytes > 1 and available < request.min_bytes and not errors
                final = final or request.min_bytes == 0
                if not waits or final:
                    budget = request.max_records
                    acquired = 0
                    for tp, entry in ready:
                        read = reads.get(tp)
                        if budget <= 0 or read is None:
                            data[tp] = ShareFetchPartitionData(tp[1])
                            continue
                        item = data[tp] = self._acquire(entry, request, budget, read)
                        acquired += item.acquired_count
                        budget -= item.acquired_count
                        errors = errors or item.error_code is not Errors.NONE
                    if acquired or errors or final:
                        return data
            elif final:
                for tp, _entry in ready:
                    data[tp] = ShareFetchPartitionData(tp[1])
                return data
            outcome = await self.wait_for_records(group_id, [tp for tp, _e in ready], deadline_ms)
            if outcome is WaitOutcome.CLOSED:
                return data
            expired = outcome is WaitOutcome.EXPIRED

    async def wait_for_records(self, group_id: str, keys: list[TopicPartition], deadline_ms: int) -> WaitOutcome:
        """Park a fetch until one of `keys` may have acquirable records or `deadline_ms` passes (the
        long poll). The one extension point for running long polls on another scheduler: a subclass
        (the simulated demo's) may wrap it, and must await the inherited method."""
        waiter = self._purgatory.watch(group_id, keys, deadline_ms)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            self._purgatory.cancel(waiter)
            raise

    def _acquire(self, entry: SharePartitionEntry, request: ShareFetchRequest, budget: int,
                 read: LogRead | ShareError) -> ShareFetchPartitionData:
        """Acquire up to `budget` records of one share-partition from its read (already cut to its byte
        limit) and pick the batches that ship them."""
        partition = entry.partition
        if isinstance(read, ShareError):
            return ShareFetchPartitionData(partition, error_code=read.error, error_message=read.message)
        batches: Sequence[LogBatch] = read.batches
        if not batches:
            return ShareFetchPartitionData(partition)
        sp = entry.sp
        fetch_offset = sp.next_fetch_offset()
        if request.share_acquire_mode == ShareAcquireMode.RECORD_LIMIT and sp.config.acquire_mode != "record_limit":
            batches = whole_batches_within(batches, fetch_offset, budget)
        try:
            # A LogBatch's first five fields are a FetchedBatch's, all the tracker reads (by index), so
            # the log's batches are passed as they are, without building a header per batch.
            acquired = sp.acquire(
                request.member_id, batches, max_records=budget, fetch_offset=fetch_offset,  # type: ignore[arg-type]
                batch_size=request.batch_size or None, aborted_transactions=read.aborted_transactions,
            )
        except ShareError as exc:
            if exc.error in DROPPING_ERRORS:
                self._drop(entry, exc.error)
            return ShareFetchPartitionData(partition, error_code=exc.error, error_message=exc.message)
        if not acquired:
            return ShareFetchPartitionData(partition)
        self._lock_timer.schedule(entry)
        member_key = (entry.group_id, request.member_id)
        held = self._held.get(member_key)
        if held is None:
            held = self._held[member_key] = {}
        held[entry] = None
        self.observer.records_acquired(entry.group_id, entry.topic_id, partition, acquired)
        return ShareFetchPartitionData(partition, records=batches_holding(batches, acquired),
                                       acquired_records=tuple(acquired))

    # -- ShareAcknowledge ------------------------------------------------------------------------------

    async def share_acknowledge(self, request: ShareAcknowledgeRequest,
                                topic_authorized: TopicAuthorized | None = None) -> ShareAcknowledgeResponse:
        """Answer one ShareAcknowledge whole; at epoch -1 the session closes after the acknowledgements."""
        started_ms = self.clock.now_ms()
        response = await self._share_acknowledge(request, topic_authorized)
        self.observer.share_acknowledge_done(request, response, self.clock.now_ms() - started_ms)
        return response

    async def _share_acknowledge(self, request: ShareAcknowledgeRequest,
                                 topic_authorized: TopicAuthorized | None) -> ShareAcknowledgeResponse:
        if self._closed:
            return ShareAcknowledgeResponse(error_code=Errors.UNKNOWN_SERVER_ERROR,
                                            error_message="the broker is closing")
        try:
            parsed = parse_acknowledge(request)
            self._sessions.acknowledge_session_update(request.group_id, request.member_id,
                                                      request.share_session_epoch)
        except ShareError as exc:
            return ShareAcknowledgeResponse(error_code=exc.error, error_message=exc.message)
        denied = _denied_topics(topic_authorized, parsed.acks)
        results = await self._acknowledge(request.group_id, request.member_id, parsed, request.is_renew_ack, denied)
        for tp, batches in parsed.acks.items():  # a partition sent without batches is answered too:
            if not batches:  # a client treats a partition missing from the answer as failed
                results[tp] = self._ack_refusal(tp, batches, request.is_renew_ack, denied) or (Errors.NONE, None)
        if request.share_session_epoch == FINAL_EPOCH:
            await self._close_session(request.group_id, request.member_id)
        topics: dict[uuid.UUID, ShareAcknowledgeTopicResponse] = {}
        for (topic_id, partition), (code, message) in results.items():
            topic = topics.get(topic_id)
            if topic is None:
                topic = topics[topic_id] = ShareAcknowledgeTopicResponse(topic_id)
            topic.partitions.append(ShareAcknowledgePartitionData(partition, code, message))
        return ShareAcknowledgeResponse(
            acquisition_lock_timeout_ms=self.group_config(request.group_id).record_lock_duration_ms,
            responses=list(topics.values()),
        )

    async def _acknowledge(
        self, group_id: str, member_id: str, parsed: ParsedRequest, renew_allowed: bool,
        denied: frozenset[uuid.UUID] = frozenset(),
    ) -> dict[TopicPartition, AckResult]:
        """Apply each partition's acknowledgements (partitions in parallel, so their writes can share a
        group commit); the result per partition is its acknowledge error code. Partitions of a
        ShareFetch without acknowledgements get no result. Kafka's order of checks: an unknown topic id
        (UNKNOWN_TOPIC_ID), then malformed batches (INVALID_REQUEST), then `denied` topics
        (TOPIC_AUTHORIZATION_FAILED, not applied), then a missing partition and the share-partition."""
        work: dict[TopicPartition, list[AcknowledgementBatch]] = {}
        refused: dict[TopicPartition, AckResult] = {}
        for tp, batches in parsed.acks.items():
            if not batches:
                continue
            refusal = self._ack_refusal(tp, batches, renew_allowed, denied)
            if refusal is None:
                work[tp] = batches
            else:
                refused[tp] = refusal
        if not work:
            return refused
        if len(work) == 1:  # no task needed
            [(tp, batches)] = work.items()
            outcomes = [await self._acknowledge_partition(group_id, member_id, tp, batches, renew_allowed)]
        else:
            outcomes = await asyncio.gather(*(self._acknowledge_partition(group_id, member_id, tp, batches,
                                                                          renew_allowed)
                                              for tp, batches in work.items()))
        done = dict(zip(work, outcomes))
        if not refused:
            return done
        return {tp: refused.get(tp) or done[tp] for tp in parsed.acks if tp in refused or tp in done}

    def _ack_refusal(self, tp: TopicPartition, batches: list[AcknowledgementBatch], renew_allowed: bool,
                     denied: frozenset[uuid.UUID]) -> AckResult | None:
        """Why a partition's acknowledgements are refused before its share-partition is asked (None: go on)."""
        topic_id, partition = tp
        missing = log_error(self.logs, topic_id, partition)
        if missing is Errors.UNKNOWN_TOPIC_ID:
            return missing, f"this broker has no topic with id {topic_id}"
        problem = check_acknowledgement_batches(batches, renew_allowed)
        if problem is not None:
            return Errors.INVALID_REQUEST, problem
        if topic_id in denied:
            return NOT_AUTHORIZED
        if missing is not Errors.NONE:
            return missing, f"this broker has no log for {topic_id}-{partition}"
        return None

    async def _acknowledge_partition(
        self, group_id: str, member_id: str, tp: TopicPartition, batches: list[AcknowledgementBatch],
        renew_allowed: bool,
    ) -> AckResult:
        """Apply one partition's acknowledgements, already checked by `_ack_refusal`."""
        topic_id, partition = tp
        entry = self._partitions.get(group_id, topic_id, partition)
        if entry is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, "the share-partition is not loaded on this broker"
        try:
            if entry.sp.status is not SharePartitionStatus.ACTIVE:
                entry = await self._partitions.get_or_create(group_id, topic_id, partition)
            await entry.sp.acknowledge(member_id, batches)
        except ShareError as exc:
            if exc.error in DROPPING_ERRORS or entry.sp.status is SharePartitionStatus.FENCED:
                self._drop(entry, exc.error)
            return exc.error, exc.message
        self.observer.records_acknowledged(group_id, topic_id, partition, counts_by_type(batches))
        self._purgatory.wake_share_partition(group_id, topic_id, partition)
        return Errors.NONE, None

    # -- releasing, expiring, dropping -------------------------------------------------------------------

    async def _close_session(self, group_id: str, member_id: str) -> None:
        self._sessions.remove(group_id, member_id)
        await self._release_member(group_id, member_id)

    async def _release_member(self, group_id: str, member_id: str) -> None:
        entries = self._held.pop((group_id, member_id), None)
        if entries:
            await self._release((group_id, member_id), entries)

    async def _release(self, member_key: MemberKey, entries: dict[SharePartitionEntry, None]) -> None:
        async def one(entry: SharePartitionEntry) -> None:
            if entry.dropped or entry.sp.status is not SharePartitionStatus.ACTIVE:
                return
            try:
                await entry.sp.release_acquired_records(member_key[1])
            except ShareError as exc:  # the records stay acquired until their locks expire
                log.warning("releasing %s's records on %r failed: %s", member_key[1], entry, exc)
                if exc.error in DROPPING_ERRORS:
                    self._drop(entry, exc.error)
                return
            self._purgatory.wake_share_partition(*entry.key)

        await asyncio.gather(*(one(entry) for entry in entries))

    async def _expire_entry(self, entry: SharePartitionEntry) -> int:
        if entry.dropped:
            return 0
        sp = entry.sp
        count = await sp.expire_locks()
        if count:
            self.observer.locks_expired(entry.group_id, entry.topic_id, entry.partition, count)
            self._purgatory.wake_share_partition(*entry.key)
        if sp.status is SharePartitionStatus.FENCED:
            self._drop(entry, Errors.NOT_LEADER_OR_FOLLOWER)
        return count

    def _drop(self, entry: SharePartitionEntry, error: Errors) -> None:
        """Forget a share-partition (fenced, failed, deleted): its waiting fetches wake and see the error;
        the next request re-creates it from durable state."""
        if self._partitions.drop(entry, error):
            self._purgatory.wake_share_partition(*entry.key)

    def _on_loaded(self, entry: SharePartitionEntry, load_time_ms: int) -> None:
        self.observer.partition_loaded(entry.group_id, entry.topic_id, entry.partition, load_time_ms)

    def _on_fetches_expired(self, count: int) -> None:
        self.observer.fetches_expired(count)

