"""The byte side of a ShareFetch in isolation (`sharegroup.manager.fetch_budget`): Kafka's UNIFORM split
of MaxBytes and the cut of a log read to the whole batches within a limit (one batch at least for the
first partition with data)."""

from __future__ import annotations

import random

import pytest

from sharegroup.logs import LogBatch, LogRead
from sharegroup.manager.fetch_budget import ByteBudget, uniform_partition_max_bytes


def log_read(*sizes: int) -> LogRead:
    batches = tuple(LogBatch(i, i, size_bytes=size) for i, size in enumerate(sizes))
    return LogRead(batches, (), 0, len(sizes), len(sizes))


def test_uniform_split_gives_each_read_partition_max_bytes_over_the_acquirable_count():
    assert uniform_partition_max_bytes(100, 3, 3) == [33, 33, 33]
    assert uniform_partition_max_bytes(100, 4, 2) == [25, 25]  # R >= A: R // A for each partition read


def test_uniform_split_below_one_byte_per_acquirable_partition():
    assert uniform_partition_max_bytes(3, 4, 2) == [1, 1]  # R < A, R >= read: R // read
    got = uniform_partition_max_bytes(2, 5, 5, random.Random(7))  # R < read: R random partitions get 1
    assert sorted(got) == [0, 0, 0, 1, 1]
    with pytest.raises(ValueError):
        uniform_partition_max_bytes(0, 1, 1)


def test_a_read_is_cut_to_the_whole_batches_within_its_limit():
    budget = ByteBudget(1000)
    budget.min_one = False
    cut, taken = budget.cut(log_read(100, 100, 100, 100), 350)
    assert [b.size_bytes for b in cut.batches] == [100, 100, 100]
    assert taken == 350 and budget.remaining == 650  # Kafka counts the partial batch it read too
    cut, taken = budget.cut(log_read(100, 100), 350)  # the log had less than the limit
    assert len(cut.batches) == 2 and taken == 200 and budget.remaining == 450


def test_the_first_read_with_data_keeps_one_batch_larger_than_its_limit_and_later_ones_do_not():
    budget = ByteBudget(100)
    cut, _taken = budget.cut(log_read(), 50)  # no data: the exception stays for the next partition
    assert cut.batches == () and budget.min_one
    cut, taken = budget.cut(log_read(161, 71), 50)
    assert [b.size_bytes for b in cut.batches] == [161] and taken == 161 and budget.remaining == 0
    assert not budget.min_one
    cut, _taken = budget.cut(log_read(71), budget.limit(50))
    assert cut.batches == ()
