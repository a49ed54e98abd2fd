"""`netprobe collector run`: open the store (migrating it), serve ingest, and shut down gracefully."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from contextlib import AsyncExitStack
from typing import Any

from aiohttp import web

from netprobe.alerts.engine import Alerting, alerting
from netprobe.alerts.metrics import alert_families
from netprobe.collector.app import Ingest, make_app
from netprobe.collector.metrics import CollectorMetrics
from netprobe.collector.tokens import Tokens
from netprobe.config.collector import CollectorConfig
from netprobe.errors import SetupError
from netprobe.lifecycle import Signals, background, closing
from netprobe.logs import log_event
from netprobe.net.targets_file import listen_url
from netprobe.sinks.influx import influx_sinks
from netprobe.sinks.pipeline import Pipeline, Sink
from netprobe.store import Store, open_store
from netprobe.store.upkeep import upkeep_loop

log = logging.getLogger("netprobe.collector")

CUT_AFTER = 1.0          # after the grace, requests still running get this long, then are cancelled
FLUSH_GRACE = 2.0        # the Influx queue gets this long to drain on shutdown
ALERTS_GRACE = 0.5       # alerts stop and flush notifications this long at most


class Collector:
    """One running collector: store, tokens, metrics, optional Influx pipeline, aiohttp runner."""

    def __init__(self, config: CollectorConfig) -> None:
        self.config = config
        self.store: Store | None = None
        self.pipeline: Pipeline | None = None
        self.metrics: CollectorMetrics | None = None
        self._runner: web.AppRunner | None = None
        self._stack = AsyncExitStack()
        self.alerts: Alerting | None = None

    @property
    def addresses(self) -> list[tuple[str, int]]:
        assert self._runner is not None, "not started"
        return [(str(a[0]), int(a[1])) for a in self._runner.addresses]

    @property
    def url(self) -> str:
        return listen_url(*self.addresses[0])

    async def start(self) -> None:
        """Open everything and listen; on failure nothing is left open. SetupError: cannot listen."""
        async with AsyncExitStack() as stack:
            await self._start(stack)
            self._stack = stack.pop_all()   # stop() unwinds it

    async def _start(self, stack: AsyncExitStack) -> None:
        cfg = self.config
        # an unreadable token file fails here, before the store opens
        sinks: list[Sink] = [*influx_sinks(cfg.influxdb)]
        # reads notifier secrets
        alerts = alerting(cfg.alerts, cfg.notifiers, settle=cfg.collector.alert_settle)
        try:
            self.store = store = await open_store(cfg.storage.url)
        except BaseException:
            for sink in sinks:
                await sink.close()
            raise
        stack.push_async_callback(store.close)
        if sinks:
            # flushed after the last request has been answered
            self.pipeline = await stack.enter_async_context(Pipeline(sinks).running(FLUSH_GRACE))
        self.metrics = CollectorMetrics(self.pipeline.stats if self.pipeline else None)
        if alerts is not None:
            self.metrics.add(functools.partial(alert_families, alerts))
        ingest = Ingest(store=store, tokens=Tokens(store), metrics=self.metrics,
                        max_body=cfg.collector.max_body_bytes, max_batch=cfg.collector.max_batch,
                        pipeline=self.pipeline)
        # shutdown_timeout: only for what drained() gave up on; the grace was already spent there
        app = make_app(ingest)
        if cfg.dashboard.enabled:
            from netprobe.collector.tokens import Viewers
            from netprobe.dashboard.overview import PeakSnapshot
            from netprobe.dashboard.routes import Dashboard, add_dashboard

            snapshot = PeakSnapshot(store, cfg.dashboard.refresh) if cfg.dashboard.refresh > 0 else None
            if snapshot is not None:
                stack.push_async_callback(snapshot.close)
            add_dashboard(app, Dashboard(store, Viewers(store), cfg.dashboard.prefix, snapshot))
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=CUT_AFTER)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        host, port = cfg.collector.address()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            raise SetupError(f"collector.listen {cfg.collector.listen}: cannot listen on "
                             f"{listen_url(host, port)}: {exc.strerror or exc}") from None
        stack.push_async_callback(self._stop_serving, runner, ingest)
        self._runner = runner
        background(stack, upkeep_loop(store, lambda: cfg.storage.retention, log), "collector:upkeep")
        if alerts is not None:
            self.alerts = alerts
            alerts.start(store)
            closing(stack, alerts, ALERTS_GRACE)

    async def stop(self) -> None:
        """Stop alerts and upkeep, stop accepting, let requests in flight finish (collector.grace),
        flush Influx, close the store: start()'s stack unwound."""
        await self._stack.aclose()

    async def _stop_serving(self, runner: web.AppRunner, ingest: Ingest) -> None:
        for site in list(runner.sites):
            await site.stop()                   # stop accepting connections
        if not await ingest.drained(self.config.collector.grace):
            log_event(log, "warning", "requests still in flight after the grace period are cut",
                      grace_s=self.config.collector.grace)


async def run(config: CollectorConfig, stop: asyncio.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT (or `stop`); returns the exit status (0)."""
    stop = stop if stop is not None else asyncio.Event()
    t0 = time.monotonic()
    collector = Collector(config)
    async with AsyncExitStack() as stack:
        # handlers first: a signal arriving once "listening" is logged must still stop us cleanly
        Signals(stack).on(stop.set, signal.SIGTERM, signal.SIGINT)
        await collector.start()
        stack.push_async_callback(collector.stop)
        assert collector.store is not None
        for host, port in collector.addresses:
            log_event(log, "info", "collector listening", url=listen_url(host, port),
                      db=collector.store.display_url, influxdb=config.influxdb.url or "off",
                      dashboard=config.dashboard.prefix if config.dashboard.enabled else "off")
        await stop.wait()
        log_event(log, "info", "collector stopping", grace_s=config.collector.grace)
        t0 = time.monotonic()
    extra: dict[str, Any] = {}
    if collector.pipeline is not None:
        extra["influx_dropped"] = sum(collector.pipeline.dropped.values())
    log_event(log, "info", "collector stopped", stop_s=round(time.monotonic() - t0, 3), **extra)
    return 0
