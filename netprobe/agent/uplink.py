"""Durable uplink ([uplink]): ships the outbox to the collector, at least once.

Rounds enter the outbox in the transaction that stores them (Store.write); this task uploads the
oldest in batches and deletes only what the collector acknowledged, so a collector outage, an agent
restart or a SIGKILL mid-upload loses nothing and, with idempotent ingest, stores nothing twice.
Failures back off exponentially with full jitter (tenacity) up to `retry_max`. It never touches the
probing path: the scheduler and pipeline do not wait on it. Each upload is one POST on a new connection
(netprobe.net.http1: aiohttp's client would stay resident in the daemon for it); with store writes every
5 s that is at most one connection per 5 s.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_never,
    wait_random_exponential,
)

from netprobe import __version__
from netprobe.config.secrets import read_secret
from netprobe.config.sections import UplinkConfig
from netprobe.logs import log_event
from netprobe.net import http1
from netprobe.net.upload_health import health_headers
from netprobe.store import Store
from netprobe.store.outbox import OutboxEntry
from netprobe.times import utc_now

log = logging.getLogger("netprobe.uplink")

PATH = "/api/v1/results"
ANSWER_CAP = 64 * 1024      # of the collector's answer read (a proxy's error page can be long)
PARK = timedelta(hours=1)   # a round the collector rejects is retried this much later (a fixed collector)
IDLE_CHECK = 60.0           # with nothing new, look at the outbox this often (parked rounds fall due)


class UploadFailed(Exception):
    """Nothing acknowledged; retry the same rounds later. `kind` labels the failure counter."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass
class UplinkStats:
    depth: int = 0                 # rounds in the outbox
    sent: int = 0                  # acknowledged as newly stored by the collector
    duplicates: int = 0            # acknowledged as already stored (replays after a lost answer)
    rejected: int = 0              # refused by the collector one by one (400/403/413): parked, kept
    dropped: int = 0               # oldest rounds dropped at the outbox cap
    failures: dict[str, int] = field(default_factory=dict)   # failed attempts by kind
    last_success: float = 0.0      # unix time of the last acknowledged upload


def read_token(cfg: UplinkConfig) -> str:
    return read_secret("uplink", inline=cfg.token, file=cfg.token_file, env=cfg.token_env)


