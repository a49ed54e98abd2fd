"""Bulk import throughput: `netprobe db import FILE.jsonl` into a fresh SQLite file and a fresh PostgreSQL
database, in results per second.

    python3 bench/import_scale.py [--results 100000] [--order time|agent] [--shape fleet|hourly]
                                  [--backends sqlite,postgresql] [--collector]

Writes --results real envelopes (bench/ingest.py's: --agents × --targets on the agent's default-like
schedule, about 79 % icmp, 16 % tcp, 5 % mtr) to a JSON Lines file, one envelope per line. --order time
(the default) sorts them by start time across all agents, as a dump of a fleet's database is; --order
agent keeps each agent's rounds together in runs of 500, as the collector receives them. --shape hourly
writes one icmp round per agent × target × hour instead (default 2 agents × 100 targets, the slice
of the slow-import report), so that every round opens an hourly rollup row of its own. Each backend
gets a new database, migrated first (`netprobe db upgrade`, not timed); then `netprobe db import` runs
as a user runs it and is timed. Prints wall-clock results/s, the importer's CPU (and PostgreSQL's), and
checks that the database holds every round exactly once (rows and the rollups' round count).
--collector also runs bench/ingest.py on 20,000 envelopes for the collector's figure as a reference.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import (  # noqa: E402
    DEFAULT_PG,
    LINES,
    REGIONS,
    agent_rounds,
    cpu_seconds,
    postgres_cpu,
    scratch_database,
)

GOAL = 5000.0    # results per second, wall clock


def write_hourly(path: Path, args: argparse.Namespace) -> dict[str, int]:
    """One icmp round per agent × target × hour, going back from now, hour by hour: every round opens
    its own hourly rollup row (the issue's 90 days × 100 targets × 2 agents is --results 432000)."""
    from ingest import _icmp, _Pair

    from netprobe.probes.results import envelope, new_result_id

    rng = random.Random(args.seed)
    hours = -(-args.results // (args.agents * args.targets))
    start = (datetime.now(UTC) - timedelta(hours=hours)).replace(minute=0, second=0, microsecond=0)
    pairs = []
    for i in range(args.agents):
        region, isp = REGIONS[i % len(REGIONS)]
        agent = {"id": f"bench-{i:03d}", "region": region, "isp": isp, "timezone": "Asia/Shanghai"}
        for j in range(args.targets):
            target = {"id": f"dc-{j:03d}", "host": f"dc{j:03d}.bench.example.net", "datacenter": f"dc{j % 5}",
                      "line": LINES[j % len(LINES)][0]}
            pairs.append((agent, _Pair(rng, target, ((), ()), f"198.18.{j % 250}.{1 + i % 250}")))
    written = 0
    with path.open("w") as fh:
        for h in range(hours):
            for agent, pair in pairs:
                if written == args.results:
                    break
                started = start + timedelta(hours=h, seconds=rng.uniform(0, 3000))
                env = envelope(_icmp(rng, pair, started), agent, pair.target, result_id=new_result_id())
                fh.write(json.dumps(env, separators=(",", ":")) + "\n")
                written += 1
    return {"icmp": written}


def write_file(path: Path, args: argparse.Namespace) -> dict[str, int]:
    """The envelopes as JSON Lines; returns the count per probe. Each agent's rounds are serialised as
    soon as they are built, so only their text is held, not 100,000 dicts."""
    if args.shape == "hourly":
        return write_hourly(path, args)
    rng = random.Random(args.seed)
    start = (datetime.now(UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    per_agent = [args.results // args.agents + (i < args.results % args.agents) for i in range(args.agents)]
    lines: list[tuple[str, int, int, str]] = []     # (started_at, agent, position, text)
    probes: dict[str, int] = {}
    for i, n in enumerate(per_agent):
        for k, env in enumerate(agent_rounds(rng, i, n, args.targets, start)):
            probes[env["probe"]] = probes.get(env["probe"], 0) + 1
            key = env["started_at"] if args.order == "time" else f"{k // 500:08d}"
            lines.append((key, i, k, json.dumps(env, separators=(",", ":"))))
    lines.sort()
    with path.open("w") as fh:
        for *_, text in lines:
            fh.write(text + "\n")
    return probes


def netprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def db_counts(url: str) -> tuple[int, int, int]:
    """Rows stored, distinct ids, rounds in the hourly rollups, read with an engine as the store makes it."""
    from sqlalchemy import func, select

    from netprobe.store.engine import create_engine
    from netprobe.store.schema import probe_results, rollups_hourly
    from netprobe.store.urls import normalise_url

    engine = create_engine(normalise_url(url))
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(func.count()).select_from(probe_results))).scalar_one()
            ids = (await conn.execute(select(func.count(probe_results.c.id.distinct())))).scalar_one()
            rounds = (await conn.execute(select(func.coalesce(func.sum(rollups_hourly.c.rounds), 0))
                                         )).scalar_one()
        return int(rows), int(ids), int(rounds)
    finally:
        await engine.dispose()


class BackendCpu:
    """CPU seconds of the PostgreSQL backends serving one database: its pids (pg_stat_activity) are
    polled every `every` s from a thread and each one's utime+stime kept as last read. Other work on
    the server (other databases, background writers) is left out, which the figure for every postgres
    process includes; a backend's last `every` s before it exits are missed."""

    def __init__(self, url: str, every: float = 0.1) -> None:
        from sqlalchemy.engine import make_url

        u = make_url(url)
        self._db = u.database
        admin = u.set(drivername="postgresql", database="postgres")
        self._admin = admin.render_as_string(hide_password=False)
        self._every = every
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        import psycopg

        with psycopg.connect(self._admin, autocommit=True) as conn:
            while not self._stop.is_set():
                pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                                   (self._db,))]
                for pid in pids:
                    try:
                        self._seen[pid] = cpu_seconds(pid)
                    except (OSError, ValueError, IndexError):
                        pass     # exited meanwhile
                self._stop.wait(self._every)

    def __enter__(self) -> BackendCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self._seen.values())


