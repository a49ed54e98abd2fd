"""How the agent and the collector start and stop what they run: each resource is entered on one
contextlib.AsyncExitStack as it starts, so a failed start closes what was already open and a stop
unwinds in the reverse order of the start (probes drain before the sinks flush, the sinks before the
uplink's last upload, all of them before the store closes)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, Protocol


class Drains(Protocol):
    """Background work started by its owner and stopped within `timeout` s, whatever it is doing."""

    async def close(self, timeout: float) -> None: ...


def closing(stack: AsyncExitStack, service: Drains, grace: float) -> None:
    """On the way out, `service` gets `grace` s to finish its work."""
    stack.push_async_callback(service.close, grace)


def background(stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    """`work` as a task that is cancelled (and waited for) on the way out: a loop with nothing to flush."""
    task = asyncio.create_task(work, name=name)

    async def cancel() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    stack.push_async_callback(cancel)
    return task


class Alongside:
    """A close whose grace runs alongside the others' instead of after them: push `wait` where the
    close must be complete, then `begin` last, so that on the way out it begins before anything stops."""

    def __init__(self, close: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._close = close
        self._task: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self._task = asyncio.create_task(self._close())

    async def wait(self) -> None:
        if self._task is not None:
            await self._task


class Signals:
    """Signal handlers for the life of a stack. Made first, it removes them last: a second SIGTERM
    while stopping must not kill the process mid-drain. Handlers are installed with `on`."""

    def __init__(self, stack: AsyncExitStack) -> None:
        self._loop = asyncio.get_running_loop()
        self._installed: list[signal.Signals] = []
        stack.callback(self._remove)

    def on(self, handler: Callable[[], object], *signals: signal.Signals) -> None:
        for sig in signals:
            self._loop.add_signal_handler(sig, handler)
            self._installed.append(sig)

    def _remove(self) -> None:
        for sig in self._installed:
            self._loop.remove_signal_handler(sig)
