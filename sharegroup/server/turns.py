"""Turns for pipelined requests: one request of a pipelining connection starts per pass of the event loop.

A connection that has more requests waiting behind the one it is about to handle (it pipelines, or it
sends without reading its responses) takes a turn first; turns are granted one per pass of the event
loop, in the order they were asked for. A connection with one request at a time never waits for a
turn. So however many connections pipeline, a pass of the loop runs at most one of their requests
besides the others' work, and a request-response client (a consumer's ShareFetch, ShareAcknowledge)
waits behind at most one pipelined request at each step, not one per pipelining connection; alone, a
pipelining connection still gets a request handled every pass.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["PipelineTurns"]


class PipelineTurns:
    """A FIFO of connections waiting to start a pipelined request, served one per pass of the loop."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._granted = False  # a turn was granted in this pass of the loop
        self._pass_scheduled = False
        self.granted_total = 0  # turns granted so far (for tests and metrics)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def take(self) -> None:
        """Return when it is this caller's turn (at once when no turn was given in this pass and nobody waits)."""
        if not self._granted and not self._waiting:
            self._grant()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            raise

    def _grant(self) -> None:
        self._granted = True
        self.granted_total += 1
        if not self._pass_scheduled:  # the next pass hands the next turn on
            self._pass_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_pass)

    def _next_pass(self) -> None:
        self._pass_scheduled = False
        self._granted = False
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._grant()
                return

    def _check(self) -> None:
        """A turn being handed on is always scheduled while someone waits."""
        assert not self._waiting or self._pass_scheduled, len(self._waiting)
