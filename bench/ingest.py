"""Collector ingest throughput: result envelopes per second into PostgreSQL through POST /api/v1/results.

    python3 bench/ingest.py [--results 60000] [--batch 500] [--clients 4] [--collectors 1]

Creates a scratch database on the PostgreSQL server (--pg; dropped afterwards), issues one token per
agent, starts `netprobe collector run` on 127.0.0.1 (--collectors N: N processes on the same database,
requests dealt round-robin), and uploads pre-built gzip batches (level 5 JSON, as the agent's uplink
sends them) from --clients concurrent connections. The envelopes are real ones (netprobe.probes.results
records): --agents × --targets on the agent's default-like schedule, icmp every 60 s (20 echoes),
tcp every 5 min (5 connects), mtr every 15 min (10 cycles, ~10 hops, a route that sometimes flips),
about 79 % icmp, 16 % tcp, 5 % mtr, so each batch spans about an hour of one agent's rounds and the
rollups spread over agent × target × probe × hour rows as real traffic does.

Prints wall-clock results/s, the collectors' CPU seconds (/proc/PID/stat) and results per collector
CPU-second (the issue's goal: ≥ 5,000 per core), PostgreSQL's CPU (every postgres process, exited
backends included), the client's CPU, request latency p50/p95/max, and checks that the database holds
exactly the rounds sent (probe_results rows and the rollups' round count). Client, collector and
PostgreSQL share the machine's cores: with two, the wall-clock figure is bounded by all three.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLK = os.sysconf("SC_CLK_TCK")
DEFAULT_PG = os.environ.get("NETPROBE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
GOAL = 5000.0    # results per CPU-second of the collector

# seconds between rounds of one target, as an agent's defaults schedule them
SCHEDULE = (("icmp", 60), ("tcp", 300), ("mtr", 900))
# (line sold, backbone hop prefixes on the usual path, on the occasional other path)
LINES = (("cn2-gia", ("59.43",), ("202.97",)), ("cn2-gia", ("59.43",), ("202.97", "59.43")),
         ("cn2-gt", ("202.97", "59.43"), ("202.97",)), ("163", ("202.97",), ("202.97",)),
         ("cu-9929", ("218.105",), ("219.158",)), ("cu-4837", ("219.158",), ("219.158",)),
         ("cmin2", ("223.120.16",), ("223.118",)), ("cmi", ("223.118",), ("223.119",)))
REGIONS = (("cn-east", "telecom"), ("cn-north", "unicom"), ("cn-south", "mobile"), ("cn-west", "telecom"))
FLIP = 0.1        # share of mtr rounds that take the other path (path-change and line events)


# -- envelopes ----------------------------------------------------------------------------------------

def _samples(rng: random.Random, n: int, base: float, loss: float) -> list[float | None]:
    return [None if rng.random() < loss else base + rng.expovariate(1 / (0.03 * base + 0.2))
            for _ in range(n)]


def _address(rng: random.Random, prefix: str) -> str:
    parts = prefix.split(".")
    return ".".join(parts + [str(rng.randrange(1, 255)) for _ in range(4 - len(parts))])


class _Pair:
    """One agent × target: its base RTT, loss and two mtr paths (hop addresses)."""

    def __init__(self, rng: random.Random, target: dict[str, Any], backbones: tuple[tuple[str, ...], ...],
                 dest: str) -> None:
        self.base = rng.uniform(8, 220)
        self.loss = rng.choice((0.0, 0.0, 0.002, 0.01, 0.05))
        self.target = target
        self.dest = dest
        self.paths = []
        for backbone in backbones:
            hops: list[str | None] = [f"10.{rng.randrange(256)}.0.1", _address(rng, "61.152")]
            for prefix in backbone:
                hops += [_address(rng, prefix) for _ in range(2)]
            hops += [None] + [_address(rng, "103.40") for _ in range(9 - len(hops))] + [dest]
            self.paths.append(hops)


def _icmp(rng: random.Random, pair: _Pair, started: datetime) -> Any:
    from netprobe.probes.icmp.runtime import IcmpResult
    from netprobe.stats import jitter, loss_pct, rtt_stats

    samples = _samples(rng, 20, pair.base, pair.loss)
    got = [s for s in samples if s is not None]
    return IcmpResult(probe="icmp", host=pair.target["host"], started_at=started, address=pair.dest,
                      duration_ms=19 * 500 + max(got, default=2000.0), status="ok" if got else "down",
                      sent=20, received=len(got), loss_pct=loss_pct(20, len(got)), rtt_ms=rtt_stats(got),
                      jitter_ms=jitter(samples), samples_ms=samples)


def _tcp(rng: random.Random, pair: _Pair, started: datetime) -> Any:
    from netprobe.probes.tcp.runtime import TcpResult
    from netprobe.stats import jitter, loss_pct, rtt_stats

    samples = _samples(rng, 5, pair.base, pair.loss / 2)
    got = [s for s in samples if s is not None]
    return TcpResult(probe="tcp", host=pair.target["host"], started_at=started, address=pair.dest,
                     duration_ms=sum(got) + 1.5, status="ok" if got else "down", port=443, sent=5,
                     received=len(got), loss_pct=loss_pct(5, len(got)), dns_ms=rng.uniform(0.2, 30),
                     connect_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples,
                     failures={"timeout": 5 - len(got)} if len(got) < 5 else {})


def _mtr(rng: random.Random, pair: _Pair, started: datetime, classifier: Any) -> Any:
    from netprobe.probes.mtr.hops import Hop, flag_rate_limited, label_path
    from netprobe.probes.mtr.runtime import MtrResult
    from netprobe.stats import jitter, rtt_stats

    addresses = pair.paths[1 if rng.random() < FLIP else 0]
    hops = []
    for ttl, address in enumerate(addresses, 1):
        base = pair.base * ttl / len(addresses)
        if address is None:
            hops.append(Hop(ttl, [], [None] * 10))
        else:   # an intermediate router that rate-limits its ICMP now and then
            loss = pair.loss if address == pair.dest else rng.choice((0.0, 0.0, 0.3))
            hops.append(Hop(ttl, [address], _samples(rng, 10, base, loss)))
    flag_rate_limited(hops)
    route = label_path(hops, classifier, None, pair.target["line"])
    samples = list(hops[-1].samples_ms)
    got = [s for s in samples if s is not None]
    return MtrResult(
        probe="mtr", host=pair.target["host"], address=pair.dest, started_at=started,
        status="ok" if got else "down", duration_ms=10_000.0, cycles=10, max_hops=30, reached=bool(got),
        source="bench-agent", hops=hops, packet_size=64,
        route=replace(route, path_loss_pct=hops[-1].loss_pct, declared_line=pair.target["line"]),
        sent=10, received=len(got), loss_pct=hops[-1].loss_pct, rtt_ms=rtt_stats(got),
        jitter_ms=jitter(samples), samples_ms=samples)


def agent_rounds(rng: random.Random, index: int, n: int, n_targets: int,
                 start: datetime) -> list[dict[str, Any]]:
    """`n` envelopes of one agent, in time order, every target on the schedule from `start`."""
    from netprobe.net.lines import LineClassifier
    from netprobe.probes.results import envelope, new_result_id

    region, isp = REGIONS[index % len(REGIONS)]
    agent = {"id": f"bench-{index:03d}", "region": region, "isp": isp, "timezone": "Asia/Shanghai"}
    classifier = LineClassifier.default()
    pairs = []
    for j in range(n_targets):
        line, usual, other = LINES[j % len(LINES)]
        target = {"id": f"dc-{j:02d}", "host": f"dc{j:02d}.bench.example.net", "datacenter": f"dc{j % 5}",
                  "line": line}
        pairs.append(_Pair(rng, target, (usual, other), f"198.18.{j}.{1 + index % 250}"))
    # every (time, target, probe) due in the next hours, each series at its own phase
    per_hour = n_targets * sum(3600 // every for _, every in SCHEDULE)
    span = int(3600 * (n / per_hour + 1))
    due = []
    for j in range(n_targets):
        for probe, every in SCHEDULE:
            phase = rng.uniform(0, every)
            due += [(phase + k * every, j, probe) for k in range(int(span // every) + 1)]
    due.sort()
    out = []
    for offset, j, probe in due[:n]:
        started = start + timedelta(seconds=offset)
        pair = pairs[j]
        if probe == "icmp":
            result = _icmp(rng, pair, started)
        elif probe == "tcp":
            result = _tcp(rng, pair, started)
        else:
            result = _mtr(rng, pair, started, classifier)
        out.append(envelope(result, agent, pair.target, result_id=new_result_id()))
    return out


@dataclass
class Batch:
    agent: str
    count: int
    body: bytes          # gzip JSON array
    raw_bytes: int


def build_batches(args: argparse.Namespace) -> tuple[list[Batch], dict[str, int]]:
    """Every request body, in sending order: each agent's rounds in time order, agents interleaved."""
    rng = random.Random(args.seed)
    start = (datetime.now(UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    per_agent = [args.results // args.agents + (i < args.results % args.agents) for i in range(args.agents)]
    queues: list[list[Batch]] = []
    probes: dict[str, int] = {}
    for i, n in enumerate(per_agent):
        rounds = agent_rounds(rng, i, n, args.targets, start)
        for env in rounds:
            probes[env["probe"]] = probes.get(env["probe"], 0) + 1
        mine = []
        for k in range(0, len(rounds), args.batch):
            chunk = rounds[k:k + args.batch]
            raw = json.dumps(chunk, separators=(",", ":")).encode()
            mine.append(Batch(f"bench-{i:03d}", len(chunk), gzip.compress(raw, 5), len(raw)))
        queues.append(mine)
    ordered = [q[k] for k in range(max(map(len, queues), default=0)) for q in queues if k < len(q)]
    return ordered, probes


# -- processes and CPU ------------------------------------------------------------------------------

def cpu_seconds(pid: int, children: bool = False) -> float:
    """utime+stime of a process (with children: plus its reaped children's)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks / CLK


def postgres_cpu() -> float | None:
    """CPU seconds of every postgres process: the live ones, plus the backends that already exited
    (counted in the postmaster's reaped-children time). None if none can be read."""
    total, found = 0.0, False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm != "postgres":
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parent = Path(f"/proc/{ppid}/stat").read_text()
            is_postmaster = parent[parent.index("(") + 1:parent.rindex(")")] != "postgres"
            total += cpu_seconds(int(entry.name), children=is_postmaster)
            found = True
        except (OSError, ValueError, IndexError):
            continue    # exited meanwhile; its time moved to the postmaster
    return total if found else None


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]
    return (sum(f[:8]) - idle) / CLK, sum(f[:8]) / CLK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Collector:
    def __init__(self, workdir: Path, n: int, db_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / f"collector{n}.toml"
        self.config.write_text(f'[collector]\nlisten = "127.0.0.1:{self.port}"\n\n'
                               f'[storage]\nurl = "{db_url}"\n')
        self.log_path = workdir / f"collector{n}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "netprobe.cli", "collector", "run",
                                          "--config", str(self.config)], stdout=log, stderr=log, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"collector exited {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"collector not healthy after {timeout} s:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def scratch_database(admin_url: str, keep: bool) -> Iterator[str]:
    """A new database next to `admin_url`'s, dropped afterwards (unless `keep`); yields its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"netprobe_bench_{secrets.token_hex(4)}"
    admin = make_url(admin_url).set(drivername="postgresql")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True,
                         connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        try:
            url = admin.set(drivername="postgresql+psycopg", database=name)
            yield url.render_as_string(hide_password=False)
        finally:
            if keep:
                print(f"kept database {name}")
            else:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def issue_tokens(db_url: str, agents: list[str]) -> dict[str, str]:
    """What `netprobe collector add-agent` does, in-process (one CLI start per agent would take minutes);
    also migrates the new database."""
    from netprobe.collector.tokens import Tokens
    from netprobe.store import open_store

    store = await open_store(db_url)
    try:
        tokens = Tokens(store)
        return {a: (await tokens.issue(a))[0] for a in agents}
    finally:
        await store.close()


async def db_counts(db_url: str) -> dict[str, int]:
    import psycopg
    from sqlalchemy.engine import make_url

    dsn = make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        out = {}
        for key, sql in (("results", "SELECT count(*) FROM probe_results"),
                         ("distinct_ids", "SELECT count(DISTINCT id) FROM probe_results"),
                         ("rollup_rows", "SELECT count(*) FROM rollups_hourly"),
                         ("rollup_rounds", "SELECT coalesce(sum(rounds), 0) FROM rollups_hourly"),
                         ("path_events", "SELECT count(*) FROM path_changes")):
            row = await (await conn.execute(sql)).fetchone()
            out[key] = int(row[0]) if row else 0
        return out


# -- the client -----------------------------------------------------------------------------------

@dataclass
class Outcome:
    latencies: list[float]
    sent: int
    accepted: int
    duplicates: int
    errors: list[str]


async def upload(batches: list[Batch], urls: list[str], tokens: dict[str, str], clients: int,
                 offset: int = 0) -> Outcome:
    """Send every batch from `clients` concurrent connections; batch i goes to urls[(offset+i) % n]."""
    import aiohttp

    out = Outcome([], 0, 0, 0, [])
    queue = list(enumerate(batches, offset))
    queue.reverse()
    connector = aiohttp.TCPConnector(limit=clients * len(urls), force_close=False)

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            i, batch = queue.pop()
            # the upload health headers the agent's uplink sends with each batch (netprobe.net.upload_health)
            now = time.time()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
            headers = {"Authorization": f"Bearer {tokens[batch.agent]}", "Content-Encoding": "gzip",
                       "Content-Type": "application/json", "X-Netprobe-Outbox-Backlog": str(len(queue)),
                       "X-Netprobe-Sent-At": stamp}
            t0 = time.perf_counter()
            async with session.post(f"{urls[i % len(urls)]}/api/v1/results", data=batch.body,
                                    headers=headers) as resp:
                text = await resp.read()
            out.latencies.append(time.perf_counter() - t0)
            out.sent += batch.count
            if resp.status != 200:
                out.errors.append(f"HTTP {resp.status}: {text[:200]!r}")
                continue
            answer = json.loads(text)
            out.accepted += answer["accepted"]
            out.duplicates += answer["duplicates"]

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(worker(session) for _ in range(clients)))
    return out


def percentile(values: list[float], q: float) -> float:
    from netprobe.stats import percentile as pct

    return pct(sorted(values), q)


# -- main -----------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=int, default=75_000,
                    help="envelopes to send in all (default 75000: 3 full batches per agent)")
    ap.add_argument("--batch", type=int, default=500, help="envelopes per request (default 500)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent connections per collector (default 4)")
    ap.add_argument("--collectors", type=int, default=1, help="collector processes on the one database")
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=8, help="batches sent before the clock starts (default 8)")
    ap.add_argument("--goal", type=float, default=GOAL, help="results per collector CPU-second to pass")
    ap.add_argument("--pg", default=DEFAULT_PG,
                    help=f"PostgreSQL maintenance database URL (default {DEFAULT_PG})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep-db", action="store_true", help="do not drop the scratch database")
    ap.add_argument("--py-spy", metavar="FILE",
                    help="profile the first collector with py-spy while timed (FILE.svg: flame graph, "
                    "else collapsed stacks)")
    args = ap.parse_args()
    if min(args.results, args.batch, args.clients, args.collectors, args.agents, args.targets) < 1:
        ap.error("counts must be positive")

    t0 = time.perf_counter()
    batches, probes = build_batches(args)
    total = sum(b.count for b in batches)
    gz = sum(len(b.body) for b in batches)
    raw = sum(b.raw_bytes for b in batches)
    print(f"built {total} envelopes ({', '.join(f'{p} {n}' for p, n in sorted(probes.items()))}) from "
          f"{args.agents} agents × {args.targets} targets in {len(batches)} batches of ≤ {args.batch}: "
          f"{raw / total:.0f} B JSON, {gz / total:.0f} B gzip per envelope "
          f"({time.perf_counter() - t0:.1f} s)")
    warm = batches[:min(args.warmup, len(batches) - 1)]
    timed = batches[len(warm):]

    with tempfile.TemporaryDirectory(prefix="netprobe-bench-") as tmp, \
            scratch_database(args.pg, args.keep_db) as db_url:
        tokens = asyncio.run(issue_tokens(db_url, sorted({b.agent for b in batches})))
        collectors = [Collector(Path(tmp), n, db_url) for n in range(args.collectors)]
        spy: subprocess.Popen[bytes] | None = None
        try:
            for c in collectors:
                c.start()
            urls = [c.url for c in collectors]
            warmed = asyncio.run(upload(warm, urls, tokens, args.clients))
            if args.py_spy:
                fmt = "flamegraph" if args.py_spy.endswith(".svg") else "raw"
                spy = subprocess.Popen(["py-spy", "record", "-o", args.py_spy, "--format", fmt,
                                        "--pid", str(collectors[0].pid)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
            cpu0 = [cpu_seconds(c.pid) for c in collectors]
            pg0, busy0, me0, w0 = postgres_cpu(), machine_busy(), os.times(), time.perf_counter()
            run = asyncio.run(upload(timed, urls, tokens, args.clients, len(warm)))
            wall = time.perf_counter() - w0
            cpu1 = [cpu_seconds(c.pid) for c in collectors]
            pg1, busy1, me1 = postgres_cpu(), machine_busy(), os.times()
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
            counts = asyncio.run(db_counts(db_url))
        finally:
            if spy is not None and spy.poll() is None:
                spy.kill()
            for c in collectors:
                c.stop()
        logs = [c.log() for c in collectors]

    n = run.sent
    col_cpu = sum(b - a for a, b in zip(cpu0, cpu1, strict=True))
    client_cpu = (me1.user - me0.user) + (me1.system - me0.system)
    busy = busy1[0] - busy0[0]
    cores = os.cpu_count() or 1
    lat = run.latencies
    per_cpu = n / col_cpu if col_cpu > 0 else float("inf")
    print(f"collectors={args.collectors} clients={args.clients}×{args.collectors} batch={args.batch} "
          f"cores={cores} (client, collector{'s' if args.collectors > 1 else ''} and PostgreSQL share them)")
    print(f"timed: {n} results in {len(timed)} requests, {wall:.2f} s wall → {n / wall:,.0f} results/s")
    each = " + ".join(f"{b - a:.2f}" for a, b in zip(cpu0, cpu1, strict=True))
    print(f"collector CPU {col_cpu:.2f} s" + (f" ({each})" if args.collectors > 1 else "") +
          f" = {col_cpu / wall * 100:.0f} % of one core → {per_cpu:,.0f} results per collector CPU-second, "
          f"{col_cpu / n * 1e6:.0f} µs per result")
    if pg0 is not None and pg1 is not None:
        pg = pg1 - pg0
        print(f"PostgreSQL CPU {pg:.2f} s = {pg / wall * 100:.0f} % of one core, "
              f"{pg / n * 1e6:.0f} µs per result; collector + PostgreSQL: "
              f"{n / (col_cpu + pg):,.0f} results per CPU-second")
    else:
        print("PostgreSQL CPU: no postgres process readable in /proc (server elsewhere?)")
    print(f"client CPU {client_cpu:.2f} s; machine busy {busy / wall * 100:.0f} % of one core "
          f"(of {cores * 100} %)")
    print(f"request latency ms: p50 {percentile(lat, 50) * 1000:.1f}  p95 {percentile(lat, 95) * 1000:.1f}  "
          f"max {max(lat) * 1000:.1f}")
    sent = warmed.sent + run.sent
    accepted = warmed.accepted + run.accepted
    print(f"database: {counts['results']} results stored ({counts['distinct_ids']} distinct) of {sent} sent; "
          f"accepted {accepted}, duplicates {warmed.duplicates + run.duplicates}; "
          f"{counts['rollup_rows']} rollup rows holding {counts['rollup_rounds']} rounds; "
          f"{counts['path_events']} path events")
    errors = warmed.errors + run.errors
    for e in errors[:5]:
        print("error:", e)
    bad_logs = [ln for log in logs for ln in log.splitlines() if "level=error" in ln or "Traceback" in ln]
    for ln in bad_logs[:5]:
        print("collector log:", ln)
    exact = (sent == total and counts["results"] == counts["distinct_ids"] == total == accepted
             and counts["rollup_rounds"] == total)
    print(f"stored exactly what was sent: {'yes' if exact else 'NO'}")
    print(f"goal: ≥ {args.goal:,.0f} results per collector CPU-second; measured {per_cpu:,.0f}")
    ok = exact and not errors and per_cpu >= args.goal
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
