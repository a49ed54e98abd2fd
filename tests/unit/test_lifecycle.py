"""netprobe.lifecycle: what the agent and the collector enter on their AsyncExitStack stops in the
reverse order of its start, each within its grace; a close run alongside overlaps the others'."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import AsyncExitStack

import pytest

from netprobe.lifecycle import Alongside, Signals, background, closing


class Service:
    def __init__(self, name: str, log: list[str], takes: float = 0.0) -> None:
        self.name, self.log, self.takes = name, log, takes
        self.grace: float | None = None

    async def close(self, timeout: float) -> None:
        self.grace = timeout
        self.log.append(f"{self.name} closing")
        await asyncio.sleep(self.takes)
        self.log.append(f"{self.name} closed")


async def test_services_close_in_reverse_order_each_with_its_grace() -> None:
    log: list[str] = []
    a, b = Service("a", log), Service("b", log)
    async with AsyncExitStack() as stack:
        closing(stack, a, 1.5)
        closing(stack, b, 2.0)
    assert log == ["b closing", "b closed", "a closing", "a closed"]
    assert (a.grace, b.grace) == (1.5, 2.0)


async def test_a_failed_start_closes_what_was_already_started() -> None:
    log: list[str] = []
    with pytest.raises(RuntimeError):
        async with AsyncExitStack() as stack:
            closing(stack, Service("store", log), 0.0)
            raise RuntimeError("cannot listen")
    assert log == ["store closing", "store closed"]


async def test_background_work_is_cancelled_and_waited_for() -> None:
    seen: list[str] = []

    async def loop() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            seen.append("cleaned up")

    async with AsyncExitStack() as stack:
        task = background(stack, loop(), "upkeep")
        await asyncio.sleep(0)
    assert task.cancelled() and seen == ["cleaned up"]


async def test_a_close_alongside_begins_first_and_overlaps_the_others() -> None:
    log: list[str] = []
    alerts, drain = Service("alerts", log, takes=0.3), Service("drain", log, takes=0.3)
    alongside = Alongside(lambda: alerts.close(0.5))
    loop = asyncio.get_running_loop()
    async with AsyncExitStack() as stack:
        closing(stack, Service("store", log), 0.0)
        stack.push_async_callback(alongside.wait)      # done before the store closes
        closing(stack, drain, 2.0)
        stack.callback(alongside.begin)
        t0 = loop.time()
    took = loop.time() - t0
    assert sorted(log[:2]) == ["alerts closing", "drain closing"]    # both under way before either ends
    assert log[-2:] == ["store closing", "store closed"]
    assert took < 0.5                                   # 0.3 s each, at the same time, not 0.6 s


async def test_alongside_that_never_began_is_not_waited_for() -> None:
    alerts = Service("alerts", [])
    alongside = Alongside(lambda: alerts.close(0.5))
    await alongside.wait()
    assert alerts.grace is None


async def test_signal_handlers_last_the_whole_stack_and_are_removed_last() -> None:
    loop = asyncio.get_running_loop()
    got = asyncio.Event()
    log: list[str] = []
    async with AsyncExitStack() as stack:
        Signals(stack).on(got.set, signal.SIGUSR1)

        def still_installed() -> None:
            log.append("installed" if signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL else "removed")

        stack.callback(still_installed)           # runs on the way out, before the handlers go
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(got.wait(), 5)
    assert log == ["installed"]
    assert loop.remove_signal_handler(signal.SIGUSR1) is False   # nothing left installed
