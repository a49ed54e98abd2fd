"""owd reflector at scale: one `netprobe target --udp` serving many agents' owd streams.

    python bench/owd.py [--agents 200] [--pps 10] [--seconds 60] [--sse-streams N] [--pythonpath DIR]

Issues one token per agent, starts the reflector on loopback pinned to one core, and runs every
agent's round (netprobe's own owd client, `--pps` requests a second for `--seconds`) from a process
pinned to the other, the agents' starts spread over one interval as independent agents' are. Prints
the reflector's CPU per packet, the delay it adds to a packet (t3 − t2: from the kernel's receive
stamp to its send stamp, goal P99 < 0.2 ms), and loss, which on loopback is false loss (goal: none).
Also the client's RTT quantiles of the same packets, and, as the reference for the hold, a bare
Python UDP echo's time from the kernel's receive stamp to user space at the same rate.

`--sse-streams N` keeps the target's HTTP side busy meanwhile: N emitter streams (GET /sse, an event
every 20 ms) read from the agents' core, as when agents' sse probes and owd rounds reach one target.
`--rt` runs the target and the reference at SCHED_FIFO (as the lab's relay runs), so that other
work on a shared machine stops delaying their wake-ups. `--pythonpath DIR` runs another checkout's
`netprobe target` (the "before" figures); the reflector's CPU counts its child processes too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """utime + stime of `pid` and of its living children (the reflector's process), recursively."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / CLK
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                total += _cpu_s(int(child))
    return total


async def _sse_streams(port: int, streams: int, seconds: float) -> None:
    """`streams` emitter streams, an event every 20 ms each, read and dropped until they end."""
    count = int(seconds * 50) + 100

    async def one(delay: float) -> None:
        await asyncio.sleep(delay)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /sse?count={count}&interval_ms=20&size=64 HTTP/1.1\r\nHost: x\r\n"
                     "Connection: close\r\n\r\n".encode())
        while await reader.read(65536):
            pass
        writer.close()

    await asyncio.gather(*(one(i * 0.02 / streams) for i in range(streams)))


async def _agents(port: int, tokens: list[str], pps: float, seconds: float) -> dict[str, object]:
    from netprobe.owd import packets
    from netprobe.owd.client import exchange
    from netprobe.owd.figures import figures
    from netprobe.stats import percentile

    interval = 1.0 / pps
    count = int(seconds * pps)

    async def one(token: str, delay: float) -> tuple[int, int, int, list[float], list[float]]:
        await asyncio.sleep(delay)
        x = await exchange(("127.0.0.1", port), packets.derive_key(token), count, interval, timeout=2.0)
        f = figures(x)
        holds = [(r.t3 - r.t2) / 1e6 for r in x.replies]
        return x.sent, f.received, x.bad, holds, [s for s in f.samples_ms if s is not None]

    t0 = os.times()
    done = await asyncio.gather(*(one(t, i * interval / len(tokens)) for i, t in enumerate(tokens)))
    t1 = os.times()
    holds = sorted(h for d in done for h in d[3])
    rtts = sorted(r for d in done for r in d[4])

    def q(v: list[float]) -> dict[str, float] | None:
        return {"p50": percentile(v, 50), "p99": percentile(v, 99), "max": v[-1]} if v else None

    return {"sent": sum(d[0] for d in done), "received": sum(d[1] for d in done),
            "bad": sum(d[2] for d in done), "hold_ms": q(holds), "rtt_ms": q(rtts),
            "client_cpu_s": (t1.user - t0.user) + (t1.system - t0.system)}


_REFERENCE_SERVER = """
import socket, sys, time, json
SO_TIMESTAMPNS = 35
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5.0)
print("ready", flush=True)
holds = []
try:
    while True:
        data, anc, _, addr = s.recvmsg(128, socket.CMSG_SPACE(16))
        now = time.time_ns()
        sec, nsec = int.from_bytes(anc[0][2][:8], "little"), int.from_bytes(anc[0][2][8:16], "little")
        holds.append((now - (sec * 10**9 + nsec)) / 1e6)
        s.sendto(data, addr)
except TimeoutError:
    pass
holds.sort()
print(json.dumps({"n": len(holds), "p50": holds[len(holds) // 2], "p99": holds[int(len(holds) * 0.99)],
                  "max": holds[-1]}))
"""


async def _reference_client(port: int, agents: int, pps: float, seconds: float) -> None:
    """The same packet rate, size and spread as the agents', from one socket, answers ignored."""
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        start, n, gap = loop.time(), int(seconds * pps * agents), 1.0 / (pps * agents)
        for i in range(n):
            delay = start + i * gap - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            s.sendto(b"x" * 88, ("127.0.0.1", port))


def _rt(args: argparse.Namespace) -> list[str]:
    return ["chrt", "-f", "10"] if args.rt else []


