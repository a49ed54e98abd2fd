"""The server `netprobe target`'s openai mode plays: how long its "prefill" takes, how fast it generates,
and how many requests it serves at once — so a lab datacenter can stand in for an inference framework
with known figures (`--prefill-ms`, `--token-ms`, `--slots`), and what netprobe measures through it can
be checked against what was configured."""

from __future__ import annotations

import asyncio
import random
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from netprobe.stats import LogNormal

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@dataclass(frozen=True)
class ServerModel:
    """What the server does when a request does not say (its think_ms / interval_ms extras win)."""

    prefill: LogNormal | None = None    # time to the first token once a slot is free; None: 0
    token_ms: int = 20                  # one token every token_ms
    slots: int | None = None            # requests generating at once; None: unlimited
    seed: int | None = None


@dataclass
class Server:
    """A ServerModel at run time: its seeded draws and its slots (FIFO, as a scheduler's waiting queue)."""

    model: ServerModel = field(default_factory=ServerModel)
    _rng: random.Random = field(init=False)
    _slots: asyncio.Semaphore | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.model.seed)

    def prefill_s(self) -> float:
        return 0.0 if self.model.prefill is None else self.model.prefill.draw(self._rng) / 1000

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Held from the end of the wait in the queue to the last token."""
        if self.model.slots is None:
            yield
            return
        if self._slots is None:          # created on the serving loop
            self._slots = asyncio.Semaphore(self.model.slots)
        async with self._slots:          # asyncio.Semaphore wakes waiters in FIFO order
            yield
