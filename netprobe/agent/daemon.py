"""`netprobe agent run`: config → scheduler → probes → pipeline → store; signals drain, flush, reload."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netprobe.agent.scheduler import ProbeScheduler
from netprobe.config.agent import Config, load_config
from netprobe.errors import ConfigError, SetupError
from netprobe.lifecycle import Alongside, Signals, background, closing
from netprobe.logs import log_event, setup_logging
from netprobe.net.resolve import Resolver
from netprobe.probes import REGISTRY, ProbeContext, ProbeTarget
from netprobe.probes.results import ProbeResult
from netprobe.sinks.influx import influx_sinks
from netprobe.sinks.pipeline import Pipeline
from netprobe.store import Store, open_store
from netprobe.store.envelopes import Envelope, envelope_of
from netprobe.store.upkeep import upkeep_loop
from netprobe.times import set_timer_slack, timer_slack, timer_slack_for

if TYPE_CHECKING:
    from netprobe.agent.uplink import Uplink
    from netprobe.alerts.engine import Alerting

log = logging.getLogger("netprobe.agent")

DRAIN_GRACE = 2.0   # running rounds get this long to finish on SIGTERM …
FLUSH_GRACE = 1.5   # … the sinks this long to flush …
FINAL_UPLOAD = 1.0  # … and the uplink one attempt this long: together well inside 5 s
ALERTS_GRACE = 0.5  # alerts stop and flush notifications alongside the drain, never longer
# Rounds are written to the store (and its outbox) in one transaction this often, or at 500 queued.
# A SQLite write has a fixed cost whatever its size (about 70 driver-thread round trips) and a small
# one per round, so fewer, larger writes cost the agent less CPU (see bench/README.md, agent_footprint).
# The price: a crash (not SIGTERM, which flushes) can lose up to this much of the latest rounds.
STORE_FLUSH_EVERY = 5.0
# The agent's SQLite page cache per connection (SQLite's default: 2,000 KiB). Its statements touch the
# newest pages of a few indexes and the outbox's head; what is not cached is read back from the
# kernel's page cache. bench/agent_footprint.py: RSS and CPU with this against the default.
SQLITE_CACHE_KIB = 512


class StoreSink:
    """The local database; with an uplink, each newly stored round also enters the outbox in the
    same transaction. The Agent owns (and closes) the store: the uplink's final attempt reads it."""

    name = "store"

    def __init__(self, store: Store, uplink: Uplink | None) -> None:
        self.store = store
        self.uplink = uplink

    async def write(self, envelopes: list[Envelope]) -> None:
        if self.uplink is None:
            await self.store.write(envelopes)
            return
        stats = await self.store.write(envelopes, outbox_cap=self.uplink.cap)
        self.uplink.stored(stats.accepted, stats.outbox_dropped)

    async def close(self) -> None:
        pass


def configure_context(ctx: ProbeContext, cfg: Config) -> None:
    """Each probe's [probes.<name>] applied to the shared context (the ICMP engine's send cap, …), and
    the [reflector] token read (SetupError if its file cannot be)."""
    ctx.reflector = cfg.reflector.auth()
    for name, spec in REGISTRY.items():
        if spec.configure is not None and name in cfg.probes:
            spec.configure(ctx, cfg.probes[name])


def round_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    """The few numbers worth a log line per round, from the result's to_dict()."""
    fields: dict[str, Any] = {"status": d["status"]}
    for key in ("loss_pct", "jitter_ms", "error_kind"):
        if d.get(key) is not None:
            fields[key] = round(d[key], 3) if isinstance(d[key], float) else d[key]
    route = d.get("route")
    if route:
        fields["line"], fields["path_hash"] = route.get("label"), route.get("hash")
    stats = d.get("rtt_ms") or d.get("connect_ms")
    if isinstance(stats, Mapping):  # sse's connect_ms is one number, not RTT statistics
        fields["p50_ms"] = round(stats["p50"], 3)
        fields["p95_ms"] = round(stats["p95"], 3)
    return fields


