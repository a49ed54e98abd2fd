"""ICMP engine at scale against fping, on the lab, in the same run.

    sudo python bench/icmp_scale.py [--targets 1000] [--seconds 60]

Brings up agents/lab-bench.toml (one route, fixed delay), then pings N addresses of that route at
1 Hz each with netprobe's engine and with fping side by side from the agent namespace. Prints CPU
per echo (start-up excluded: measured between the warm-up mark and the end), the per-target mean
RTT difference and false loss, with the ratios the issue sets (CPU ≤ 1.5× fping, |Δmean| ≤ 0.3 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK, int(fields[12]) / CLK


async def _runner(targets: list[str], seconds: int, interval: float) -> None:
    """Child mode: run inside the agent namespace; one round of `seconds` echoes per target."""
    from netprobe.icmp.engine import IcmpEngine

    engine = IcmpEngine()
    engine.open_default()
    n = len(targets)

    async def one(i: int, addr: str) -> tuple[str, list[float | None]]:
        await asyncio.sleep(interval * i / n)  # spread like fping -i
        out = await engine.ping(addr, count=seconds, interval=interval, timeout=1.0)
        return addr, out.samples

    print("READY", flush=True)
    results = await asyncio.gather(*(one(i, a) for i, a in enumerate(targets)))
    print(json.dumps({a: s for a, s in results}), flush=True)
    engine.close()


_FPING = re.compile(r"^(\S+)\s*: xmt/rcv/%loss = (\d+)/(\d+)/\S+%(?:, min/avg/max = [\d.]+/([\d.]+)/)?")


def parse_fping(text: str) -> dict[str, tuple[int, int, float | None]]:
    out: dict[str, tuple[int, int, float | None]] = {}
    for line in text.splitlines():
        m = _FPING.match(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)) if m.group(4) else None)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds excluded from CPU figures")
    ap.add_argument("--spec", type=Path, default=ROOT / "agents" / "lab-bench.toml")
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--runner", nargs=2, metavar=("TARGETS_FILE", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.runner:
        targets = Path(args.runner[0]).read_text().split()
        asyncio.run(_runner(targets, int(args.runner[1]), 1.0))
        return 0

    from netprobe.lab import api as lab

    state = lab.up(args.spec, replace=True)
    route = next(iter(state.routes.values()))
    targets = route.ipv4_hosts(args.targets)
    ns = state.agent_ns
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(targets) + "\n")
            tfile = f.name
        spread_ms = max(0.1, 1000.0 / args.targets)
        ours = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, __file__, "--runner", tfile,
                                 str(args.seconds)], stdout=subprocess.PIPE, text=True)
        assert ours.stdout is not None
        ours.stdout.readline()  # READY: imports and socket set-up are done
        fping = subprocess.Popen(["ip", "netns", "exec", ns, "fping", "-q", "-c", str(args.seconds),
                                  "-p", "1000", "-i", f"{spread_ms:.3f}", "-t", "1000", "-f", tfile],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(args.warmup)
        our_pid = _child_pid(ours.pid, "python")
        fping_pid = _child_pid(fping.pid, "fping")
        c0 = (cpu_times(our_pid), cpu_times(fping_pid))
        t0 = time.monotonic()
        # sample the end just before either finishes its last round
        time.sleep(max(1.0, args.seconds - args.warmup - 1.5))
        c1 = (cpu_times(our_pid), cpu_times(fping_pid))
        window = time.monotonic() - t0
        our_out, _ = ours.communicate(timeout=args.seconds + 30)
        _, fping_err = fping.communicate(timeout=args.seconds + 30)
    finally:
        if not args.keep_lab:
            lab.down()
    samples: dict[str, list[float | None]] = json.loads(our_out.strip().splitlines()[-1])
    fp = parse_fping(fping_err)
    echoes = args.targets * window  # both send one echo per target per second
    our_usr, our_sys = ((c1[0][i] - c0[0][i]) / echoes * 1e6 for i in (0, 1))
    fp_usr, fp_sys = ((c1[1][i] - c0[1][i]) / echoes * 1e6 for i in (0, 1))
    our_cpu, fp_cpu = our_usr + our_sys, fp_usr + fp_sys
    diffs, our_lost, fp_lost = [], 0, 0
    for addr in targets:
        got = [s for s in samples.get(addr, []) if s is not None]
        our_lost += args.seconds - len(got)
        xmt, rcv, avg = fp.get(addr, (args.seconds, 0, None))
        fp_lost += xmt - rcv
        if got and avg is not None:
            diffs.append(sum(got) / len(got) - avg)
    absd = sorted(abs(d) for d in diffs)
    worst = absd[-1] if absd else float("nan")
    mean_diff = sum(diffs) / len(diffs) if diffs else float("nan")
    print(f"targets={args.targets} seconds={args.seconds} route_rtt_ms={route.rtt_ms:g} "
          f"cpu_window_s={window:.1f}")
    print(f"cpu_us_per_echo netprobe={our_cpu:.2f} fping={fp_cpu:.2f} ratio={our_cpu / fp_cpu:.2f} "
          f"(goal <= 1.5)")
    print(f"  user/system us: netprobe {our_usr:.1f}/{our_sys:.1f} fping {fp_usr:.1f}/{fp_sys:.1f}")
    print(f"mean_rtt_diff_ms mean={mean_diff:+.3f} worst_target={worst:.3f} (goal <= 0.3) "
          f"compared_targets={len(diffs)}")
    if absd:
        print(f"  |diff| p50={absd[len(absd) // 2]:.3f} p95={absd[int(len(absd) * 0.95)]:.3f} ms; "
              f"targets over 0.3 ms: {sum(d > 0.3 for d in absd)}")
    sds = sorted(statistics.pstdev(g) for g in ([s for s in v if s is not None] for v in samples.values())
                 if len(g) > 1)
    if sds:
        print(f"  netprobe per-target RTT stdev p50={sds[len(sds) // 2]:.3f} ms (the lab's own noise)")
    print(f"lost echoes netprobe={our_lost} fping={fp_lost} (route loss 0: goal 0)")
    ok = our_cpu <= 1.5 * fp_cpu and worst <= 0.3 and our_lost == 0
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def _child_pid(pid: int, name: str) -> int:
    """`ip netns exec` execs in place, but look one level down in case a wrapper stays."""
    for _ in range(50):
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if name in comm:
            return pid
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            pid = int(kids[0])
        time.sleep(0.05)
    return pid


if __name__ == "__main__":
    sys.exit(main())
