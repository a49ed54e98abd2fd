"""Reports at fleet scale (issue #10 point 1): `report peak` and `budget` over 90 days of a fleet's rollups.

    python3 bench/report_scale.py [--agents 10] [--targets 100] [--days 90] [--db postgresql|sqlite|both]
                                  [--fleet generated|imported] [--mtr-rounds N]
                                  [--repeat 3] [--timeout 600] [--scale-check [AXIS=A,B]] [--keep]
                                  [--existing URL ...]

Builds --agents × --targets × 4 probes (icmp, tcp, mtr, sse) × --days × 24 HOURLY rollup rows ending at the
current hour (defaults: 8.64 M rows), on a fresh PostgreSQL database (dropped at the end unless --keep)
and/or a fresh SQLite file, with the schema from `netprobe db upgrade` (the real migrations). Then it
times whole `netprobe` processes as `/usr/bin/time -v` would (wall, CPU, max RSS, from os.wait4):
`report peak --days 90` in every format, `report peak --days 7`, `budget --days 90` and `--days 7`,
in --repeat rounds of each command once (so `--days 7` is compared with `--days 90` round by round:
this project's VMs change speed from minute to minute).

The data is a fleet's: agents in Chinese regions and ISPs (Asia/Shanghai), one in Europe/Berlin and, from 6
agents on, one in America/Los_Angeles, so DST changes fall inside the 90 days; targets in five datacenters
with declared lines. Each agent × target route has a base RTT (30–200 ms) and an evening peak
(20:00–23:00 local): more RTT and jitter, and loss on "163" lines. An hour holds what an agent with the
default schedule rolls up: icmp 60 rounds × 20 echoes, tcp 60 × 5 connects, mtr 12 traces × 10 cycles,
sse 12 streams (emitter, or openai mode on every fourth target: server_first_ms, tpot_ms). So as not to
sketch 1,200 values per row, each route gets a pool of --pool distinct hours per probe and band
(peak/off-peak), each rolled up from real rounds by the store's own code (parse_envelope, accumulate),
and each stored hour is drawn from its pool. Rows are loaded hour by hour, as writers add them (COPY on
PostgreSQL, executemany in large transactions on SQLite). Then a few mtr rounds per route go through
Store.write (bench/ingest.py's traces), so each route has a detected line, and, when `netprobe db`
has it, `db rebuild-rollups` runs (timed) to build whatever the hourly rows feed.

Goals: < 1 s on PostgreSQL, < 3 s on SQLite, max RSS < 200 MB, `--days 7` no dearer than `--days 90`.
--scale-check times `--days 90` and `--days 7` at two fleet sizes (agents=A,B or days=A,B) and prints how
cost grows (days=8,90: whether `--days 7` costs more because 90 days are stored).
--existing URL times the commands on a database built before (as --keep leaves it), building nothing.

Fleets as users have them: `--mtr-rounds 0` is a fleet that runs no mtr (none runs rmtr here either),
and `--fleet imported` one that brought its history: one icmp round per agent × target × hour written as
envelopes and loaded by `netprobe db import` (timed), no traces, every raw round kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import ingest  # noqa: E402  (bench/ingest.py: scratch databases, PostgreSQL CPU, mtr traces)

DEFAULT_PG = os.environ.get("NETPROBE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PROBES = ("icmp", "tcp", "mtr", "sse")
GOAL_S = {"postgresql": 1.0, "sqlite": 3.0}
GOAL_RSS_MB = 200.0
SHORT_TOLERANCE = 1.05      # --days 7 may be this much dearer than --days 90 (run-to-run noise)
PEAK = range(20, 23)         # the report's default window, local hours

# (region, isp, zone); the first ones repeat, the DST ones appear once each (see _agent_specs)
CN_AGENTS = (("cn-east", "telecom"), ("cn-north", "unicom"), ("cn-south", "mobile"), ("cn-east", "unicom"),
             ("cn-west", "telecom"), ("cn-north", "mobile"))
BERLIN = ("eu-de", "dtag", "Europe/Berlin")
LOS_ANGELES = ("us-west", "comcast", "America/Los_Angeles")
# datacenter -> base RTT ms from (China, Europe, US west)
DATACENTERS = {"hk": (35.0, 185.0, 150.0), "tyo": (60.0, 200.0, 105.0), "sg": (75.0, 165.0, 170.0),
               "lax": (140.0, 150.0, 30.0), "fra": (195.0, 30.0, 150.0)}


# -- the fleet ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    agent: dict[str, Any]
    target: dict[str, Any]
    base_ms: float          # off-peak median RTT
    peak_factor: float      # RTT multiplier in the evening peak
    jitter_frac: float      # queueing delay scale, share of base (off-peak)
    loss: float             # per-request loss probability off-peak
    peak_loss: float        # ... in the peak
    openai: bool            # sse in openai mode (a model endpoint) rather than the emitter


@dataclass
class Fleet:
    agents: list[dict[str, Any]]
    targets: list[dict[str, Any]]
    routes: list[Route]
    lines: list[tuple[str, tuple[str, ...], tuple[str, ...]]]   # per target: ingest.LINES entry
    hours: list[datetime]                                          # UTC hour starts, oldest first


def _agent_specs(n: int) -> list[tuple[str, str, str]]:
    specs = [(*CN_AGENTS[i % len(CN_AGENTS)], "Asia/Shanghai") for i in range(n)]
    if n >= 2:
        specs[-1] = BERLIN
    if n >= 6:
        specs[-2] = LOS_ANGELES
    return specs


def build_fleet(n_agents: int, n_targets: int, days: int, seed: int, now: datetime | None = None) -> Fleet:
    rng = np.random.default_rng(seed)
    agents = [{"id": f"ag-{i:02d}-{region}-{isp}", "region": region, "isp": isp, "timezone": zone}
              for i, (region, isp, zone) in enumerate(_agent_specs(n_agents))]
    dcs = list(DATACENTERS)
    targets: list[dict[str, Any]] = []
    lines: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    for j in range(n_targets):
        dc = dcs[j % len(dcs)]
        sold, usual, other = ingest.LINES[j % len(ingest.LINES)]   # 5 × 8 coprime: every pair by 40
        targets.append({"id": f"{dc}-{sold}-{j:03d}", "host": f"t{j:03d}.{dc}.bench.example.net",
                        "datacenter": dc, "line": sold})
        lines.append((sold, usual, other))
    routes = []
    for agent in agents:
        origin = {"Europe/Berlin": 1, "America/Los_Angeles": 2}.get(agent["timezone"], 0)
        for j, target in enumerate(targets):
            line = target["line"]
            cheap = line in ("163", "cu-4837", "cmi")        # congested at the evening peak
            base = float(np.clip(DATACENTERS[target["datacenter"]][origin] * rng.uniform(0.85, 1.2)
                                 + (8.0 if cheap else 0.0), 30.0, 200.0))
            # (peak RTT factor, off-peak loss, peak loss) ranges
            if line == "163":
                ranges = ((1.3, 1.8), (0, 0.002), (0.01, 0.06))
            elif cheap:
                ranges = ((1.1, 1.35), (0, 0.001), (0.002, 0.01))
            else:
                ranges = ((1.02, 1.1), (0, 0.0005), (0, 0.001))
            factor, loss, peak_loss = (rng.uniform(lo, hi) for lo, hi in ranges)
            routes.append(Route(agent, target, base, float(factor), float(rng.uniform(0.01, 0.04)),
                                float(loss), float(peak_loss), openai=j % 4 == 0))
    now = now or datetime.now(UTC)
    last = now.replace(minute=0, second=0, microsecond=0)
    hours = [last - timedelta(hours=k) for k in range(days * 24 - 1, -1, -1)]
    return Fleet(agents, targets, routes, lines, hours)


def is_peak(hour: datetime, zone: ZoneInfo) -> bool:
    return hour.astimezone(zone).hour in PEAK


# -- one hour of one route, rolled up by the store's own code -----------------------------------------

_POOL_HOUR = datetime(2026, 1, 1, tzinfo=UTC)


def _rtts(rng: np.random.Generator, route: Route, peak: bool, shape: tuple[int, ...]) -> np.ndarray:
    """RTTs: the route's base (this hour's, a little off the mean) plus queueing delay, heavier at peak."""
    base = route.base_ms * (route.peak_factor if peak else 1.0) * rng.normal(1.0, 0.02)
    return base + rng.gamma(1.5, _queueing(route, peak) / 1.5, size=shape)


def _queueing(route: Route, peak: bool) -> float:
    """Mean queueing delay, ms: a congested line's grows more at the peak than a premium one's."""
    return route.base_ms * route.jitter_frac * (1.0 + 5.0 * (route.peak_factor - 1.0) if peak else 1.0)


def _lost(rng: np.random.Generator, route: Route, peak: bool, shape: tuple[int, int]) -> np.ndarray:
    """Lost requests; loss comes in bursts, so each round draws its own rate around the hour's."""
    p = route.peak_loss if peak else route.loss
    per_round = np.minimum(1.0, p * rng.gamma(0.5, 2.0, size=(shape[0], 1)))
    out: np.ndarray = rng.random(shape) < per_round
    return out


