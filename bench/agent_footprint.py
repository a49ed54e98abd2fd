"""The agent's footprint on the lab: RSS and CPU of `netprobe agent run` at a realistic load.

    sudo flock /tmp/np-lab.lock python bench/agent_footprint.py [--minutes 10] [--warmup 2]

Brings up agents/lab.toml, starts `netprobe target` in every datacenter namespace and a collector
(`netprobe collector run`, SQLite) in the agent namespace, then runs the real agent there for
--minutes: 50 targets × (icmp and tcp every 10 s, mtr and sse every 60 s), SQLite storage, uplink to
the collector, Prometheus exporter on and scraped every 15 s. Every few seconds it reads the agent
process's RSS and anonymous RSS (/proc/PID/status VmRSS, RssAnon) and CPU (utime+stime of
/proc/PID/stat) and its event loop's wake-ups (voluntary_ctxt_switches of its main thread). Reports
RSS after the warm-up and at the end (growth, and the slope over the steady part), CPU as % of one core
between the warm-up mark and the end, wake-ups per second over the same span, rounds stored against
the schedule, and the collector's rounds against the agent's (nothing lost). Goals (issue 10): ≤ 64 MB
RSS after warm-up with no growth, ≤ 3 % of a core, nothing lost. Every vCPU is kept busy by a
SCHED_IDLE spinner (netprobe.lab.awake; --no-keep-awake), as in the other lab benches.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "netprobe.cli"]
CLK = os.sysconf("SC_CLK_TCK")
TARGET_PORT = 8473
COLLECTOR = "127.0.0.1:8471"
METRICS = "127.0.0.1:9470"
SCRAPE_EVERY = 15.0
GOAL_RSS_MB = 64.0
GOAL_GROWTH_MB = 2.0   # end − warm-up: "no growth" within allocator noise
GOAL_CPU_PCT = 3.0
EVERY = {"icmp": 10.0, "tcp": 10.0, "mtr": 60.0, "sse": 60.0}

AGENT = """\
[agent]
id = "footprint"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[log]
level = "info"

[metrics]
listen = "{metrics}"

[uplink]
url = "http://{collector}"
token_file = "{token}"

[probes.icmp]
every = "10s"
count = 10
interval = "0.5s"
timeout = "2s"

[probes.tcp]
every = "10s"
count = 5
interval = "1s"
timeout = "3s"

[probes.mtr]
every = "60s"
cycles = 10
interval = "1s"
timeout = "2s"

[probes.sse]
every = "60s"
timeout = "10s"
"""

TARGET = """
[[targets]]
id = "{id}"
host = "{host}"
datacenter = "{dc}"
line = "{line}"
probes = ["icmp", "tcp", "mtr", "sse"]
family = "ipv4"
tcp_port = {port}
sse_url = "http://{host}:{port}/sse?count=20&interval_ms=50"
"""

SCRAPER = """\
import signal, sys, time, urllib.request
url, every, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ok = failed = 0
def done(*_):
    print(ok, failed, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        urllib.request.urlopen(url, timeout=5).read()
        ok += 1
    except OSError:
        if not ok:  # the agent is still starting: its exporter listens once the store is open
            time.sleep(0.5)
            continue
        failed += 1
    time.sleep(every)
done()
"""


def in_agent_ns(args: list[str]) -> list[str]:
    from netprobe.lab.addressing import AGENT_NS

    return ["ip", "netns", "exec", AGENT_NS, *args]


# t, RSS MB, anonymous MB, CPU s, of which user s, the event loop's wake-ups (its thread's sleeps)
Sample = tuple[float, float, float, float, float, float]


def proc_sample(pid: int) -> tuple[float, float, float, float, float] | None:
    """(RSS MB, anonymous RSS MB, CPU seconds, user CPU seconds, voluntary context switches of the main
    thread, where the event loop runs: one per wake-up from epoll_wait) of a live process, None once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
          if line.startswith(("VmRSS:", "RssAnon:", "voluntary_ctxt_switches:"))}
    if "VmRSS" not in kb:  # a zombie
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (kb["VmRSS"] / 1024, kb.get("RssAnon", 0) / 1024, (int(fields[11]) + int(fields[12])) / CLK,
            int(fields[11]) / CLK, kb.get("voluntary_ctxt_switches", 0))


