"""`netprobe collector run`: open the store (migrating it), serve ingest, and shut down gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from typing import Any

from aiohttp import web

from netprobe.alerts.engine import Alerting, alerting
from netprobe.alerts.metrics import AlertsCollector
from netprobe.collector.app import Ingest, make_app
from netprobe.collector.config import CollectorConfig
from netprobe.collector.metrics import CollectorMetrics
from netprobe.collector.tokens import Tokens
from netprobe.errors import SetupError
from netprobe.logs import log_event
from netprobe.sinks.pipeline import Pipeline, Sink
from netprobe.store import Store, open_store

log = logging.getLogger("netprobe.collector")

CUT_AFTER = 1.0          # after the grace, requests still running get this long, then are cancelled
FLUSH_GRACE = 2.0        # the Influx queue gets this long to drain on shutdown
ALERTS_GRACE = 0.5       # alerts stop and flush notifications this long at most
ALERTS_SETTLE = 60.0     # windows are evaluated this long after they close: agents upload in batches
RETENTION_EVERY = 3600.0


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Collector:
    """One running collector: store, tokens, metrics, optional Influx pipeline, aiohttp runner."""

    def __init__(self, config: CollectorConfig) -> None:
        self.config = config
        self.store: Store | None = None
        self.pipeline: Pipeline | None = None
        self.metrics: CollectorMetrics | None = None
        self._runner: web.AppRunner | None = None
        self._ingest: Ingest | None = None
        self._retention: asyncio.Task[None] | None = None
        self.alerts: Alerting | None = None

    @property
    def addresses(self) -> list[tuple[str, int]]:
        assert self._runner is not None, "not started"
        return [(str(a[0]), int(a[1])) for a in self._runner.addresses]

    @property
    def url(self) -> str:
        return _url(*self.addresses[0])

    async def start(self) -> None:
        """Open everything and listen; on failure nothing is left open. SetupError: cannot listen."""
        cfg = self.config
        sinks = self._sinks()    # an unreadable token file fails here, before the store opens
        alerts = alerting(cfg.alerts, cfg.notifiers, settle=ALERTS_SETTLE)   # reads notifier secrets
        try:
            self.store = await open_store(cfg.storage.url)
        except BaseException:
            for sink in sinks:
                await sink.close()
            raise
        try:
            self.pipeline = Pipeline(sinks) if sinks else None
            self.metrics = CollectorMetrics(self.pipeline.stats if self.pipeline else None)
            if alerts is not None:
                self.metrics.registry.register(AlertsCollector(alerts))
            ingest = Ingest(store=self.store, tokens=Tokens(self.store), metrics=self.metrics,
                            max_body=cfg.collector.max_body_bytes, max_batch=cfg.collector.max_batch,
                            pipeline=self.pipeline)
            # shutdown_timeout: only for what drained() gave up on; the grace was already spent there
            runner = web.AppRunner(make_app(ingest), access_log=None, shutdown_timeout=CUT_AFTER)
            await runner.setup()
            host, port = cfg.collector.address()
            try:
                await web.TCPSite(runner, host, port).start()
            except OSError as exc:
                await runner.cleanup()
                raise SetupError(f"collector.listen {cfg.collector.listen}: cannot listen on "
                                 f"{_url(host, port)}: {exc.strerror or exc}") from None
        except BaseException:
            if self.pipeline is not None:
                await self.pipeline.close(0)
            await self.store.close()
            raise
        self._runner = runner
        self._ingest = ingest
        if self.pipeline is not None:
            self.pipeline.start()
        self._retention = asyncio.create_task(self._retention_loop(), name="collector:retention")
        if alerts is not None:
            self.alerts = alerts
            alerts.start(self.store)

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (collector.grace), flush Influx, close the store."""
        if self.alerts is not None:
            await self.alerts.close(ALERTS_GRACE)
        if self._retention is not None:
            self._retention.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention
        if self._runner is not None:
            for site in list(self._runner.sites):
                await site.stop()                   # stop accepting connections
            if self._ingest is not None and not await self._ingest.drained(self.config.collector.grace):
                log_event(log, "warning", "requests still in flight after the grace period are cut",
                          grace_s=self.config.collector.grace)
            await self._runner.cleanup()
        if self.pipeline is not None:
            await self.pipeline.close(FLUSH_GRACE)
        if self.store is not None:
            await self.store.close()

    def _sinks(self) -> list[Sink]:
        from netprobe.sinks.influx import influx_sinks

        return list(influx_sinks(self.config.influxdb))

    async def _retention_loop(self) -> None:
        assert self.store is not None
        days = self.config.storage.retention / 86400.0
        while True:
            try:
                removed = await self.store.enforce_retention(days)
                if removed:
                    log_event(log, "info", "retention", removed_rounds=removed)
                folded = await self.store.fold_rollups()     # the reports' prefix rollups
                if folded.rows:
                    log_event(log, "info", "rollups folded", series=folded.series, rows=folded.rows)
            except Exception as exc:  # retried next hour; ingest goes on
                log_event(log, "error", "retention failed", error=str(exc))
            await asyncio.sleep(RETENTION_EVERY)


async def run(config: CollectorConfig, stop: asyncio.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT (or `stop`); returns the exit status (0)."""
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    # handlers first: a signal arriving once "listening" is logged must still stop us cleanly
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    t0 = time.monotonic()
    try:
        collector = Collector(config)
        await collector.start()
        try:
            assert collector.store is not None
            for host, port in collector.addresses:
                log_event(log, "info", "collector listening", url=_url(host, port),
                          db=collector.store.display_url, influxdb=config.influxdb.url or "off")
            await stop.wait()
            log_event(log, "info", "collector stopping", grace_s=config.collector.grace)
            t0 = time.monotonic()
        finally:
            await collector.stop()
        extra: dict[str, Any] = {}
        if collector.pipeline is not None:
            extra["influx_dropped"] = sum(collector.pipeline.dropped.values())
        log_event(log, "info", "collector stopped", stop_s=round(time.monotonic() - t0, 3), **extra)
        return 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