def _round(probe: str, k: int, every: int, result: dict[str, Any]) -> dict[str, Any]:
    started = _POOL_HOUR + timedelta(seconds=k * every + 3)
    # A whole, valid envelope: the store's parse_envelope checks it as strictly as the collector does.
    stamp = started.isoformat()
    return {"id": f"pool-{probe}-{k}", "probe": probe, "started_at": stamp,
            "agent": {"id": "pool"}, "target": {"id": "pool"},
            "result": {"probe": probe, "host": "pool", "started_at": stamp, **result}}


def _stats_json(stats: Any) -> dict[str, float] | None:
    return None if stats is None else stats.to_dict()


def _samples_rounds(probe: str, every: int, rtts: np.ndarray, lost: np.ndarray) -> list[dict[str, Any]]:
    from netprobe.stats import jitter, loss_pct, rtt_stats

    out = []
    for k, (row, gone) in enumerate(zip(rtts.tolist(), lost.tolist(), strict=True)):
        samples = [None if g else round(v, 3) for v, g in zip(row, gone, strict=True)]
        got = [v for v in samples if v is not None]
        body: dict[str, Any] = {"status": "ok" if got else "down", "sent": len(samples), "received": len(got),
                "loss_pct": loss_pct(len(samples), len(got)), "jitter_ms": jitter(samples),
                "samples_ms": samples, "rtt_ms": _stats_json(rtt_stats(got))}
        if probe == "tcp":             # a tcp round's figures are its connect times
            body["connect_ms"] = body.pop("rtt_ms")
            body["port"] = 443
            body["failures"] = {"timeout": len(samples) - len(got)} if len(got) < len(samples) else {}
        out.append(_round(probe, k, every, body))
    return out


