"""InMemoryPartitionLogs: the PartitionLogs protocol answered from memory (reads, transactions, look-ups)."""

from __future__ import annotations

import uuid

import pytest

from sharegroup.errors import Errors, ShareError
from sharegroup.logs import LogBatch, PartitionLogs
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.types import AbortedTransaction, FetchedBatch

TOPIC = uuid.UUID(int=7)


@pytest.fixture
def logs() -> InMemoryPartitionLogs:
    logs = InMemoryPartitionLogs()
    logs.create_partition(TOPIC, 0)
    return logs


def test_satisfies_the_protocol(logs):
    assert isinstance(logs, PartitionLogs)


def test_append_assigns_dense_offsets_and_notifies(logs):
    seen = []
    logs.subscribe(lambda *event: seen.append(event))
    first = logs.append(TOPIC, 0, 5, 10)
    second = logs.append(TOPIC, 0, 3, 11, producer_id=4)
    assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 4, 5, 7)
    assert second.header == FetchedBatch(5, 7, 4)
    assert seen == [(TOPIC, 0, 5), (TOPIC, 0, 8)]
    assert logs.log_end_offset(TOPIC, 0) == 8


def test_read_returns_whole_batches_within_the_byte_budget_and_at_least_one(logs):
    for _ in range(4):
        logs.append(TOPIC, 0, 10, 1, size_bytes=100)
    assert [b.base_offset for b in logs.read(TOPIC, 0, 15, 1).batches] == [10]
    assert [b.base_offset for b in logs.read(TOPIC, 0, 15, 150).batches] == [10, 20]
    assert logs.read(TOPIC, 0, 40, 1000).batches == ()
    with pytest.raises(ShareError) as err:
        logs.read(TOPIC, 0, 41, 1000)
    assert err.value.error == Errors.OFFSET_OUT_OF_RANGE


def test_open_transaction_holds_the_last_stable_offset_and_aborts_are_listed(logs):
    logs.append(TOPIC, 0, 2, 1)
    logs.append(TOPIC, 0, 3, 2, producer_id=9, is_transactional=True)
    assert logs.last_stable_offset(TOPIC, 0) == 2
    assert [b.base_offset for b in logs.read(TOPIC, 0, 0, 10**6, read_committed=True).batches] == [0]
    marker = logs.end_transaction(TOPIC, 0, 9, commit=False, timestamp_ms=3)
    assert marker == LogBatch(5, 5, 9, True, True, 61, None)
    read = logs.read(TOPIC, 0, 0, 10**6, read_committed=True)
    assert read.last_stable_offset == 6 and read.high_watermark == 6
    assert read.aborted_transactions == (AbortedTransaction(9, 2),)
    assert logs.read(TOPIC, 0, 0, 10**6).aborted_transactions == ()


def test_end_transaction_without_one_is_refused(logs):
    with pytest.raises(ShareError) as err:
        logs.end_transaction(TOPIC, 0, 1, commit=True, timestamp_ms=0)
    assert err.value.error == Errors.INVALID_TXN_STATE


def test_offset_lookups_and_delete_records(logs):
    logs.append(TOPIC, 0, 5, 100)
    logs.append(TOPIC, 0, 5, 200)
    assert logs.offset_for(TOPIC, 0, "earliest") == 0
    assert logs.offset_for(TOPIC, 0, "latest") == 10
    assert logs.offset_for(TOPIC, 0, 150) == 5
    assert logs.offset_for(TOPIC, 0, 201) == 10
    assert logs.log(TOPIC, 0).delete_records(7) == 7
    assert logs.log_start_offset(TOPIC, 0) == 7
    assert [b.base_offset for b in logs.read(TOPIC, 0, 7, 10**6).batches] == [5]
    with pytest.raises(ShareError):
        logs.read(TOPIC, 0, 6, 10)


def test_unknown_partition_is_refused_with_kafkas_code(logs):
    with pytest.raises(ShareError) as err:
        logs.log_end_offset(TOPIC, 1)
    assert err.value.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert not logs.has_partition(TOPIC, 1)
