"""Producer state and transaction index on their own: sequence rules batch by batch, no change on a
refusal, wrap-around, truncation at the log start, aborted transactions."""

from __future__ import annotations

import pytest

from sharegroup.errors import Errors, ShareError
from sharegroup.topics.producer_state import BatchMetadata, ProducerStateManager, TransactionIndex
from sharegroup.topics.record_batch import CONTROL_ABORT, CONTROL_COMMIT, BatchHeader
from sharegroup.types import AbortedTransaction

INT32_MAX = 2**31 - 1


def header(pid=1, epoch=0, seq=0, n=1, base=0, transactional=False, control=False) -> BatchHeader:
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(base, 49, 0, 2, 0, attributes, n - 1, 0, 0, pid, epoch, seq, n)


def test_batches_of_one_request_chain_their_sequences_and_a_refusal_changes_nothing():
    state = ProducerStateManager()
    dup, updates = state.check([header(seq=0, n=2), header(seq=2, n=3)], [0, 2])
    assert dup is None and list(updates[1].batches) == [BatchMetadata(0, 1, 0, 1), BatchMetadata(2, 4, 2, 4)]
    state.apply(updates)
    with pytest.raises(ShareError) as err:
        state.check([header(seq=5), header(seq=9)], [5, 6])  # the second batch leaves a gap
    assert err.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.entry(1).batches[-1] == BatchMetadata(2, 4, 2, 4) and state.entry(1).last_offset == 4


def test_sequences_wrap_from_int32_max_to_zero():
    state = ProducerStateManager()
    state.apply(state.check([header(seq=INT32_MAX - 1, n=2)], [0])[1])
    assert state.entry(1).batches[-1].last_seq == INT32_MAX
    dup, updates = state.check([header(seq=0, n=1)], [2])
    assert dup is None and updates[1].batches[-1] == BatchMetadata(0, 0, 2, 2)


def test_only_the_last_five_batches_are_duplicates():
    state = ProducerStateManager()
    for i in range(6):
        state.apply(state.check([header(seq=i)], [i])[1])
    assert state.check([header(seq=1)], [6])[0] == BatchMetadata(1, 1, 1, 1)
    with pytest.raises(ShareError, match="OUT_OF_ORDER"):
        state.check([header(seq=0)], [6])
    with pytest.raises(ShareError, match="new epoch 1 must start at sequence 0"):
        state.check([header(seq=1, epoch=1)], [6])  # the same sequences under a new epoch are no duplicate


def test_a_marker_alone_leaves_an_epoch_that_expects_sequence_zero():
    state = ProducerStateManager()
    state.replay(header(pid=4, epoch=2, base=0, transactional=True, control=True))
    with pytest.raises(ShareError, match="expected sequence 0"):
        state.check([header(pid=4, epoch=2, seq=3)], [1])
    assert state.check([header(pid=4, epoch=2, seq=0)], [1])[0] is None


def test_truncate_head_forgets_producers_wholly_below_the_start():
    state = ProducerStateManager()
    state.replay(header(pid=1, seq=0, n=2, base=0))
    state.replay(header(pid=2, seq=0, n=2, base=2))
    state.truncate_head(2)
    assert state.entry(1) is None and state.entry(2) is not None
    assert state.check([header(pid=1, seq=40)], [4])[0] is None  # unknown again: any sequence


def test_transaction_index():
    txns = TransactionIndex()
    txns.on_batch(header(pid=7, base=3, n=2, transactional=True))
    txns.on_batch(header(pid=8, base=5, n=1, transactional=True))
    txns.on_batch(header(pid=7, base=6, n=1, transactional=True))
    assert txns.first_unstable_offset() == 3 and txns.open_transactions() == {7: 3, 8: 5}
    txns.on_batch(header(pid=7, base=7, transactional=True, control=True), CONTROL_ABORT)
    txns.on_batch(header(pid=8, base=8, transactional=True, control=True), CONTROL_COMMIT)
    txns.on_batch(header(pid=9, base=9, transactional=True, control=True), CONTROL_ABORT)  # no data: first = marker
    assert txns.first_unstable_offset() is None
    assert txns.aborted_between(0, 100) == (AbortedTransaction(7, 3), AbortedTransaction(9, 9))
    assert txns.aborted_between(8, 8) == ()
    assert txns.aborted_between(7, 7) == (AbortedTransaction(7, 3),)
    txns.truncate_head(8)
    assert txns.aborted_between(0, 100) == (AbortedTransaction(9, 9),)