def run_import(name: str, url: str, src: Path, total: int, goal: float) -> bool:
    up = netprobe("db", "upgrade", "--db", url)
    if up.returncode != 0:
        print(f"{name}: db upgrade failed:\n{up.stderr}")
        return False
    pg = name == "postgresql"
    backends = BackendCpu(url) if pg else contextlib.nullcontext()
    with backends:
        cpu0, pg0, t0 = children_cpu(), postgres_cpu() if pg else None, time.perf_counter()
        out = netprobe("db", "import", str(src), "--db", url)
        wall = time.perf_counter() - t0
        cpu, pg1 = children_cpu() - cpu0, postgres_cpu() if pg else None
    if out.returncode != 0:
        print(f"{name}: db import exited {out.returncode}:\n{out.stdout}{out.stderr[-2000:]}")
        return False
    rows, ids, rounds = asyncio.run(db_counts(url))
    exact = rows == ids == rounds == total and f"imported {total} results" in out.stdout
    rate = total / wall
    line = (f"{name:10s} {total} results in {wall:6.2f} s → {rate:7,.0f} results/s; importer CPU {cpu:.2f} s "
            f"({cpu / total * 1e6:.0f} µs per result)")
    if pg0 is not None and pg1 is not None:
        line += f"; PostgreSQL CPU {pg1 - pg0:.2f} s ({(pg1 - pg0) / total * 1e6:.0f} µs per result)"
    if isinstance(backends, BackendCpu):
        line += (f", of which its backends {backends.seconds:.2f} s "
                 f"({backends.seconds / total * 1e6:.0f} µs per result)")
    print(line)
    print(f"{'':10s} stored: {rows} rows, {ids} distinct, {rounds} rounds in the rollups — "
          f"{'exactly once' if exact else 'NOT exactly what the file holds'}; {out.stdout.strip()}")
    return exact and rate >= goal


def collector_reference(pg: str) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "ingest.py"), "--results", "20000",
                          "--pg", pg], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    figures = [ln for ln in out.stdout.splitlines() if ln.startswith(("timed:", "collector CPU"))]
    print("collector reference (bench/ingest.py --results 20000):")
    for ln in figures or [f"bench/ingest.py exited {out.returncode}: {out.stderr[-500:]}"]:
        print("   ", ln)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=int, default=100_000, help="envelopes in the file (default 100000)")
    ap.add_argument("--shape", choices=("fleet", "hourly"), default="fleet",
                    help="fleet: the agent's schedule (default); hourly: one icmp round per series and hour")
    ap.add_argument("--agents", type=int, help="default 50 (fleet), 2 (hourly)")
    ap.add_argument("--targets", type=int, help="default 8 (fleet), 100 (hourly)")
    ap.add_argument("--order", choices=("time", "agent"), default="time",
                    help="lines sorted by start time across agents (default), or in runs of one agent")
    ap.add_argument("--backends", default="sqlite,postgresql", help="comma-separated (default both)")
    ap.add_argument("--pg", default=DEFAULT_PG,
                    help=f"PostgreSQL maintenance database (default {DEFAULT_PG})")
    ap.add_argument("--file", type=Path, help="keep the JSON Lines file here (default: a temporary one)")
    ap.add_argument("--goal", type=float, default=GOAL, help="results/s to pass (default 5000)")
    ap.add_argument("--collector", action="store_true", help="also run bench/ingest.py for reference")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    hourly = args.shape == "hourly"
    args.agents = args.agents or (2 if hourly else 50)
    args.targets = args.targets or (100 if hourly else 8)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if min(args.results, args.agents, args.targets) < 1:
        ap.error("counts must be positive")
    if not backends or set(backends) - {"sqlite", "postgresql"}:
        ap.error("--backends: sqlite and/or postgresql")

    ok = True
    with tempfile.TemporaryDirectory(prefix="netprobe-import-") as tmp:
        src = args.file or Path(tmp) / "results.jsonl"
        t0 = time.perf_counter()
        probes = write_file(src, args)
        print(f"wrote {args.results} envelopes ({', '.join(f'{p} {n}' for p, n in sorted(probes.items()))}) "
              f"from {args.agents} agents × {args.targets} targets, "
              f"{'hourly' if hourly else args.order + ' order'}, "
              f"{src.stat().st_size / args.results:.0f} B per line ({time.perf_counter() - t0:.1f} s)")
        for name in backends:
            if name == "sqlite":
                ok &= run_import(name, f"sqlite:///{Path(tmp) / 'import.db'}", src, args.results, args.goal)
            else:
                with scratch_database(args.pg, keep=False) as url:
                    ok &= run_import(name, url, src, args.results, args.goal)
    if args.collector:
        collector_reference(args.pg)
    print(f"goal: ≥ {args.goal:,.0f} results/s on each backend")
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
