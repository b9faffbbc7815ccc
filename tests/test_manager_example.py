"""The embedding example proposed for the README, run as written (SystemClock, real event loop)."""

from __future__ import annotations


def test_readme_embedding_example_runs():
    import asyncio
    import uuid

    from persister import InMemoryPersister
    from sharegroup import (
        AcknowledgementBatch,
        FetchPartition,
        FetchTopic,
        ShareFetchRequest,
        SharePartitionManager,
    )
    from sharegroup.topics.memory_logs import InMemoryPartitionLogs

    async def main():
        topic = uuid.uuid4()
        logs = InMemoryPartitionLogs()
        logs.create_partition(topic, 0)
        persister = InMemoryPersister()
        await persister.initialize_state("orders", topic, 0, state_epoch=0, start_offset=0)
        async with SharePartitionManager(persister=persister, logs=logs) as mgr:
            logs.subscribe(mgr.on_append)  # appends wake waiting fetches
            logs.append(topic, 0, 3, timestamp_ms=0, records=b"<the stored batch bytes>")
            fetch = await mgr.share_fetch(ShareFetchRequest(
                "orders", "consumer-1", 0, topics=(FetchTopic(topic, (FetchPartition(0),)),)))
            data = fetch.partition(topic, 0)
            print(data.acquired_records, [b.records for b in data.records])
            # accept what we got, piggy-backed on the next fetch (session epoch 1)
            acks = tuple(AcknowledgementBatch(a.first_offset, a.last_offset, (1,)) for a in data.acquired_records)
            fetch = await mgr.share_fetch(ShareFetchRequest(
                "orders", "consumer-1", 1, max_wait_ms=0, topics=(FetchTopic(topic, (FetchPartition(0, acks),)),)))
            print(fetch.partition(topic, 0).acknowledge_error_code)
            return data.acquired_records, fetch.partition(topic, 0).acknowledge_error_code

    acquired, ack_code = asyncio.run(main())
    assert [tuple(a) for a in acquired] == [(0, 2, 1)] and ack_code == 0