class Agent:
    def __init__(self, config_path: Path, config: Config, duration: float | None = None) -> None:
        self.config_path = config_path
        self.config = config
        self.duration = duration
        self.stop_event = asyncio.Event()
        self.rounds = 0
        self.store: Store | None = None

    @property
    def db_url(self) -> str | None:
        """storage.url, else a SQLite file in agent.state_dir, else the store's default location."""
        if self.config.storage.url:
            return self.config.storage.url
        if self.config.agent.state_dir:
            return f"sqlite:///{Path(self.config.agent.state_dir).resolve()}/netprobe.db"
        return None

    def _jobs(self) -> list[tuple[ProbeTarget, str, Any]]:
        return [(t.to_probe_target(), probe, settings) for t, probe, settings in self.config.jobs()]

    async def run(self) -> int:
        async with AsyncExitStack() as stack:
            scheduler, pipeline = await self._start(stack)
            try:
                async with asyncio.timeout(self.duration):
                    await self.stop_event.wait()
            except TimeoutError:
                pass
            t0 = time.monotonic()
        # the stack has unwound: probes drained, sinks flushed, the last upload tried, everything closed
        log_event(log, "info", "agent stopped", rounds=self.rounds, cancelled_rounds=scheduler.cancelled,
                  skipped_runs=scheduler.skipped, dropped=sum(pipeline.dropped.values()),
                  stop_s=round(time.monotonic() - t0, 3))
        return 0

    async def _start(self, stack: AsyncExitStack) -> tuple[ProbeScheduler, Pipeline]:
        """Start everything onto `stack`, whose unwinding is the SIGTERM drain: the ICMP socket
        checked, the store, uplink, exporter and pipeline opened, probes scheduled, upkeep and alerts."""
        cfg = self.config
        signals = Signals(stack)
        extra_sinks = influx_sinks(cfg.influxdb)  # a missing token file fails here, before the store opens
        # Uplink and alerting (tenacity, notifiers with aiohttp) are imported only when configured:
        # a daemon keeps every module it imported in memory for good.
        uplink_token: str | None = None
        if cfg.uplink.url:
            from netprobe.agent.uplink import read_token

            uplink_token = read_token(cfg.uplink)
        alerts: Alerting | None = None
        if cfg.alerts:
            from netprobe.alerts.engine import alerting

            alerts = alerting(cfg.alerts, cfg.notifiers, agent_id=cfg.agent.id)  # reads notifier secrets
        jobs = self._jobs()
        # Set before the store's worker threads, which inherit it; given back when the agent stops, so
        # an agent run in-process (tests) leaves no slack to the processes its caller starts later.
        stack.callback(set_timer_slack, timer_slack())
        slack = self._set_timer_slack(jobs)
        self.store = store = await open_store(self.db_url, sqlite_cache_kib=SQLITE_CACHE_KIB)
        stack.push_async_callback(store.close)
        ctx = ProbeContext(resolver=Resolver(refresh=cfg.resolver.refresh))
        configure_context(ctx, cfg)
        stack.push_async_callback(ctx.close)
        self._enrich(ctx, None)
        # Alerts stop alongside the drain (their grace overlaps it), and are done before the store closes.
        stop_alerts: Alongside | None = None
        if alerts is not None:
            stop_alerts = Alongside(functools.partial(alerts.close, ALERTS_GRACE))
            stack.push_async_callback(stop_alerts.wait)
        uplink: Uplink | None = None
        if uplink_token is not None:
            from netprobe.agent.uplink import Uplink

            uplink = Uplink(store, cfg.uplink, uplink_token)
        pipeline = Pipeline([StoreSink(store, uplink), *extra_sinks], flush_every=STORE_FLUSH_EVERY)
        agent_env = cfg.agent_envelope()
        agent_ref = (cfg, agent_env)     # the envelopes' agent, until a reload brings another config

        def on_result(target: ProbeTarget, result: ProbeResult) -> None:
            nonlocal agent_ref
            self.rounds += 1
            if agent_ref[0] is not self.config:
                agent_ref = (self.config, self.config.agent_envelope())
            body = result.to_dict()  # once: the envelope and the log line both read it
            env = envelope_of(result, agent_ref[1], target.as_envelope(), body=body)
            if metrics is not None:
                metrics.observe(target, env)
            pipeline.put(env)
            log_event(log, "info", "round", target=target.id, probe=result.probe, **round_fields(body))

        started: dict[str, str] = {}
        running = {probe for _, probe, _ in jobs}
        for name, spec in REGISTRY.items():   # e.g. icmp opens its engine: fail fast (exit 2) without ICMP
            if spec.startup is not None:
                started |= spec.startup(ctx, name in running)
        metrics, exporter = await self._exporter(pipeline, uplink, alerts)
        if exporter is not None:
            stack.push_async_callback(exporter.cleanup)
        if uplink is not None:
            await uplink.start()
            closing(stack, uplink, FINAL_UPLOAD)      # after the pipeline has flushed into the outbox
        scheduler = ProbeScheduler(ctx, on_result)
        scheduler.set_jobs(jobs)
        signals.on(self.stop_event.set, signal.SIGTERM, signal.SIGINT)
        signals.on(lambda: self._reload(scheduler, ctx), signal.SIGHUP)
        await stack.enter_async_context(pipeline.running(FLUSH_GRACE))
        scheduler.start()
        closing(stack, scheduler, DRAIN_GRACE)        # rounds in flight finish before the sinks flush
        background(stack, upkeep_loop(store, lambda: self.config.storage.retention, log), "agent:upkeep")
        if alerts is not None and stop_alerts is not None:
            alerts.start(store)
            stack.callback(stop_alerts.begin)
        # Start-up's objects (modules, config, schema) live as long as the process: out of the
        # collector's sight, a full collection walks what the rounds create, not ~100,000 more.
        gc.collect()
        gc.freeze()
        log_event(log, "info", "agent started", agent=agent_env["id"], jobs=len(jobs),
                  db=store.display_url, timer_slack_ms=round(slack * 1000, 3), **started)
        return scheduler, pipeline

    def _set_timer_slack(self, jobs: list[tuple[ProbeTarget, str, Any]]) -> float:
        """[agent] timer_slack, at most a tenth of the shortest interval between a round's requests."""
        shortest = min((s.interval for _, _, s in jobs if getattr(s, "interval", None)), default=None)
        slack = timer_slack_for(self.config.agent.timer_slack, shortest)
        set_timer_slack(slack)
        return slack

    async def _exporter(self, pipeline: Pipeline, uplink: Uplink | None,
                        alerts: Alerting | None) -> tuple[Any, Any]:
        """The Prometheus exporter when [metrics] listen is set: (Metrics, its HTTP Exporter)."""
        address = self.config.metrics.address()
        if address is None:
            return None, None
        from netprobe.agent.metrics import Exporter, Metrics

        metrics = Metrics(pipeline.stats, uplink_stats=(lambda: uplink.stats) if uplink is not None else None)
        if alerts is not None:
            from netprobe.alerts.metrics import alert_families

            metrics.add(functools.partial(alert_families, alerts))
        exporter = Exporter(metrics)
        try:
            await exporter.start(*address)
        except OSError as exc:
            raise SetupError(f"metrics.listen {self.config.metrics.listen}: {exc.strerror or exc}") from None
        log_event(log, "info", "metrics exporter listening",
                  url=f"http://{self.config.metrics.listen}/metrics")
        return metrics, exporter

    def _enrich(self, ctx: ProbeContext, old: Config | None) -> None:
        """GeoIP readers and line rules for mtr; databases reopened only when their paths change."""
        from netprobe.net.lines import LineClassifier

        geo = self.config.geoip
        ctx.classifier = LineClassifier(self.config.classification)
        if old is not None and old.geoip == geo:
            return
        if ctx.geoip is not None:
            ctx.geoip.close()
        ctx.geoip = None
        if geo.asn_path or geo.city_path:
            from netprobe.net.geoip import GeoIP  # maxminddb only when a database is configured

            ctx.geoip = GeoIP(geo.asn_path, geo.city_path)

    def _reload(self, scheduler: ProbeScheduler, ctx: ProbeContext) -> None:
        try:
            new = load_config(self.config_path)
            new.reflector.auth()        # a token file gone missing keeps the running configuration too
        except (ConfigError, SetupError) as exc:
            problems = exc.problems if isinstance(exc, ConfigError) else [str(exc)]
            log_event(log, "error", "reload failed; keeping the running configuration", problems=problems)
            return
        if new.storage.url != self.config.storage.url:
            log.warning("storage.url changed; restart the agent to switch databases")
        if new.uplink != self.config.uplink:
            log.warning("uplink changed; restart the agent to apply it")
        if new.metrics.listen != self.config.metrics.listen:
            log.warning("metrics.listen changed; restart the agent to move the exporter")
        if (new.alerts, new.notifiers) != (self.config.alerts, self.config.notifiers):
            log.warning("alerts or notifiers changed; restart the agent to apply them")
        old, self.config = self.config, new
        setup_logging(new.log.level, new.log.format)
        self._enrich(ctx, old)
        configure_context(ctx, new)
        jobs = self._jobs()
        slack = self._set_timer_slack(jobs)
        scheduler.set_jobs(jobs)
        log_event(log, "info", "configuration reloaded", jobs=len(jobs),
                  timer_slack_ms=round(slack * 1000, 3))