def _sse_rounds(rng: np.random.Generator, route: Route, peak: bool) -> list[dict[str, Any]]:
    out = []
    rtt = _rtts(rng, route, peak, (12, 3))
    for k in range(12):
        if rng.random() < (route.peak_loss if peak else route.loss) * 2:
            out.append(_round("sse", k, 300, {"status": "down", "sent": 1, "received": 0, "loss_pct": 100.0,
                                              "samples_ms": [None], "error": "timeout"}))
            continue
        ttfb = float(rtt[k].sum()) + rng.uniform(1, 4)            # TCP + TLS 1.3 + request
        gap_p50 = 20.0 + rng.gamma(2, 0.5)
        jit = _queueing(route, peak)
        body: dict[str, Any] = {
            "status": "ok", "mode": "openai" if route.openai else "emitter", "sent": 1, "received": 1,
            "loss_pct": 0.0, "ttfb_ms": round(ttfb, 3),
            "gaps_ms": {"p50": gap_p50, "p95": gap_p50 + jit * rng.uniform(1, 3), "p99": gap_p50 + jit * 4,
                        "max": gap_p50 + jit * 10},
            "delay_var_ms": {"p50": jit * rng.uniform(0.2, 0.5), "p95": jit * rng.uniform(1.5, 3.0)},
            "stalls": int(rng.poisson(0.05 + 20 * (route.peak_loss if peak else route.loss))),
            "duration_s": float(rng.uniform(20, 40)),
            "completed": True}
        if route.openai:
            server = float(rng.lognormal(math.log(350 if peak else 250), 0.3))
            body["first_event_ms"] = round(ttfb + server, 3)
            body["tpot_ms"] = float(rng.lognormal(math.log(32 if peak else 25), 0.15))
            body["events"] = int(rng.integers(200, 600))
        else:
            body["first_event_ms"] = round(ttfb + rng.uniform(0.5, 3), 3)
            body["events"] = int(body["duration_s"] * 1000 / 20)
        body["samples_ms"] = [body["first_event_ms"]]
        out.append(_round("sse", k, 300, body))
    return out


def hour_rounds(rng: np.random.Generator, route: Route, probe: str, peak: bool) -> list[dict[str, Any]]:
    """One hour of one probe's rounds as envelopes, on the agent's default schedule."""
    if probe == "icmp":        # every 60 s, 20 echoes
        shape = (60, 20)
        return _samples_rounds("icmp", 60, _rtts(rng, route, peak, shape), _lost(rng, route, peak, shape))
    if probe == "tcp":         # every 60 s, 5 connects (one round trip, plus the kernel's accept)
        rtts = _rtts(rng, route, peak, (60, 5)) + rng.uniform(0.1, 0.4)
        return _samples_rounds("tcp", 60, rtts, _lost(rng, route, peak, (60, 5)))
    if probe == "mtr":         # every 300 s, 10 cycles: the destination hop's samples
        shape = (12, 10)
        return _samples_rounds("mtr", 300, _rtts(rng, route, peak, shape), _lost(rng, route, peak, shape))
    return _sse_rounds(rng, route, peak)


ROW_COLUMNS: tuple[str, ...] = ()      # Rollup.to_row()'s keys, filled on first use


