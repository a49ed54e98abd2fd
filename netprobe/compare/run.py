"""Levels of load against each endpoint in turn: fixed concurrency (that many requests in flight
until N are done) or a request rate (arrivals on vllm's schedule, however many are in flight)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netprobe.compare.load import Prompt, cycle, rate_offsets
from netprobe.compare.request import Endpoint, RequestRecord, send
from netprobe.compare.session import new_session
from netprobe.probes.sse.client import Limits

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True, slots=True)
class Level:
    concurrency: int | None = None
    rate: float | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    levels: tuple[Level, ...]
    prompts: tuple[Prompt, ...]         # one per request of a level, the same for every endpoint
    limits: Limits
    warmup: int = 0                     # requests before each level, not counted
    burstiness: float = 1.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class LevelRun:
    level: Level
    records: tuple[RequestRecord, ...]
    duration_s: float                   # first send → last request's end


async def run_endpoint(ep: Endpoint, plan: Plan) -> list[LevelRun]:
    # keep-alive, as vllm bench serve's client: after the first request on a connection, a
    # request costs the route one round trip, not three or four (TCP + TLS)
    async with new_session() as session:
        out = []
        for level in plan.levels:
            if plan.warmup:
                warm = cycle(plan.prompts, plan.warmup)     # at a rate level: all at once
                await _fixed(session, ep, warm, min(level.concurrency or len(warm), len(warm)), plan.limits)
            if level.rate is not None:
                records = await _rated(session, ep, plan, level.rate)
            else:
                records = await _fixed(session, ep, plan.prompts, level.concurrency or 1, plan.limits)
            start = min(r.sent_s for r in records)
            out.append(LevelRun(level, tuple(records), max(r.end_s for r in records) - start))
        return out


async def _fixed(session: aiohttp.ClientSession, ep: Endpoint, prompts: Sequence[Prompt], concurrency: int,
                 limits: Limits) -> list[RequestRecord]:
    queue = iter(enumerate(prompts))
    results: list[RequestRecord | None] = [None] * len(prompts)

    async def worker() -> None:
        for i, prompt in queue:         # one shared iterator: each prompt goes to one worker
            results[i] = await send(session, ep, prompt, limits)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [r for r in results if r is not None]


async def _rated(session: aiohttp.ClientSession, ep: Endpoint, plan: Plan,
                 rate: float) -> list[RequestRecord]:
    offsets = rate_offsets(len(plan.prompts), rate, plan.burstiness, plan.seed)
    start = time.monotonic()

    async def at(offset: float, prompt: Prompt) -> RequestRecord:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
        return await send(session, ep, prompt, plan.limits)

    return list(await asyncio.gather(*(at(o, p) for o, p in zip(offsets, plan.prompts, strict=True))))
