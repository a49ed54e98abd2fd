"""SSE probe at scale: N concurrent emitter streams read by netprobe's client on one core.

    python bench/sse_streams.py [--streams 200] [--interval-ms 20] [--seconds 30]

Starts `netprobe target` on loopback pinned to one core, reads N streams at once from a process pinned
to the other (netprobe's own client and parser, the probe's receive path), and compares each gap the
client saw between two events with the gap between the server's send times (`ts`): the gap error is
what the probe adds to the stutter it reports. Prints its P50/P99/max (goal: P99 < 1 ms), events,
lost or failed streams, and the CPU the reader used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK = os.sysconf("SC_CLK_TCK")


async def _reader(url: str, streams: int, seconds: float, interval: float,
                  lockstep: bool) -> dict[str, object]:
    from netprobe.probes.sse.client import Limits, stream
    from netprobe.probes.sse.parser import SseEvent
    from netprobe.stats import percentile

    errors: list[float] = []
    events = 0
    failed: dict[str, int] = {}

    async def one(delay: float) -> None:
        nonlocal events
        last: tuple[int, float] | None = None
        await asyncio.sleep(delay)

        def on_event(ev: SseEvent) -> bool:
            nonlocal last, events
            ts = json.loads(ev.data)["ts"] * 1000.0
            if last is not None:
                errors.append(abs((ev.t_ns - last[0]) / 1e6 - (ts - last[1])))
            last = (ev.t_ns, ts)
            events += 1
            return False

        cap = await stream("GET", url, headers={"Accept-Encoding": "identity"}, body=None,
                           limits=Limits(total_s=seconds + 30), on_event=on_event, on_comment=lambda c: None)
        if cap.error_kind:
            failed[cap.error_kind] = failed.get(cap.error_kind, 0) + 1

    t0 = os.times()
    # Streams start spread over one interval, as independent users' do: 200 schedules in lockstep
    # would hand the reader 200 events in the same millisecond, every interval (see --lockstep).
    # Each stream is its own connection, as the probe's are (netprobe.net.http1).
    await asyncio.gather(*(one(0.0 if lockstep else i * interval / streams) for i in range(streams)))
    t1 = os.times()
    errors.sort()
    return {"events": events, "failed": failed, "cpu_s": (t1.user - t0.user) + (t1.system - t0.system),
            "gap_error_ms": {"p50": percentile(errors, 50), "p99": percentile(errors, 99),
                             "max": errors[-1]} if errors else None}


def _run(args: argparse.Namespace, port: int, server_cpu: int,
         reader_cpu: int) -> subprocess.CompletedProcess[str] | None:
    """The target on one core, the reader on the other; the reader's JSON, or None if it failed."""
    server = subprocess.Popen(["taskset", "-c", str(server_cpu), sys.executable, "-m", "netprobe.cli",
                               "target", "--listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        count = int(args.seconds * 1000 / args.interval_ms)
        url = f"http://127.0.0.1:{port}/sse?count={count}&interval_ms={args.interval_ms}&size=64"
        out = subprocess.run(["taskset", "-c", str(reader_cpu), sys.executable, __file__, "--reader", url,
                              str(args.streams), str(args.seconds), str(args.interval_ms / 1000),
                              "1" if args.lockstep else "0"], capture_output=True, text=True,
                             timeout=args.seconds + 120)
    finally:
        server.terminate()
        server.wait(timeout=10)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--interval-ms", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--no-keep-awake", action="store_true", help="let idle vCPUs halt")
    ap.add_argument("--lockstep", action="store_true", help="start every stream at the same moment")
    ap.add_argument("--reader", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reader:
        url, n, secs, interval, lockstep = args.reader
        print(json.dumps(asyncio.run(_reader(url, int(n), float(secs), float(interval), lockstep == "1"))))
        return 0
    from netprobe.lab.awake import keep_awake

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, reader_cpu = (cpus[-1], cpus[0]) if len(cpus) > 1 else (cpus[0], cpus[0])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with contextlib.ExitStack() as stack:
        if not args.no_keep_awake:
            stack.enter_context(keep_awake(cpus))
        out = _run(args, port, server_cpu, reader_cpu)
    if out is None:
        return 2
    count = int(args.seconds * 1000 / args.interval_ms)
    r = json.loads(out.stdout)
    expected = args.streams * count
    err = r["gap_error_ms"]
    print(f"streams={args.streams} interval_ms={args.interval_ms} seconds={args.seconds:g} "
          f"starts={'lockstep' if args.lockstep else 'spread'} reader_cpu={reader_cpu} "
          f"server_cpu={server_cpu}")
    print(f"events {r['events']} of {expected}; failed streams {r['failed'] or 0}")
    if err:
        print(f"gap_error_ms p50={err['p50']:.3f} p99={err['p99']:.3f} max={err['max']:.3f} (goal p99 < 1)")
    share = r["cpu_s"] / args.seconds * 100
    print(f"reader CPU {r['cpu_s']:.1f} s over {args.seconds:g} s = {share:.0f} % of one core, "
          f"{r['cpu_s'] / max(1, r['events']) * 1e6:.1f} µs per event")
    ok = bool(err) and err["p99"] < 1.0 and r["events"] == expected and not r["failed"]
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
