"""The SharePartitionManager's authorization hook: `topic_authorized(topic_id)` on ShareFetch and
ShareAcknowledge (READ on the topic, decided by the embedder once per topic after the session step)."""

from __future__ import annotations

import uuid

from sharegroup import Errors, RecordState

from .conftest import run
from .manager_harness import ACCEPT, GROUP, T1, T2, Harness, ack_request, acquired, fetch_request

DENIED = Errors.TOPIC_AUTHORIZATION_FAILED


def test_refused_topics_are_not_fetched_and_their_acks_not_applied_but_stay_in_the_session():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3])
        h.partition(T2, 0, batches=[2])
        asked: list = []
        allowed = {T1}

        def readable(topic_id):
            asked.append(topic_id)
            return topic_id in allowed

        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0), (T2, 0)]), readable)
            assert acquired(r, T1, 0) == [(0, 2, 1)]
            refused = r.partition(T2, 0)
            assert (refused.error_code, refused.acquired_records, refused.records) == (DENIED, (), ())
            assert mgr.share_partition(GROUP, T2, 0) is None  # never loaded, nothing acquired
            assert sorted(asked) == sorted([T1, T2])  # one decision per distinct topic
            # READ on T1 is taken away: the session's T1 partition is refused, its acknowledgement not applied
            allowed.clear()
            r = await mgr.share_fetch(fetch_request("m1", 1, [(T1, 0, [(0, 2, ACCEPT)])]), readable)
            data = r.partition(T1, 0)
            assert (data.error_code, data.acknowledge_error_code) == (DENIED, DENIED)
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).state is RecordState.ACQUIRED
            a = await mgr.share_acknowledge(ack_request("m1", 2, [(T1, 0, [(0, 2, ACCEPT)])]), readable)
            assert [(p.partition_index, p.error_code) for t in a.responses for p in t.partitions] == [(0, DENIED)]
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).state is RecordState.ACQUIRED
            allowed.add(T1)
            a = await mgr.share_acknowledge(ack_request("m1", 3, [(T1, 0, [(0, 2, ACCEPT)])]), readable)
            assert [(p.partition_index, p.error_code) for t in a.responses for p in t.partitions] == [(0, Errors.NONE)]
            assert mgr.share_partition(GROUP, T1, 0).start_offset == 3
            # without a hook (the default) nothing is refused
            r = await mgr.share_fetch(fetch_request("m2", 0, [(T2, 0)]))
            assert acquired(r, T2, 0) == [(0, 1, 1)]

    run(main())


def test_session_errors_come_before_the_topic_check():
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[1])
        asked: list = []
        async with h.mgr as mgr:
            r = await mgr.share_fetch(fetch_request("m1", 5, [(T1, 0)]), lambda t: asked.append(t) or False)
            assert (r.error_code, asked) == (Errors.SHARE_SESSION_NOT_FOUND, [])

    run(main())


def test_ack_checks_run_in_kafkas_order_unknown_topic_id_then_batches_then_the_topic_check():
    """Kafka: an unknown topic id is UNKNOWN_TOPIC_ID whatever its batches; malformed batches of a known
    topic are INVALID_REQUEST before READ on the topic is asked; only then TOPIC_AUTHORIZATION_FAILED."""
    async def main():
        h = Harness()
        h.partition(T1, 0, batches=[3])
        unknown = uuid.UUID("00000000-0000-0000-0000-0000000000ff")
        backwards = [(2, 1, ACCEPT)]  # first > last: malformed
        async with h.mgr as mgr:
            await mgr.share_fetch(fetch_request("m1", 0, [(T1, 0)]))
            a = await mgr.share_acknowledge(ack_request("m1", 1, [(unknown, 0, backwards), (unknown, 1, []),
                                                                  (T1, 0, backwards), (T1, 7, [])]), lambda t: False)
            got = {(t.topic_id, p.partition_index): p.error_code for t in a.responses for p in t.partitions}
            assert got == {(unknown, 0): Errors.UNKNOWN_TOPIC_ID, (unknown, 1): Errors.UNKNOWN_TOPIC_ID,
                           (T1, 0): Errors.INVALID_REQUEST, (T1, 7): DENIED}
            r = await mgr.share_fetch(fetch_request("m1", 2, [(T1, 0, backwards)]), lambda t: False)
            data = r.partition(T1, 0)
            assert (data.error_code, data.acknowledge_error_code) == (DENIED, Errors.INVALID_REQUEST)
            a = await mgr.share_acknowledge(ack_request("m1", 3, [(T1, 0, [(0, 2, ACCEPT)])]), lambda t: False)
            assert [p.error_code for t in a.responses for p in t.partitions] == [DENIED]  # well-formed: refused
            assert mgr.share_partition(GROUP, T1, 0).record_state(0).state is RecordState.ACQUIRED

    run(main())
