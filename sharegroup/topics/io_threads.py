"""Worker threads for the topic logs' group commits: the disk work of one append group, run off the loop.

`loop.run_in_executor` on a `ThreadPoolExecutor` costs about 70-140 µs of CPU per call on a small VM
(its work item, a concurrent future chained to an asyncio one, the idle semaphore), paid once per
group commit, which at one request per group is a large part of a Produce's CPU. These threads take
work from one `queue.SimpleQueue` and hand the outcome back with one `call_soon_threadsafe`, about half
of that. Threads start when needed, up to `count` (as a ThreadPoolExecutor does), and stop at `shutdown`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable, TypeVar

__all__ = ["IoThreads"]

T = TypeVar("T")
_STOP = None


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    """On the loop: the outcome of a call, unless its waiter gave up meanwhile (cancelled)."""
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


class IoThreads:
    """Up to `count` threads running blocking calls for coroutines of one event loop (`run`)."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, not {count}")
        self._count = count
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # calls queued or running (touched on the loop thread only)
        self._stopped = False

    @property
    def started(self) -> int:
        """Threads started so far (at most `count`)."""
        return len(self._threads)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in one of the threads; its result, or its exception raised here. A cancelled
        waiter does not stop the call (it runs to its end; its outcome is dropped)."""
        if self._stopped:
            raise RuntimeError("IoThreads is shut down")
        loop = asyncio.get_running_loop()
        if self._busy >= len(self._threads) and len(self._threads) < self._count:
            thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
            thread.start()
            self._threads.append(thread)
        future: asyncio.Future[T] = loop.create_future()
        self._busy += 1
        try:
            self._queue.put((loop, future, fn, args))
            return await future
        finally:
            self._busy -= 1

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            loop, future, fn, args = item
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass
            del item, loop, future, fn, args, result, error

    def shutdown(self) -> None:
        """Stop the threads once the calls queued before have run (blocking until they have)."""
        self._stopped = True
        for _ in self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            thread.join()
        self._threads.clear()