def is_agent(pid: int) -> bool:
    """`ip netns exec` execs the command: once it has, pid is the agent's Python process itself."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", b"netprobe.cli"]
    except OSError:
        return False


def wait_http(url: str, timeout: float, what: str) -> None:
    probe = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=2).read()"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run(in_agent_ns([sys.executable, "-c", probe]), capture_output=True,
                          timeout=30).returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"{what} ({url}) did not answer within {timeout:g} s")


def targets_for(state: Any, n: int) -> list[dict[str, Any]]:
    """n targets spread round-robin over the lab's routes, each its own address of its route's block."""
    routes = sorted(state.routes.values(), key=lambda r: r.index)
    out = []
    for i in range(n):
        route = routes[i % len(routes)]
        host = route.ipv4_hosts(i // len(routes) + 1)[-1]
        out.append({"id": f"{route.id}-{i // len(routes) + 1}", "host": host, "dc": route.datacenter,
                    "line": route.line, "port": TARGET_PORT})
    return out


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return list(conn.execute(sql))


def log_ts(log: Path, msg: str) -> datetime | None:
    """The ts of the first logfmt line whose msg is `msg`."""
    for line in log.read_text(errors="replace").splitlines():
        if f'msg="{msg}"' in line or f"msg={msg} " in line:
            for pair in line.split():
                if pair.startswith("ts="):
                    return datetime.fromisoformat(pair[3:].replace("Z", "+00:00"))
    return None


def schedule_check(db: Path, targets: list[dict[str, Any]], started: datetime,
                   stopped: datetime) -> dict[str, Any]:
    """Rounds stored per probe against the scheduler's plan: job j runs at started + offset_j + k·every;
    a run counts as expected when it had time to finish before the stop (its round bound), as possible
    when it started before the stop (the drain may let it finish)."""
    from netprobe.agent.scheduler import spread_offset

    stored = Counter(p for (p,) in rows(db, "SELECT probe FROM probe_results"))
    expected: Counter[str] = Counter()
    possible: Counter[str] = Counter()
    bound = {"icmp": 9 * 0.5 + 2, "tcp": 4 * 1 + 3, "mtr": 9 * 1 + 2, "sse": 10.0}
    span = (stopped - started).total_seconds()
    for t in targets:
        for probe, every in EVERY.items():
            first = spread_offset(f"{t['id']}:{probe}", every)
            starts = [first + k * every for k in range(int(span // every) + 2)]
            expected[probe] += sum(1 for s in starts if s + bound[probe] <= span)
            possible[probe] += sum(1 for s in starts if s < span)
    return {p: {"stored": stored[p], "expected": expected[p], "possible": possible[p]} for p in EVERY}


def slope_mb_per_min(samples: list[Sample], t0: float) -> float:
    steady = [(s[0], s[1]) for s in samples if s[0] >= t0]
    if len(steady) < 3:
        return math.nan
    ts, ys = zip(*steady, strict=True)
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in steady) / var * 60 if var else math.nan


def at(samples: list[Sample], t: float) -> Sample:
    return min(samples, key=lambda s: abs(s[0] - t))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from netprobe.lab import api

    state = api.up(ROOT / "agents" / "lab.toml", replace=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for ns in sorted({r.namespace for r in state.routes.values()}):
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *CLI, "target", "--listen",
                                           f"0.0.0.0:{TARGET_PORT}"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        targets = targets_for(state, args.targets)
        for route in state.routes.values():
            wait_http(f"http://{route.ipv4}:{TARGET_PORT}/healthz", 30, "netprobe target")

        cdb, ccfg, token = work / "collector.db", work / "collector.toml", work / "uplink.token"
        ccfg.write_text(f'[collector]\nlisten = "{COLLECTOR}"\n\n[storage]\nurl = "sqlite:///{cdb}"\n')
        out = subprocess.run([*CLI, "collector", "add-agent", "footprint", "--config", str(ccfg)],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        token.write_text(out.strip().splitlines()[-1] + "\n")
        clog = (work / "collector.log").open("ab")
        procs.append(subprocess.Popen(in_agent_ns([*CLI, "collector", "run", "--config", str(ccfg)]),
                                      stdout=clog, stderr=clog))
        wait_http(f"http://{COLLECTOR}/healthz", 60, "collector")

        db, cfg, log = work / "agent.db", work / "agent.toml", work / "agent.log"
        cfg.write_text(AGENT.format(db=db, metrics=METRICS, collector=COLLECTOR, token=token)
                       + "".join(TARGET.format(**t) for t in targets))
        # The schema exists, as on every start but the first after an install or an upgrade (that one
        # also imports Alembic to migrate, which stays resident until the next restart).
        subprocess.run([*CLI, "db", "upgrade", "--db", f"sqlite:///{db}"], capture_output=True, timeout=120,
                       check=True)
        seconds = args.minutes * 60
        with log.open("ab") as out_f:
            agent = subprocess.Popen(in_agent_ns([*CLI, "agent", "run", "--config", str(cfg), "--duration",
                                                  str(seconds)]), stdout=out_f, stderr=out_f)
        scraper = subprocess.Popen(in_agent_ns([sys.executable, "-c", SCRAPER, f"http://{METRICS}/metrics",
                                                str(SCRAPE_EVERY), str(seconds + 30)]),
                                   stdout=subprocess.PIPE, text=True)
        t_start = time.monotonic()
        samples: list[Sample] = []
        while agent.poll() is None:
            s = proc_sample(agent.pid)
            if s is not None and is_agent(agent.pid):
                samples.append((time.monotonic() - t_start, *s))
            time.sleep(args.sample_every)
        code = agent.wait()
        scraper.send_signal(signal.SIGTERM)
        scrapes = (scraper.communicate(timeout=30)[0] or "").split()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        api.down()

    if not samples:
        raise SystemExit("no sample of the agent process was taken")
    text = log.read_text(errors="replace")
    started, stopped = log_ts(log, "agent started"), log_ts(log, "agent stopped")
    if code != 0 or started is None or stopped is None or "Traceback" in text:
        raise SystemExit(f"agent exited {code}:\n{text[-3000:]}")
    local = {r[0] for r in rows(db, "SELECT id FROM probe_results")}
    collected = [r[0] for r in rows(cdb, "SELECT id FROM probe_results WHERE agent_id = 'footprint'")]
    outbox = rows(db, "SELECT count(*) FROM outbox")[0][0]
    statuses = Counter(f"{p}:{s}" for p, s in rows(db, "SELECT probe, status FROM probe_results"))
    warm = args.warmup * 60
    w, e = at(samples, warm), samples[-1]
    cpu_pct = (e[3] - w[3]) / (e[0] - w[0]) * 100 if e[0] > w[0] else math.nan
    user_pct = (e[4] - w[4]) / (e[0] - w[0]) * 100 if e[0] > w[0] else math.nan
    wakeups = (e[5] - w[5]) / (e[0] - w[0]) if e[0] > w[0] else math.nan
    by_time: dict[int, tuple[float, float]] = {}  # the last sample of each minute
    for t, rss, anon, *_ in samples:
        by_time[int(t // 60)] = (rss, anon)
    return {
        "minutes": args.minutes, "warmup_min": args.warmup, "targets": args.targets,
        "rss_mb": {"warmup": round(w[1], 1), "end": round(e[1], 1),
                   "max": round(max(s[1] for s in samples), 1), "growth": round(e[1] - w[1], 1),
                   "slope_mb_per_min": round(slope_mb_per_min(samples, warm), 3)},
        "anon_mb": {"warmup": round(w[2], 1), "end": round(e[2], 1), "growth": round(e[2] - w[2], 1)},
        "per_minute_rss_anon_mb": {m: [round(v, 1) for v in by_time[m]] for m in sorted(by_time)},
        "cpu_pct": round(cpu_pct, 2), "cpu_user_pct": round(user_pct, 2), "cpu_s_total": round(e[3], 1),
        "warmup_cpu_s": round(w[3], 2), "wakeups_per_s": round(wakeups, 1),
        "rounds": schedule_check(db, targets, started, stopped),
        "statuses": dict(sorted(statuses.items())),
        "stored": len(local), "collected": len(collected), "collected_unique": len(set(collected)),
        "missing_at_collector": len(local - set(collected)), "outbox_left": outbox,
        "scrapes_ok_failed": scrapes,
    }


def report(r: dict[str, Any]) -> bool:
    rss, anon = r["rss_mb"], r["anon_mb"]
    print(f"agent footprint: {r['targets']} targets × icmp/tcp every 10 s, mtr/sse every 60 s; "
          f"{r['minutes']:g} min, warm-up {r['warmup_min']:g} min")
    print(f"RSS MB: after warm-up {rss['warmup']}  end {rss['end']}  max {rss['max']}  "
          f"growth {rss['growth']:+}  slope {rss['slope_mb_per_min']:+} MB/min "
          f"(goal ≤ {GOAL_RSS_MB:g}, growth ≤ {GOAL_GROWTH_MB:g})")
    print(f"anonymous RSS MB: after warm-up {anon['warmup']}  end {anon['end']}  growth {anon['growth']:+}")
    print("RSS/anon MB by minute:",
          " ".join(f"{m}:{v[0]}/{v[1]}" for m, v in r["per_minute_rss_anon_mb"].items()))
    print(f"CPU: {r['cpu_pct']} % of one core in steady state (goal ≤ {GOAL_CPU_PCT:g}; user "
          f"{r['cpu_user_pct']} %, system {round(r['cpu_pct'] - r['cpu_user_pct'], 2)} %); "
          f"{r['warmup_cpu_s']} s in the warm-up (start-up included), {r['cpu_s_total']} s in all; "
          f"event loop wake-ups {r['wakeups_per_s']}/s")
    ok_rounds = True
    for probe, c in r["rounds"].items():
        fine = c["expected"] <= c["stored"] <= c["possible"]
        ok_rounds &= fine
        print(f"rounds {probe}: stored {c['stored']}, schedule {c['expected']}..{c['possible']}"
              f"{'' if fine else '  <-- off schedule'}")
    print("statuses:", ", ".join(f"{k}={v}" for k, v in r["statuses"].items()))
    lost = r["missing_at_collector"] + (r["collected"] - r["collected_unique"])
    print(f"collector: received {r['collected_unique']} of {r['stored']} stored "
          f"(missing {r['missing_at_collector']}, duplicates {r['collected'] - r['collected_unique']}, "
          f"outbox left {r['outbox_left']}); exporter scrapes ok/failed {'/'.join(r['scrapes_ok_failed'])}")
    ok = (rss["warmup"] <= GOAL_RSS_MB and rss["growth"] <= GOAL_GROWTH_MB and r["cpu_pct"] <= GOAL_CPU_PCT
          and lost == 0 and r["outbox_left"] == 0 and ok_rounds)
    print("RESULT", "PASS" if ok else "FAIL")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="length of the agent's run (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="minutes before steady state (default 2)")
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--sample-every", type=float, default=5.0, help="seconds between /proc samples")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--keep", type=Path, help="keep configs, logs and databases in this directory")
    ap.add_argument("--no-keep-awake", action="store_true", help="let idle vCPUs halt")
    args = ap.parse_args()
    if args.warmup >= args.minutes:
        ap.error("--warmup must be shorter than --minutes")
    if os.geteuid() != 0:
        ap.error("needs root (the lab)")
    from netprobe.lab.awake import keep_awake

    with contextlib.ExitStack() as stack:
        if not args.no_keep_awake:
            stack.enter_context(keep_awake())
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            work = args.keep
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="np-footprint-")))
        r = run(args, work)
    r["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    if args.json:
        args.json.write_text(json.dumps(r, indent=1) + "\n")
    return 0 if report(r) else 1


if __name__ == "__main__":
    sys.exit(main())
