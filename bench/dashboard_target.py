"""The dashboard's target page at fleet scale (issue #14 point 1: < 200 ms P95 with 10 agents × 100 targets ×
90 days of rollups on PostgreSQL).

    python3 bench/dashboard_target.py URL [--agents 3] [--targets 3] [--repeat 5] [--goal-ms 200] [--profile]

URL: a database bench/report_scale.py built and kept (`--db postgresql --keep`; it prints `kept database
netprobe_bench_…`), e.g. postgresql+psycopg://postgres@127.0.0.1:5432/netprobe_bench_1a2b3c4d. Nothing is
written to it.

Calls netprobe.dashboard.target.target_page in-process on one open Store, as the collector's dashboard does,
for --agents agents (spread over the fleet's time zones) × --targets targets (spread over its datacenters and
lines) at each span of the page (1, 7, 30, 90 days), --repeat times each after one warm-up call per pair and
span (--no-warmup: none, so first reads count); prints P50/P95/max per span (and the median CPU time of this
process: on a busy machine the wall time also holds the wait for a core) and over all calls, and the verdict
against --goal-ms (exit 1 when the P95 over all calls is above it). --profile prints cProfile's top functions
of one 90-day page.

Charts of 30 and 90 days read about 31 and 91 prefix rows per pair, not 720 and 2,160 hour rows, so a
page's cost follows its span's buckets, not the fleet. Results: bench/README.md, dashboard_target.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from netprobe.dashboard.target import SPANS, target_page  # noqa: E402
from netprobe.store import Store, open_store  # noqa: E402
from netprobe.store.fleet import load_agents, load_targets  # noqa: E402


def _spread(items: list[str], n: int) -> list[str]:
    """n of `items`, evenly spaced (first and last included)."""
    if n >= len(items):
        return items
    if n == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


async def _pairs(store: Store, n_agents: int, n_targets: int) -> list[tuple[str, str]]:
    agents = await load_agents(store)
    targets = sorted(await load_targets(store))
    by_zone: dict[str, list[str]] = {}
    for a in sorted(agents):
        by_zone.setdefault(agents[a].timezone or "", []).append(a)
    chosen: list[str] = []
    while len(chosen) < min(n_agents, len(agents)):      # one per zone in turn
        for members in by_zone.values():
            left = [a for a in members if a not in chosen]
            if left and len(chosen) < n_agents:
                chosen.append(left[0])
    return [(a, t) for a in chosen for t in _spread(targets, n_targets)]


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:6.1f}"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


async def run(args: argparse.Namespace) -> bool:
    store = await open_store(args.url, upgrade=False)
    try:
        pairs = await _pairs(store, args.agents, args.targets)
        print(f"{len(pairs)} pairs: {', '.join(f'{a}/{t}' for a, t in pairs)}", flush=True)
        times: dict[int, list[float]] = {d: [] for d in SPANS}
        sizes: dict[int, list[int]] = {d: [] for d in SPANS}
        cpu: dict[int, list[float]] = {d: [] for d in SPANS}     # this process's CPU (not PostgreSQL's)
        for agent, target in pairs:
            for days in SPANS:
                if args.warmup:
                    page = await target_page(store, agent, target, days, "/")
                    assert page is not None, (agent, target)
                for _ in range(args.repeat):
                    t0, c0 = time.perf_counter(), time.process_time()
                    page = await target_page(store, agent, target, days, "/")
                    times[days].append(time.perf_counter() - t0)
                    cpu[days].append(time.process_time() - c0)
                    assert page is not None
                    sizes[days].append(len(page[1]))
        every = [v for d in SPANS for v in times[d]]
        for days in SPANS:
            v = times[days]
            kib = statistics.median(sizes[days]) / 1024
            own = statistics.median(cpu[days])
            print(f"  {days:>2} days: P50 {_ms(statistics.median(v))} ms  P95 {_ms(_pct(v, 0.95))} ms"
                  f"  max {_ms(max(v))} ms  (own CPU P50 {_ms(own)} ms; {len(v)} calls, page {kib:.0f} KiB)")
        p95 = 1000 * _pct(every, 0.95)
        ok = p95 < args.goal_ms
        print(f"  all spans: P50 {_ms(statistics.median(every))} ms, P95 {p95:.1f} ms over {len(every)} "
              f"calls — {'PASS' if ok else 'FAIL'} (goal P95 < {args.goal_ms:g} ms)")
        if args.profile:
            agent, target = pairs[0]
            prof = cProfile.Profile()
            prof.enable()
            await target_page(store, agent, target, 90, "/")
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return ok
    finally:
        await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("url", help="a database bench/report_scale.py kept")
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--targets", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--goal-ms", type=float, default=200.0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="time first calls too (rows not yet in PostgreSQL's buffers)")
    return 0 if asyncio.run(run(ap.parse_args())) else 1


if __name__ == "__main__":
    sys.exit(main())
