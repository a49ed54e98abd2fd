"""A cap on sockets open at once, shared by the rounds that open them."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable


class SocketCap:
    """At most `limit` connect sockets open at once, across rounds (the CLI's thousands of targets
    against the descriptor limit). A connect over the cap waits for a socket to close rather than fail
    with EMFILE, and is timed from when it starts."""

    __slots__ = ("_loop", "_waiting", "free")

    def __init__(self, limit: int) -> None:
        self.free = limit
        self._waiting: deque[Callable[[], None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    def take(self, start: Callable[[], None]) -> bool:
        """True: a slot is the caller's now. False: `start` runs once one is (it then owns it)."""
        if self.free > 0:
            self.free -= 1
            return True
        self._loop = asyncio.get_running_loop()
        self._waiting.append(start)
        return False

    def release(self) -> None:
        if self._waiting:
            assert self._loop is not None
            self._loop.call_soon(self._waiting.popleft())  # not inline: no recursion through callbacks
        else:
            self.free += 1

    def forget(self, start: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(start)