def reference(args: argparse.Namespace, server_cpu: int, client_cpu: int) -> dict[str, float]:
    """The floor on this machine: a bare Python UDP echo (blocking recvmsg, kernel stamp, nothing
    else) held as the reflector's hold is measured, at the same rate, pinned the same way."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["taskset", "-c", str(server_cpu), *_rt(args), sys.executable, "-c",
                               _REFERENCE_SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    server.stdout.readline()
    subprocess.run(["taskset", "-c", str(client_cpu), sys.executable, __file__, "--reference-run",
                    str(port), str(args.agents), str(args.pps), str(args.seconds)], check=True,
                   timeout=args.seconds + 60)
    out, _ = server.communicate(timeout=30)
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--pps", type=float, default=10.0, help="requests per second per agent")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--no-keep-awake", action="store_true", help="let idle vCPUs halt")
    ap.add_argument("--sse-streams", type=int, default=0, metavar="N",
                    help="keep the target's HTTP side busy with N SSE streams (20 ms events) meanwhile")
    ap.add_argument("--pythonpath", type=Path, default=None, metavar="DIR",
                    help="run this checkout's netprobe target (default: this one)")
    ap.add_argument("--rt", action="store_true",
                    help="run the target and the reference at SCHED_FIFO 10 (chrt; root): other work on "
                         "a shared machine no longer delays their wake-ups")
    ap.add_argument("--sse-run", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--agents-run", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--reference-run", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference_run:
        port, agents, pps, secs = args.reference_run
        asyncio.run(_reference_client(int(port), int(agents), float(pps), float(secs)))
        return 0
    if args.sse_run:
        port, streams, secs = args.sse_run
        asyncio.run(_sse_streams(int(port), int(streams), float(secs)))
        return 0
    if args.agents_run:
        port, tokens, pps, secs = args.agents_run
        out = asyncio.run(_agents(int(port), Path(tokens).read_text().split(), float(pps), float(secs)))
        print(json.dumps(out))
        return 0

    from netprobe.farend import tokens as token_file
    from netprobe.lab.awake import keep_awake

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpu = (cpus[-1], cpus[0]) if len(cpus) > 1 else (cpus[0], cpus[0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="netprobe-owd-bench-") as tmp, contextlib.ExitStack() as stack:
        tokens_path, mine = Path(tmp) / "tokens.json", Path(tmp) / "agent-tokens"
        mine.write_text("\n".join(token_file.issue(tokens_path, f"agent-{i}")[0] for i in range(args.agents)))
        if not args.no_keep_awake:
            stack.enter_context(keep_awake(cpus))
        env = dict(os.environ)
        if args.pythonpath is not None:
            env["PYTHONPATH"] = str(args.pythonpath.resolve())
        server = subprocess.Popen(["taskset", "-c", str(server_cpu), *_rt(args), sys.executable, "-m",
                                   "netprobe.cli", "target", "--listen", "127.0.0.1:0", "--udp",
                                   f"127.0.0.1:{port}", "--tokens", str(tokens_path)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        assert server.stderr is not None
        sse = None
        try:
            # "… listening" lines: the emitter's, then the reflector's
            listening = [server.stderr.readline(), server.stderr.readline()]
            http = re.search(r"url=http://127\.0\.0\.1:(\d+)", "".join(listening))
            if args.sse_streams and http:
                sse = subprocess.Popen(["taskset", "-c", str(client_cpu), sys.executable, __file__,
                                        "--sse-run", http.group(1), str(args.sse_streams),
                                        str(args.seconds + 5)])
                time.sleep(1.0)
            cpu0, wall0 = _cpu_s(server.pid), time.monotonic()
            out = subprocess.run(["taskset", "-c", str(client_cpu), sys.executable, __file__, "--agents-run",
                                  str(port), str(mine), str(args.pps), str(args.seconds)],
                                 capture_output=True, text=True, timeout=args.seconds + 120)
            cpu1, wall1 = _cpu_s(server.pid), time.monotonic()
        finally:
            if sse is not None:
                sse.kill()
                sse.wait()
            server.terminate()
            _, err = server.communicate(timeout=30)
        ref = reference(args, server_cpu, client_cpu)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 2
    r = json.loads(out.stdout)
    packets = r["sent"] + args.agents          # and one status query per agent at least
    cpu = cpu1 - cpu0
    print(f"agents={args.agents} pps_each={args.pps:g} seconds={args.seconds:g} "
          f"server_cpu={server_cpu} client_cpu={client_cpu} sse_streams={args.sse_streams} rt={args.rt} "
          f"target={(args.pythonpath or Path(__file__).resolve().parent.parent)}")
    print(f"requests {r['sent']:,} ({r['sent'] / (wall1 - wall0):,.0f}/s over the run), "
          f"replies {r['received']:,}, lost {r['sent'] - r['received']:,}, bad replies {r['bad']}")
    wall = wall1 - wall0
    print(f"reflector CPU {cpu:.2f} s over {wall:.1f} s = {cpu / wall * 100:.1f} % of one core, "
          f"{cpu / packets * 1e6:.1f} µs per packet")
    hold, rtt = r["hold_ms"], r["rtt_ms"]
    if hold:
        print(f"added delay (t3 − t2) ms p50={hold['p50']:.4f} p99={hold['p99']:.4f} max={hold['max']:.3f} "
              "(goal p99 < 0.2)")
    print(f"reference, a bare Python UDP echo at the same rate: kernel stamp to user space ms "
          f"p50={ref['p50']:.4f} p99={ref['p99']:.4f} max={ref['max']:.3f} over {ref['n']:,} packets")
    if hold:
        print(f"ratio to the reference: p50 {hold['p50'] / ref['p50']:.2f}×, "
              f"p99 {hold['p99'] / ref['p99']:.2f}×")
    if rtt:
        print(f"client RTT ms p50={rtt['p50']:.3f} p99={rtt['p99']:.3f} max={rtt['max']:.3f}")
    stopped = [line for line in err.splitlines() if "reflector stopped" in line]
    if stopped:
        print(stopped[-1].strip())
    ok = bool(hold) and hold["p99"] < 0.2 and r["received"] == r["sent"] and not r["bad"]
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
