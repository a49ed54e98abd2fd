"""read_events' idle deadline: it moves with every chunk (its timer only when it fires)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from netprobe.probes.sse.client import Capture, Limits, read_events
from netprobe.probes.sse.parser import SseEvent, SseParser


def _chunks(gaps: list[float], end: bool) -> tuple[list[float], Callable[[], Awaitable[bytes]]]:
    """read_chunk: one event after each gap (s), then b"" when `end`, else silence for good."""
    arrived: list[float] = []
    left = list(gaps)

    async def read_chunk() -> bytes:
        if not left:
            if end:
                return b""
            await asyncio.sleep(3600)
        await asyncio.sleep(left.pop(0))
        arrived.append(time.monotonic())
        return b"data: x\n\n"

    return arrived, read_chunk


async def test_chunks_closer_than_the_idle_timeout_keep_the_stream_alive() -> None:
    # 0.3 s gaps for 1.5 s: three times the 0.5 s idle timeout in all, never 0.5 s without a byte
    _, read_chunk = _chunks([0.3] * 5, end=True)
    cap, events = Capture(), list[SseEvent]()

    def on_event(ev: SseEvent) -> bool:
        events.append(ev)
        return False

    await read_events(read_chunk, Limits(idle_s=0.5), cap, SseParser(), on_event, lambda _c: None)
    assert cap.error_kind is None and cap.completed and len(events) == 5


async def test_stalled_counts_from_the_last_byte() -> None:
    arrived, read_chunk = _chunks([0.3] * 3, end=False)
    cap = Capture()
    await read_events(read_chunk, Limits(idle_s=0.5), cap, SseParser(), lambda _ev: False, lambda _c: None)
    stalled_after = time.monotonic() - arrived[-1]
    assert cap.error_kind == "stalled" and not cap.completed
    assert 0.5 <= stalled_after < 0.8, stalled_after