def rollup_values(envelopes: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
    """The rollups_hourly values (Rollup.to_row(), in its order) of one hour of envelopes."""
    global ROW_COLUMNS
    from netprobe.store.envelopes import parse_envelope
    from netprobe.store.rollups import accumulate

    rollups = accumulate([parse_envelope(e) for e in envelopes])
    (rollup,) = rollups.values()
    row = rollup.to_row()
    if not ROW_COLUMNS:
        ROW_COLUMNS = tuple(row)
    return tuple(row.values())


@dataclass
class Pools:
    """Per route × probe × band (0 off-peak, 1 peak): `size` distinct hours' rollup values."""

    size: int
    values: list[list[list[list[tuple[Any, ...]]]]] = field(default_factory=list)   # [route][probe][band]


def build_pools(fleet: Fleet, size: int, seed: int, progress: bool = True) -> Pools:
    rng = np.random.default_rng(seed + 1)
    pools = Pools(size)
    t0 = time.perf_counter()
    for i, route in enumerate(fleet.routes):
        pools.values.append([[[rollup_values(hour_rounds(rng, route, probe, bool(band)))
                               for _ in range(size)] for band in (0, 1)] for probe in PROBES])
        if progress and (i + 1) % max(1, len(fleet.routes) // 10) == 0:
            print(f"  pools: {i + 1}/{len(fleet.routes)} routes ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    return pools


def hour_rows(fleet: Fleet, pools: Pools, seed: int) -> Iterator[tuple[datetime, list[tuple[int, int, int]]]]:
    """Hour by hour, every (route, probe, pool index) stored for it: what writers add in time order."""
    rng = np.random.default_rng(seed + 2)
    zones = [ZoneInfo(r.agent["timezone"]) for r in fleet.routes]
    zone_of = {z.key: z for z in zones}
    n = len(fleet.routes)
    for hour in fleet.hours:
        peak_by_zone = {k: int(is_peak(hour, z)) for k, z in zone_of.items()}
        bands = [peak_by_zone[z.key] for z in zones]
        picks = rng.integers(0, pools.size, size=(n, len(PROBES))).tolist()
        yield hour, [(r, p, bands[r] * pools.size + picks[r][p])
                     for r in range(n) for p in range(len(PROBES))]


# -- loading ----------------------------------------------------------------------------------------------

def run_netprobe(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netprobe.cli", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def has_rebuild() -> bool:
    return "rebuild-rollups" in run_netprobe("db", "--help").stdout


def _pg_dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _copy_text(v: Any) -> str:
    if v is None:
        return r"\N"
    if isinstance(v, str):
        return v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return repr(v) if isinstance(v, float) else str(v)


def _ref_rows(fleet: Fleet) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    import json

    first, last = fleet.hours[0], fleet.hours[-1] + timedelta(minutes=59)
    agents = [(a["id"], a["region"], a["isp"], a["timezone"], json.dumps(a), first, last)
              for a in fleet.agents]
    targets = [(t["id"], t["host"], t["datacenter"], t["line"], json.dumps(t), first, last)
               for t in fleet.targets]
    return agents, targets


_AGENT_COLS = "id, region, isp, timezone, info, first_seen, last_seen"
_TARGET_COLS = "id, host, datacenter, line, info, first_seen, last_seen"


def _hourly_cols() -> str:
    return ", ".join(("agent_id", "target_id", "probe", "hour", *ROW_COLUMNS, "updated_at"))


def load_postgresql(url: str, fleet: Fleet, pools: Pools, seed: int) -> int:
    """COPY every hour row, hour by hour; returns the rows written."""
    import psycopg

    tails = [[[["\t".join(map(_copy_text, v)) for v in band] for band in probe] for probe in route]
             for route in pools.values]
    flat = [[[*b[0], *b[1]] for b in route] for route in tails]     # [route][probe][band*size + i]
    keys = [(r.agent["id"], r.target["id"]) for r in fleet.routes]
    n = 0
    agents, targets = _ref_rows(fleet)
    with psycopg.connect(_pg_dsn(url)) as conn:
        conn.execute("SET synchronous_commit = off")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO agents ({_AGENT_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", agents)
            cur.executemany(f"INSERT INTO targets ({_TARGET_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                            targets)
            with cur.copy(f"COPY rollups_hourly ({_hourly_cols()}) FROM STDIN") as copy:
                for hour, rows in hour_rows(fleet, pools, seed):
                    stamp = hour.isoformat(sep=" ")
                    updated = (hour + timedelta(minutes=59, seconds=30)).isoformat(sep=" ")
                    copy.write("".join(f"{keys[r][0]}\t{keys[r][1]}\t{PROBES[p]}\t{stamp}\t{flat[r][p][i]}\t"
                                       f"{updated}\n" for r, p, i in rows))
                    n += len(rows)
        conn.commit()
    return n


def load_sqlite(path: Path, fleet: Fleet, pools: Pools, seed: int, batch_rows: int = 200_000) -> int:
    """executemany in large transactions, WAL and synchronous=OFF while loading; returns the rows."""
    from sqlalchemy.dialects import sqlite as sqlite_dialect

    from netprobe.store.schema import rollups_hourly

    dialect = sqlite_dialect.dialect()
    processor = rollups_hourly.c.hour.type.dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None

    def stamp_of(ts: datetime) -> str:      # as SQLAlchemy writes the column
        return str(processor(ts))
    flat = [[[*b[0], *b[1]] for b in route] for route in pools.values]
    keys = [(r.agent["id"], r.target["id"]) for r in fleet.routes]
    agents, targets = _ref_rows(fleet)
    cols = _hourly_cols()
    marks = ", ".join("?" * (len(ROW_COLUMNS) + 5))
    conn = sqlite3.connect(path, isolation_level=None)
    n = 0
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO agents ({_AGENT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(*a[:5], stamp_of(a[5]), stamp_of(a[6])) for a in agents])
        conn.executemany(f"INSERT INTO targets ({_TARGET_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(*t[:5], stamp_of(t[5]), stamp_of(t[6])) for t in targets])
        pending = 0
        sql = f"INSERT INTO rollups_hourly ({cols}) VALUES ({marks})"
        for hour, rows in hour_rows(fleet, pools, seed):
            stamp, updated = stamp_of(hour), stamp_of(hour + timedelta(minutes=59, seconds=30))
            conn.executemany(sql, ((keys[r][0], keys[r][1], PROBES[p], stamp, *flat[r][p][i], updated)
                                   for r, p, i in rows))
            n += len(rows)
            pending += len(rows)
            if pending >= batch_rows:
                conn.execute("COMMIT")
                conn.execute("BEGIN")
                pending = 0
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return n


async def write_mtr_rounds(url: str, fleet: Fleet, rounds: int, seed: int) -> int:
    """`rounds` mtr traces per route in the last hour, through Store.write (path events, detected line)."""
    from netprobe.net.lines import LineClassifier
    from netprobe.probes.results import new_result_id
    from netprobe.store import open_store
    from netprobe.store.envelopes import envelope_of

    if rounds < 1:
        return 0
    rng = random.Random(seed + 3)
    classifier = LineClassifier.default()
    now = datetime.now(UTC)
    last = fleet.hours[-1]
    span = max(60.0, min(3000.0, (now - last).total_seconds() - 30))
    store = await open_store(url, upgrade=False)
    n = 0
    try:
        n_targets = len(fleet.targets)
        for a, agent in enumerate(fleet.agents):
            batch = []
            for j, target in enumerate(fleet.targets):
                route = fleet.routes[a * n_targets + j]
                _, usual, other = fleet.lines[j]
                pair = ingest._Pair(rng, target, (usual, other), f"198.18.{j % 250}.{1 + a % 250}")
                pair.base, pair.loss = route.base_ms, route.loss
                for k in range(rounds):
                    started = last + timedelta(seconds=span * (k + 0.5) / rounds + rng.uniform(0, 5))
                    result = ingest._mtr(rng, pair, started, classifier)
                    batch.append(envelope_of(result, agent, target, result_id=new_result_id()))
            for k in range(0, len(batch), 500):
                n += (await store.write(batch[k:k + 500])).accepted
    finally:
        await store.close()
    return n


async def table_counts(url: str) -> dict[str, int]:
    """Rows of every rollup table present (the hourly one and any the report grows), and probe_results."""
    from sqlalchemy import inspect, text

    from netprobe.store.engine import create_engine
    from netprobe.store.urls import normalise_url

    engine = create_engine(normalise_url(url))
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: inspect(c).get_table_names())
            wanted = [*sorted(n for n in names if "rollup" in n), "probe_results", "path_changes"]
            return {name: int((await conn.execute(text(f'SELECT count(*) FROM "{name}"'))).scalar() or 0)
                    for name in wanted if name in names}
    finally:
        await engine.dispose()


# -- timing whole processes ---------------------------------------------------------------------------------

@dataclass
class Run:
    wall_s: float
    cpu_s: float
    rss_mb: float
    pg_cpu_s: float | None
    status: int | None          # exit status; None: killed at the timeout


# Forks the command from a small process and reports its wait4 figures: a child forked straight from
# this benchmark would inherit its peak RSS (Linux keeps the larger of the old and new image's peak
# across exec), so every command would show the benchmark's own, larger peak.
_TRAMPOLINE = """
import os, sys, time
os.setsid()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "netprobe.cli", *sys.argv[2:]])
_, raw, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{time.perf_counter() - t0} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss} "
             f"{os.waitstatus_to_exitcode(raw)}")
"""


def time_process(args: Sequence[str], out: Path, timeout: float, pg: bool) -> tuple[Run, str]:
    """Run `netprobe ARGS` with stdout to `out`; wall, CPU and max RSS as /usr/bin/time -v reports them
    (wait4 on the process), and PostgreSQL's CPU meanwhile. Returns the run and the child's stderr."""
    err_path, usage_path = out.with_suffix(".err"), out.with_suffix(".usage")
    usage_path.unlink(missing_ok=True)
    pg0 = ingest.postgres_cpu() if pg else None
    with out.open("wb") as stdout, err_path.open("wb") as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-S", "-c", _TRAMPOLINE, str(usage_path), *args],
                                stdout=stdout, stderr=stderr, cwd=ROOT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        wall = time.perf_counter() - t0
    pg1 = ingest.postgres_cpu() if pg else None
    pg_cpu = pg1 - pg0 if pg0 is not None and pg1 is not None else None
    if usage_path.exists():
        w, cpu, rss, code = usage_path.read_text().split()
        run = Run(float(w), float(cpu), int(rss) / 1024.0, pg_cpu, int(code))
    else:                       # killed at the timeout
        run = Run(wall, float("nan"), float("nan"), pg_cpu, None)
    return run, err_path.read_text(errors="replace")


BASELINE = "startup (report for no agent)"


def commands(url: str) -> list[tuple[str, list[str]]]:
    """The timed commands; the first, a report that selects nothing, is what any command costs."""
    report = ["report", "peak", "--db", url]
    budget = ["budget", "--db", url, "--ttft-ms", "1000"]
    return ([(BASELINE, [*report, "--days", "1", "--agent", "no-such-agent", "--format", "json"])]
            + [(f"report peak --days 90 --format {f}", [*report, "--days", "90", "--format", f])
             for f in ("table", "json", "md", "html")]
            + [("report peak --days 7", [*report, "--days", "7"]),
               ("budget --days 90", [*budget, "--days", "90"]),
               ("budget --days 7", [*budget, "--days", "7"])])


@dataclass
class Timing:
    name: str
    runs: list[Run]
    note: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.status == 0 for r in self.runs)

    @property
    def median(self) -> float:
        return statistics.median(r.wall_s for r in self.runs)

    @property
    def rss(self) -> float:
        return max(r.rss_mb for r in self.runs)


def compile_package() -> None:
    """Byte-compile netprobe once, as an installed package is: with PYTHONDONTWRITEBYTECODE set (as in
    some shells and CI images) every start would compile its modules from source, a large part of a
    short command's start-up, which no user's install pays."""
    import compileall

    import netprobe

    compileall.compile_dir(str(Path(netprobe.__file__).parent), quiet=1)


def time_commands(url: str, names: Sequence[str] | None, repeat: int, timeout: float,
                  out_dir: Path) -> list[Timing]:
    """Each command once per round, `repeat` rounds: a VM whose speed drifts from minute to minute
    slows every command of a round alike, so commands compared with each other (--days 7 against
    --days 90) are compared round by round (paired_ratio). A command that fails is not run again."""
    compile_package()
    chosen = [(k, name, args) for k, (name, args) in enumerate(commands(url))
              if names is None or name in names]
    timings = {name: Timing(name, []) for _, name, _ in chosen}
    for _ in range(repeat):
        for k, name, args in chosen:
            t = timings[name]
            if t.runs and not t.ok:        # failed or killed: once is enough
                continue
            run, err = time_process(args, out_dir / f"cmd{k}.out", timeout, url.startswith("postgresql"))
            t.runs.append(run)
            if run.status is None:
                t.note = f"killed at the {timeout:g} s timeout"
            elif run.status != 0:
                t.note = f"exit {run.status}: {err.strip().splitlines()[-1] if err.strip() else ''}"
            elif (out_dir / f"cmd{k}.out").stat().st_size == 0:
                t.note = "empty output"
    for t in timings.values():
        print_timing(t)
    return list(timings.values())


def paired_ratio(a: Timing, b: Timing) -> float:
    """The median over rounds of a's wall / b's wall in the same round."""
    return statistics.median(x.wall_s / y.wall_s for x, y in zip(a.runs, b.runs, strict=False))


def print_timing(t: Timing) -> None:
    walls = sorted(r.wall_s for r in t.runs)
    cpu = statistics.median(r.cpu_s for r in t.runs)
    pg = [r.pg_cpu_s for r in t.runs if r.pg_cpu_s is not None]
    pg_text = f"  pg cpu {statistics.median(pg):6.2f} s" if pg else ""
    prefix = ">" if any(r.status is None for r in t.runs) else " "
    print(f"  {t.name:<36} wall min/med/max {walls[0]:7.2f} /{prefix}{t.median:7.2f} / {walls[-1]:7.2f} s  "
          f"cpu {cpu:6.2f} s{pg_text}  max RSS {t.rss:7.1f} MB  ({len(t.runs)} run{'s' * (len(t.runs) > 1)})"
          + (f"  [{t.note}]" if t.note else ""), flush=True)


def verdict(dialect: str, timings: Sequence[Timing]) -> bool:
    goal = GOAL_S[dialect]
    base = next((t for t in timings if t.name == BASELINE), None)
    timings = [t for t in timings if t.name != BASELINE]
    by = {t.name: t for t in timings}
    worst = max(timings, key=lambda t: (not t.ok, t.median))
    wall_ok = all(t.ok for t in timings) and worst.median < goal
    rss = max(timings, key=lambda t: t.rss)
    rss_ok = rss.rss < GOAL_RSS_MB
    print(f"  verdict {dialect}: wall {'PASS' if wall_ok else 'FAIL'} (slowest median {worst.median:.2f} s, "
          f"{worst.name}; goal < {goal:g} s); memory {'PASS' if rss_ok else 'FAIL'} "
          f"(max RSS {rss.rss:.0f} MB, {rss.name}; goal < {GOAL_RSS_MB:g} MB)")
    if base is not None and base.ok:
        print(f"  ({dialect}: of which any command's start-up: {base.median:.2f} s, {base.rss:.0f} MB)")
    short_ok = True
    for short, long in (("report peak --days 7", "report peak --days 90 --format table"),
                        ("budget --days 7", "budget --days 90")):
        if short in by and long in by and by[short].ok and by[long].ok:
            ratio = paired_ratio(by[short], by[long])
            good = ratio <= SHORT_TOLERANCE
            short_ok &= good
            print(f"  verdict {dialect}: {short} costs {ratio:.2f}× {long.split(' --format')[0]} "
                  f"(median of {min(len(by[short].runs), len(by[long].runs))} rounds' ratios; "
                  f"{'PASS' if good else 'FAIL'}: no dearer, {SHORT_TOLERANCE:g}× allowed for noise)")
        else:
            short_ok = False
    return wall_ok and rss_ok and short_ok


# -- databases ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def database(dialect: str, args: argparse.Namespace, tmp: Path, tag: str) -> Iterator[str]:
    if dialect == "postgresql":
        with ingest.scratch_database(args.pg, args.keep) as url:
            yield url
        return
    path = tmp / f"report_scale_{tag}.db"
    yield f"sqlite:///{path}"
    if args.keep:
        kept = Path(tempfile.gettempdir()) / path.name
        path.replace(kept)
        print(f"kept SQLite file {kept}")


def populate(dialect: str, url: str, fleet: Fleet, pools: Pools, args: argparse.Namespace) -> dict[str, Any]:
    """Schema, hour rows, mtr rounds, the rebuild if there is one; prints and returns what it took."""
    spent: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_netprobe("db", "upgrade", "--db", url)
    t1 = time.perf_counter()
    if dialect == "postgresql":
        rows = load_postgresql(url, fleet, pools, args.seed)
    else:
        rows = load_sqlite(Path(url.removeprefix("sqlite:///")), fleet, pools, args.seed)
    t2 = time.perf_counter()
    mtr = asyncio.run(write_mtr_rounds(url, fleet, args.mtr_rounds, args.seed))
    t3 = time.perf_counter()
    print(f"  {dialect}: schema {t1 - t0:.1f} s; {rows:,} hour rows loaded in {t2 - t1:.1f} s "
          f"({rows / max(t2 - t1, 1e-9):,.0f} rows/s); {mtr} mtr rounds through Store.write in "
          f"{t3 - t2:.1f} s",
          flush=True)
    if dialect == "postgresql":      # what autovacuum would have done to a table that grew over 90 days
        import psycopg

        with psycopg.connect(_pg_dsn(url), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        print(f"  postgresql: VACUUM ANALYZE {time.perf_counter() - t3:.1f} s", flush=True)
    if args.rebuild and has_rebuild():
        with tempfile.TemporaryDirectory() as out:
            # not --timeout × 10: a short --timeout for the commands killed a full fleet's fold at 20 min
            run, err = time_process(["db", "rebuild-rollups", "--db", url], Path(out) / "rebuild.out",
                                    max(args.timeout * 10, 4 * 3600.0), dialect == "postgresql")
        if run.status != 0:
            raise RuntimeError(f"db rebuild-rollups exited {run.status}:\n{err[-3000:]}")
        pg = f", pg cpu {run.pg_cpu_s:.1f} s" if run.pg_cpu_s is not None else ""
        print(f"  {dialect}: db rebuild-rollups {run.wall_s:.1f} s wall, cpu {run.cpu_s:.1f} s{pg}, "
              f"max RSS {run.rss_mb:.0f} MB", flush=True)
        if dialect == "postgresql":  # as autovacuum would: the fold's table was analysed while empty
            import psycopg

            with psycopg.connect(_pg_dsn(url), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE rollups_prefix")
        spent["rebuild"] = run
    elif args.rebuild:
        print(f"  {dialect}: no `netprobe db rebuild-rollups` in this version: step skipped", flush=True)
    counts = asyncio.run(table_counts(url))
    print(f"  {dialect}: rows " + ", ".join(f"{k} {v:,}" for k, v in counts.items()), flush=True)
    spent.update(counts=counts, rows=rows)
    return spent


def dialects(choice: str) -> list[str]:
    return ["postgresql", "sqlite"] if choice == "both" else [choice]


def fleet_line(fleet: Fleet) -> str:
    zones = sorted({a["timezone"] for a in fleet.agents})
    return (f"{len(fleet.agents)} agents ({', '.join(zones)}) × {len(fleet.targets)} targets × "
            f"{len(PROBES)} probes × {len(fleet.hours)} hours = "
            f"{len(fleet.routes) * len(PROBES) * len(fleet.hours):,} hour rows")


def prepare(n_agents: int, n_targets: int, days: int, args: argparse.Namespace) -> tuple[Fleet, Pools]:
    fleet = build_fleet(n_agents, n_targets, days, args.seed)
    print(f"fleet: {fleet_line(fleet)}", flush=True)
    t0 = time.perf_counter()
    pools = build_pools(fleet, args.pool, args.seed)
    print(f"pools: {args.pool} hours per route × probe × band, {len(fleet.routes) * 8 * args.pool:,} hour "
          f"rollups from real rounds in {time.perf_counter() - t0:.1f} s", flush=True)
    return fleet, pools


def imported(args: argparse.Namespace) -> bool:
    """--fleet imported: the fleet as a user who brings history has it: one icmp round per agent ×
    target × hour, no mtr or rmtr round, written as envelopes and loaded by `netprobe db import` (timed)."""
    import import_scale

    ok = True
    with tempfile.TemporaryDirectory(prefix="netprobe-report-scale-") as tmp_name:
        tmp = Path(tmp_name)
        src = tmp / "history.jsonl"
        n = args.agents * args.targets * args.days * 24
        t0 = time.perf_counter()
        import_scale.write_hourly(src, argparse.Namespace(results=n, agents=args.agents, targets=args.targets,
                                                          seed=args.seed))
        print(f"history: {n:,} hourly icmp rounds of {args.agents} agents × {args.targets} targets × "
              f"{args.days} days, {src.stat().st_size / 2**30:.1f} GiB of JSON Lines in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        for dialect in dialects(args.db):
            print(f"[{dialect}]", flush=True)
            with database(dialect, args, tmp, "imported") as url:
                run_netprobe("db", "upgrade", "--db", url)
                run, err = time_process(["db", "import", str(src), "--db", url], tmp / "import.out",
                                        max(args.timeout * 10, 4 * 3600.0), dialect == "postgresql")
                if run.status != 0:
                    raise RuntimeError(f"db import exited {run.status}:\n{err[-3000:]}")
                pg = f", pg cpu {run.pg_cpu_s:.1f} s" if run.pg_cpu_s is not None else ""
                print(f"  {dialect}: db import {run.wall_s:.1f} s wall ({n / run.wall_s:,.0f} results/s), "
                      f"cpu {run.cpu_s:.1f} s{pg}, max RSS {run.rss_mb:.0f} MB", flush=True)
                if dialect == "postgresql":     # as autovacuum would have, over 90 days
                    import psycopg

                    with psycopg.connect(_pg_dsn(url), autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE")
                counts = asyncio.run(table_counts(url))
                print(f"  {dialect}: rows " + ", ".join(f"{k} {v:,}" for k, v in counts.items()), flush=True)
                timings = time_commands(url, None, args.repeat, args.timeout, tmp)
                ok &= verdict(dialect, timings)
    return ok


def bench(args: argparse.Namespace) -> bool:
    fleet, pools = prepare(args.agents, args.targets, args.days, args)
    ok = True
    with tempfile.TemporaryDirectory(prefix="netprobe-report-scale-") as tmp_name:
        tmp = Path(tmp_name)
        for dialect in dialects(args.db):
            print(f"[{dialect}]", flush=True)
            with database(dialect, args, tmp, "main") as url:
                populate(dialect, url, fleet, pools, args)
                timings = time_commands(url, None, args.repeat, args.timeout, tmp)
                ok &= verdict(dialect, timings)
    return ok


def existing(args: argparse.Namespace) -> bool:
    """The commands and verdicts on databases built before (the fold is taken as it is)."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="netprobe-report-scale-") as tmp_name:
        for url in args.existing:
            dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
            print(f"[{dialect}] {url}", flush=True)
            timings = time_commands(url, None, args.repeat, args.timeout, Path(tmp_name))
            ok &= verdict(dialect, timings)
    return ok


def scale_check(args: argparse.Namespace) -> bool:
    axis, _, values = args.scale_check.partition("=")
    if args.scale_check == "auto":
        axis, sizes = "agents", [max(1, args.agents // 5), args.agents]
    else:
        sizes = [int(v) for v in values.split(",") if v.strip()]
    # --days 7 too: the "no dearer because 90 days are stored", measured as it says (days=8,90)
    names = (BASELINE, "report peak --days 90 --format json", "report peak --days 7", "budget --days 90",
             "budget --days 7")
    results: dict[tuple[str, int], list[Timing]] = {}
    rows: dict[tuple[str, int], int] = {}
    with tempfile.TemporaryDirectory(prefix="netprobe-report-scale-") as tmp_name:
        tmp = Path(tmp_name)
        for size in sizes:
            agents = size if axis == "agents" else args.agents
            days = size if axis == "days" else args.days
            fleet, pools = prepare(agents, args.targets, days, args)
            for dialect in dialects(args.db):
                print(f"[{dialect}, {axis}={size}]", flush=True)
                with database(dialect, args, tmp, f"{axis}{size}") as url:
                    rows[(dialect, size)] = populate(dialect, url, fleet, pools, args)["rows"]
                    results[(dialect, size)] = time_commands(url, names, args.repeat, args.timeout, tmp)
            del pools
    print(f"scale check ({axis} {' → '.join(map(str, sizes))}):")
    for dialect in dialects(args.db):
        small, large = sizes[0], sizes[-1]
        growth = rows[(dialect, large)] / rows[(dialect, small)]
        for a, b in zip(results[(dialect, small)], results[(dialect, large)], strict=True):
            print(f"  {dialect:<10} {a.name:<36} {a.median:7.2f} s → {b.median:7.2f} s "
                  f"(×{b.median / a.median:.2f}), max RSS {a.rss:6.0f} → {b.rss:6.0f} MB "
                  f"(×{b.rss / a.rss:.2f}); hour rows ×{growth:.2f}")
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--days", type=int, default=90, help="days of hourly rollups, ending at the current hour")
    ap.add_argument("--db", choices=("postgresql", "sqlite", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds before a command is killed and counted as too slow (default 600)")
    ap.add_argument("--pool", type=int, default=48,
                    help="distinct hours per route × probe × band drawn from (default 48)")
    ap.add_argument("--mtr-rounds", type=int, default=3,
                    help="mtr rounds per route through Store.write (0: a fleet that runs no mtr)")
    ap.add_argument("--fleet", choices=("generated", "imported"), default="generated",
                    help="generated: hourly rollups of four probes loaded directly (default); imported: "
                    "hourly icmp rounds as envelopes through `netprobe db import`, no traces")
    ap.add_argument("--no-rebuild", dest="rebuild", action="store_false",
                    help="skip `netprobe db rebuild-rollups` even where it exists")
    ap.add_argument("--scale-check", nargs="?", const="auto", metavar="AXIS=A,B",
                    help="time --days 90 and --days 7 at two fleet sizes: agents=2,10 or days=8,90 "
                    "(bare: agents=--agents/5,--agents)")
    ap.add_argument("--pg", default=DEFAULT_PG,
                    help=f"PostgreSQL maintenance database (default {DEFAULT_PG})")
    ap.add_argument("--keep", action="store_true", help="keep the PostgreSQL database / SQLite file")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--existing", action="append", metavar="URL", default=[],
                    help="time the commands on this database as it is (one --keep left), building nothing; "
                    "repeatable")
    args = ap.parse_args()
    if min(args.agents, args.targets, args.days, args.repeat, args.pool) < 1 or args.timeout <= 0:
        ap.error("--agents, --targets, --days, --repeat, --pool and --timeout must be positive")
    if args.scale_check not in (None, "auto"):
        axis, _, values = args.scale_check.partition("=")
        sizes = values.split(",")
        if axis not in ("agents", "days") or len(sizes) != 2 or not all(v.strip().isdigit() and int(v) > 0
                                                                        for v in sizes):
            ap.error(f"--scale-check: expected agents=A,B or days=A,B, got {args.scale_check!r}")
    t0 = time.perf_counter()
    ok = (existing(args) if args.existing else scale_check(args) if args.scale_check
          else imported(args) if args.fleet == "imported" else bench(args))
    print(f"total {time.perf_counter() - t0:.0f} s")
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
