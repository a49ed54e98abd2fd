"""Fan-out from probes to sinks. Probing never waits on a sink: results queue and are written in batches."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

from netprobe.logs import log_event

if TYPE_CHECKING:
    from netprobe.store.envelopes import Envelope

log = logging.getLogger("netprobe.pipeline")


class Sink(Protocol):
    name: str

    async def write(self, envelopes: list[Envelope]) -> None: ...
    async def close(self) -> None: ...


class Pipeline:
    """A bounded queue per sink, drained by one writer task each; full queue → oldest dropped, counted."""

    def __init__(self, sinks: list[Sink], batch: int = 500, max_queue: int = 100_000,
                 flush_every: float = 1.0) -> None:
        self._sinks = sinks
        self._batch = batch
        self._max = max_queue
        self._flush_every = flush_every
        self._queues: dict[str, list[Envelope]] = {s.name: [] for s in sinks}
        self._wake = {s.name: asyncio.Event() for s in sinks}
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.dropped: dict[str, int] = {s.name: 0 for s in sinks}
        self.written: dict[str, int] = {s.name: 0 for s in sinks}
        self.failures: dict[str, int] = {s.name: 0 for s in sinks}

    def stats(self) -> dict[str, dict[str, int]]:
        """Per sink: queued, dropped, failures (write attempts that failed), written."""
        return {name: {"queued": len(q), "dropped": self.dropped[name], "failures": self.failures[name],
                       "written": self.written[name]} for name, q in self._queues.items()}

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._writer(s), name=f"sink:{s.name}") for s in self._sinks]

    @asynccontextmanager
    async def running(self, grace: float) -> AsyncIterator[Pipeline]:
        """The one way a service runs its sinks: written to inside the block; on the way out what is
        queued is flushed (for at most `grace` s) and every sink closed."""
        self.start()
        try:
            yield self
        finally:
            await self.close(grace)

    def put(self, envelope: Envelope) -> None:
        for sink in self._sinks:
            q = self._queues[sink.name]
            if len(q) >= self._max:
                del q[0]
                self.dropped[sink.name] += 1
            q.append(envelope)
            if len(q) == 1 or len(q) >= self._batch:
                self._wake[sink.name].set()

    async def _writer(self, sink: Sink) -> None:
        """Writes at most once per flush_every (sooner for a full batch): a round that arrives after a
        quiet spell is written at once, the ones behind it together when the interval is up."""
        loop = asyncio.get_running_loop()
        q = self._queues[sink.name]
        wake = self._wake[sink.name]
        last = -math.inf
        while True:
            if not q and self._closing:
                return
            if len(q) < self._batch and not self._closing:
                wait = last + self._flush_every - loop.time() if q else None  # None: until a put()
                if wait is None or wait > 0:
                    try:
                        await asyncio.wait_for(wake.wait(), wait)
                    except TimeoutError:
                        pass
                    wake.clear()
                    continue
            last = loop.time()
            batch = q[: self._batch]
            try:
                await sink.write(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep the batch; try again after a pause
                self.failures[sink.name] += 1
                log_event(log, "error", "sink write failed; will retry", sink=sink.name, error=str(exc),
                          queued=len(q))
                if self._closing:
                    return
                await asyncio.sleep(min(5.0, self._flush_every * 2))
                continue
            del q[: len(batch)]
            self.written[sink.name] += len(batch)

    async def close(self, timeout: float) -> None:
        """Flush what is queued (bounded by `timeout`), then close every sink."""
        self._closing = True
        for ev in self._wake.values():
            ev.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=timeout)
            for t in late:
                t.cancel()
            lost = sum(len(q) for q in self._queues.values())
            if late or lost:
                log_event(log, "error", "shutdown left results unwritten", unwritten=lost)
        for sink in self._sinks:
            await sink.close()
