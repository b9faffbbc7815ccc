"""IoThreads: the topic logs' group-commit threads run blocking calls for the loop and hand back outcomes."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sharegroup.topics.io_threads import IoThreads


def test_a_call_runs_off_the_loop_and_returns_its_result():
    io = IoThreads(2, "t")

    async def main() -> tuple[int, str]:
        for _ in range(3):  # one call at a time: one thread does them all
            await io.run(lambda: None)
        return await io.run(lambda a, b: (a + b, threading.current_thread().name), 2, 3)

    try:
        total, name = asyncio.run(main())
        assert io.started == 1
    finally:
        io.shutdown()
    assert total == 5
    assert name.startswith("t-") and name != threading.main_thread().name


def test_an_exception_is_raised_to_the_waiter():
    io = IoThreads(1, "t")

    def fail() -> None:
        raise OSError(5, "disk")

    async def main() -> None:
        await io.run(fail)

    try:
        with pytest.raises(OSError, match="disk"):
            asyncio.run(main())
    finally:
        io.shutdown()


def test_calls_overlap_up_to_count_threads_and_no_more():
    io = IoThreads(2, "t")
    both_in = threading.Barrier(2, timeout=10)
    running = []
    lock = threading.Lock()
    peak = [0]

    def work() -> None:
        with lock:
            running.append(1)
            peak[0] = max(peak[0], len(running))
        try:
            both_in.wait()  # only passes when two calls run at once
        except threading.BrokenBarrierError:
            pass
        with lock:
            running.pop()

    async def main() -> None:
        await asyncio.gather(*(io.run(work) for _ in range(6)))

    try:
        asyncio.run(main())
        assert io.started == 2
    finally:
        io.shutdown()
    assert peak[0] == 2


def test_a_cancelled_waiter_leaves_the_call_running_to_its_end():
    io = IoThreads(1, "t")
    release = threading.Event()
    done = threading.Event()

    def slow() -> None:
        release.wait(10)
        done.set()

    async def main() -> None:
        task = asyncio.ensure_future(io.run(slow))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert await io.run(lambda: 7) == 7  # queued behind the cancelled one, which ran first

    try:
        asyncio.run(main())
    finally:
        io.shutdown()
    assert done.is_set()


def test_shutdown_stops_the_threads_and_refuses_more_work():
    io = IoThreads(3, "t")

    async def main() -> None:
        await asyncio.gather(*(io.run(lambda: None) for _ in range(3)))

    asyncio.run(main())
    names = {t.name for t in threading.enumerate()}
    assert {"t-0", "t-1", "t-2"} <= names
    io.shutdown()
    assert not {t.name for t in threading.enumerate()} & {"t-0", "t-1", "t-2"}
    with pytest.raises(RuntimeError):
        asyncio.run(io.run(lambda: None))
