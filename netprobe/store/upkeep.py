"""The store's hourly upkeep, as the agent and the collector both run it: raw rounds older than the
retention deleted, then the reports' prefix rollups folded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from netprobe.logs import log_event
from netprobe.store.store import Store

UPKEEP_EVERY = 3600.0


async def upkeep_loop(store: Store, retention: Callable[[], float], log: logging.Logger,
                      every: float = UPKEEP_EVERY) -> None:
    """Forever, once now and then every `every` s; `retention()` (seconds) is asked each time, so a
    reloaded configuration applies from the next pass. Cancel it to stop."""
    while True:
        try:
            removed = await store.enforce_retention(retention() / 86400.0)
            if removed:
                log_event(log, "info", "retention", removed_rounds=removed)
            folded = await store.fold_rollups()
            if folded.rows:
                log_event(log, "info", "rollups folded", series=folded.series, rows=folded.rows)
        except Exception as exc:  # a failed cleanup is retried next time; probing and ingest go on
            log_event(log, "error", "retention failed", error=str(exc))
        await asyncio.sleep(every)