class Uplink:
    def __init__(self, store: Store, cfg: UplinkConfig, token: str) -> None:
        self._store = store
        self._cfg = cfg
        self._url = cfg.url + PATH
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                         "Content-Encoding": "gzip", "User-Agent": f"netprobe-agent/{__version__}"}
        self._batch = cfg.batch
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.stats = UplinkStats()

    @property
    def cap(self) -> int:
        return self._cfg.max_outbox

    async def start(self) -> None:
        self.stats.depth = await self._store.outbox_depth()
        self._wake.set()  # what an earlier run left behind goes first
        self._task = asyncio.create_task(self._run(), name="uplink")
        log_event(log, "info", "uplink started", url=self._cfg.url, outbox=self.stats.depth)

    def stored(self, added: int, dropped: int) -> None:
        """Called after each store write: `added` rounds entered the outbox, `dropped` oldest left it."""
        self.stats.depth += added - dropped
        if dropped:
            self.stats.dropped += dropped
            log_event(log, "error", "outbox full: oldest rounds dropped", dropped=dropped,
                      max_outbox=self.cap, total_dropped=self.stats.dropped)
        if added:
            self._wake.set()

    async def _run(self) -> None:
        while not self._closing:
            try:
                # not asyncio.wait_for: on 3.11 it swallows a cancel that lands as the event fires
                async with asyncio.timeout(IDLE_CHECK):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            retrying = AsyncRetrying(
                wait=wait_random_exponential(multiplier=1.0, max=self._cfg.retry_max),
                retry=retry_if_exception_type(UploadFailed), stop=stop_never, reraise=True,
                before_sleep=self._before_sleep)
            async for attempt in retrying:
                with attempt:
                    await self._drain()

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log_event(log, "warning", "upload failed; will retry", error=str(exc), attempt=state.attempt_number,
                  retry_in_s=round(wait, 1), outbox=self.stats.depth)

    async def _drain(self, deadline: float | None = None) -> None:
        """Upload until the outbox holds nothing due; raises UploadFailed when an upload fails."""
        while deadline is None or time.monotonic() < deadline:
            batch = await self._store.outbox_oldest(self._batch, utc_now())
            if not batch:
                return
            await self._send(batch)

    async def _send(self, batch: list[OutboxEntry]) -> None:
        # orjson: far less CPU than json.dumps for a batch (the collector reads it with orjson too)
        body = gzip.compress(orjson.dumps([e.payload for e in batch]), 5)
        try:
            async with asyncio.timeout(self._cfg.timeout):  # connect to the answer read, as before
                headers = self._headers | health_headers(self.stats.depth, utc_now())
                resp = await http1.request("POST", self._url, headers=headers, body=body)
                try:
                    status = resp.status
                    text = (await resp.read(ANSWER_CAP)).decode("utf-8", "replace")[:300]
                finally:
                    resp.close()
        except TimeoutError:  # before OSError, of which it is one
            raise self._failed("timeout", f"no answer within {self._cfg.timeout:g} s") from None
        except (http1.HttpError, OSError) as exc:
            raise self._failed("connect", str(exc) or type(exc).__name__) from None
        if status == 200:
            await self._acknowledged(batch, text)
        elif status in (400, 403, 413):
            await self._refused(batch, status, text)
        elif status == 401:
            raise self._failed("unauthorized", "the collector refused the token (401): check uplink.token*")
        else:  # 5xx, 429, a proxy's error page: the collector is away or busy
            raise self._failed(f"http_{status}", text)

    def _failed(self, kind: str, detail: str) -> UploadFailed:
        self.stats.failures[kind] = self.stats.failures.get(kind, 0) + 1
        return UploadFailed(kind, detail)

    async def _acknowledged(self, batch: list[OutboxEntry], text: str) -> None:
        try:
            answer: dict[str, Any] = json.loads(text) if text else {}
        except ValueError:
            answer = {}
        removed = await self._store.outbox_remove([e.seq for e in batch])
        self.stats.depth -= removed
        self.stats.sent += int(answer.get("accepted", 0))
        self.stats.duplicates += int(answer.get("duplicates", 0))
        self.stats.last_success = time.time()

    async def _refused(self, batch: list[OutboxEntry], status: int, text: str) -> None:
        """400/403/413 concern the batch's content: halve it until the refused rounds stand alone,
        then park each (kept, retried after PARK) so one bad round cannot hold up the rest."""
        if status == 413:
            self._batch = max(1, min(self._batch, len(batch)) // 2)
        if len(batch) > 1:
            half = len(batch) // 2
            await self._send(batch[:half])
            await self._send(batch[half:])
            return
        entry = batch[0]
        self.stats.rejected += 1
        log_event(log, "error", "collector refused a round; parked", status=status, result_id=entry.result_id,
                  answer=text, retry_in_s=int(PARK.total_seconds()))
        await self._store.outbox_failed([entry.seq], f"{status}: {text}", utc_now() + PARK)

    async def close(self, final_timeout: float) -> None:
        """Stop the background task, then one bounded final attempt at what is left."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=final_timeout)  # bounded, whatever it was doing
        try:
            if final_timeout > 0 and self.stats.depth > 0:
                async with asyncio.timeout(final_timeout):
                    await self._drain(time.monotonic() + final_timeout)
        except (UploadFailed, TimeoutError) as exc:
            log_event(log, "warning", "final upload incomplete; the outbox keeps the rest", error=str(exc))
        log_event(log, "info", "uplink stopped", outbox=self.stats.depth, sent=self.stats.sent,
                  duplicates=self.stats.duplicates)
