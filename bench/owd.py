"""owd reflector at scale: one `netprobe target --udp` serving many agents' owd streams.

    python bench/owd.py [--agents 200] [--pps 10] [--seconds 60] [--client paced|asyncio|both]
                        [--phases even|random] [--jitter-us J] [--rt] [--sse-streams N] [--pythonpath DIR]

Issues one token per agent, starts the reflector on loopback pinned to one core, and sends every
agent's round (`--pps` requests a second for `--seconds`) from a process pinned to the other. Prints
the reflector's CPU per packet, the delay it adds to a packet (t3 − t2: from the kernel's receive
stamp to its send stamp, goal P99 < 0.2 ms), and loss, which on loopback is false loss (goal: none).
Also the client's RTT quantiles of the same packets, how evenly the requests left and arrived, and,
as the reference for the hold, a bare Python UDP echo's time from the kernel's receive stamp to user
space under the same load.

The load (`--client`): `paced` (default; bench/owd_paced.py) sends as independent agents on their own
machines would, agent i's k-th request at i·interval/N + k·interval (`--phases random`: each agent's
phase drawn at random; `--jitter-us J`: ± J µs per request), one sender on time to a few µs;
`asyncio` runs netprobe's own client (owd.client.exchange) once per agent in one asyncio process, whose
timers fire in bunches; `both` measures one, then the other, each with its own reference.

`--sse-streams N` keeps the target's HTTP side busy meanwhile: N emitter streams (GET /sse, an event
every 20 ms) read from the agents' core, as when agents' sse probes and owd rounds reach one target.
`--rt` runs the target and the reference at SCHED_FIFO (as the lab's relay runs), so that other
work on a shared machine stops delaying their wake-ups (the paced sender runs at SCHED_FIFO always:
it stands for other machines). `--pythonpath DIR` runs another checkout's `netprobe target` (the
"before" figures); the reflector's CPU counts its child processes too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import owd_paced  # bench/, beside this file

from netprobe.probes.owd.client import Exchange

CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """CPU time of `pid` and of its living children (the reflector's process), recursively.

    utime + stime count in clock ticks (10 ms): a short run on a fast machine can read 0 for a process
    that did run. Its living threads' schedstat is in ns, but misses threads that have ended; both are
    lower bounds, so the larger is taken."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / CLK
    on_cpu = children = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            on_cpu += int((task / "schedstat").read_text().split()[0]) / 1e9
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                children += _cpu_s(int(child))
    return max(ticks, on_cpu) + children


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


async def _agents(port: int, keys: list[bytes], pps: float, seconds: float) -> list[Exchange]:
    """The old load: netprobe's own client once per agent, all in this one asyncio process."""
    from netprobe.probes.owd.client import exchange

    interval = 1.0 / pps
    count = int(seconds * pps)

    async def one(key: bytes, delay: float) -> Exchange:
        await asyncio.sleep(delay)
        return await exchange(("127.0.0.1", port), key, count, interval, timeout=2.0)

    return list(await asyncio.gather(*(one(k, i * interval / len(keys)) for i, k in enumerate(keys))))


def _q(v: list[float]) -> dict[str, float] | None:
    from netprobe.stats import percentile

    v = sorted(v)
    return {"p50": percentile(v, 50), "p99": percentile(v, 99), "max": v[-1]} if v else None


def summary(rounds: list[Exchange], pps: float, late_ns: list[int] | None) -> dict[str, Any]:
    """The run's figures from the agents' rounds, through netprobe's own figures(), and how even the
    load was: each request's t1 against its agent's schedule (k·interval from its earliest-running
    send), the share of requests that reached the reflector within 50 µs of the one before, and the
    share that arrived while the one before was still being answered (t2 before the previous t3)."""
    from netprobe.probes.owd.figures import figures

    figs = [figures(x) for x in rounds]
    arrivals = sorted((r.t2, r.t3) for x in rounds for r in x.replies)
    pairs = list(itertools.pairwise(arrivals))
    interval = 1e9 / pps
    skew: list[float] = []
    for x in rounds:
        if x.replies:
            base = min(r.t1 - r.seq * interval for r in x.replies)
            skew += [(r.t1 - r.seq * interval - base) / 1e6 for r in x.replies]
    return {
        "sent": sum(f.sent for f in figs), "received": sum(f.received for f in figs),
        "bad": sum(x.bad for x in rounds), "status_answered": sum(x.status_answered for x in rounds),
        "fwd_lost": round(sum(f.fwd_loss_pct * f.sent for f in figs) / 100),
        "ret_lost": round(sum(f.ret_loss_pct * f.sent for f in figs) / 100),
        "hold_ms": _q([(t3 - t2) / 1e6 for t2, t3 in arrivals]),
        "rtt_ms": _q([s for f in figs for s in f.samples_ms if s is not None]),
        "t1_skew_ms": _q(skew),
        "late_ms": _q([n / 1e6 for n in late_ns]) if late_ns is not None else None,
        "close_pct": 100 * sum(b[0] - a[0] < 50_000 for a, b in pairs) / max(1, len(pairs)),
        "queued_pct": 100 * sum(b[0] < a[1] for a, b in pairs) / max(1, len(pairs)),
    }


def _plan(load: dict[str, Any]) -> list[tuple[int, int, int]]:
    return owd_paced.schedule(load["agents"], load["pps"], load["seconds"], load["phases"],
                              load["jitter_us"], load["seed"])


def _load_run(load: dict[str, Any]) -> dict[str, Any]:
    """In the client's process: one load against the reflector, its summary."""
    from netprobe.probes.owd import packets

    keys = [packets.derive_key(t) for t in Path(load["tokens"]).read_text().split()]
    t0 = os.times()
    if load["client"] == "asyncio":
        rounds, late = asyncio.run(_agents(load["port"], keys, load["pps"], load["seconds"])), None
    else:
        rounds, late = owd_paced.run(load["port"], keys, _plan(load))
    t1 = os.times()
    out = summary(rounds, load["pps"], late)
    out["client_cpu_s"] = (t1.user - t0.user) + (t1.system - t0.system)
    return out


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
        if not data:
            break
        sec, nsec = int.from_bytes(anc[0][2][:8], "little"), int.from_bytes(anc[0][2][8:16], "little")
        holds.append((now - (sec * 10**9 + nsec)) / 1e6)
        s.sendto(data, addr)
except TimeoutError:
    pass
holds.sort()
print(json.dumps({"n": len(holds), "p50": holds[len(holds) // 2], "p99": holds[int(len(holds) * 0.99)],
                  "max": holds[-1]}))
"""



def _rt(args: argparse.Namespace) -> list[str]:
    return ["chrt", "-f", "10"] if args.rt else []


def _load(args: argparse.Namespace, client: str, port: int, tokens: Path | None) -> dict[str, Any]:
    return {"client": client, "port": port, "tokens": str(tokens), "agents": args.agents, "pps": args.pps,
            "seconds": args.seconds, "phases": args.phases, "jitter_us": args.jitter_us, "seed": args.seed}


def reference(args: argparse.Namespace, server_cpu: int, client_cpu: int) -> dict[str, Any]:
    """The floor on this machine: a bare Python UDP echo (blocking recvmsg, kernel stamp, nothing
    else) held as the reflector's hold is measured, pinned the same way, under the paced load (the
    same schedule as `--client paced`'s, 88 bytes of nothing, echoes unread)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["taskset", "-c", str(server_cpu), *_rt(args), sys.executable, "-c",
                               _REFERENCE_SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    server.stdout.readline()
    sent = subprocess.run(["taskset", "-c", str(client_cpu), sys.executable, __file__, "--reference-run",
                           json.dumps(_load(args, "paced", port, None))], check=True, capture_output=True,
                          text=True, timeout=args.seconds + 60)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stop:
        stop.sendto(b"", ("127.0.0.1", port))
    out, _ = server.communicate(timeout=30)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["late_ms"] = json.loads(sent.stdout)
    return result


def measure(args: argparse.Namespace, client: str) -> dict[str, Any]:
    """One reflector under one load, then the reference; the figures printed, and returned."""
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
        run = [str(args.reflector_script)] if args.reflector_script else ["-m", "netprobe.cli"]
        server = subprocess.Popen(["taskset", "-c", str(server_cpu), *_rt(args), sys.executable, *run,
                                   "target", "--listen", "127.0.0.1:0", "--udp",
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
            out = subprocess.run(["taskset", "-c", str(client_cpu), sys.executable, __file__, "--load-run",
                                  json.dumps(_load(args, client, port, mine))],
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
        raise SystemExit(f"the load failed:\n{out.stderr}")
    r: dict[str, Any] = json.loads(out.stdout)
    packets = r["sent"] + r["status_answered"]         # and one status query per agent at least
    cpu, wall = cpu1 - cpu0, wall1 - wall0
    r.update(client=client, reference=ref, cpu_us_per_packet=cpu / packets * 1e6, cpu_pct=cpu / wall * 100,
             rt=args.rt, phases=args.phases, jitter_us=args.jitter_us)
    load = (f"paced, phases {args.phases}, jitter ±{args.jitter_us:g} µs" if client == "paced"
            else "asyncio, netprobe's client per agent in one process")
    print(f"--- load: {load}; agents={args.agents} pps_each={args.pps:g} seconds={args.seconds:g} "
          f"server_cpu={server_cpu} client_cpu={client_cpu} sse_streams={args.sse_streams} rt={args.rt} "
          f"target={(args.pythonpath or Path(__file__).resolve().parent.parent)}")
    print(f"requests {r['sent']:,} ({r['sent'] / wall:,.0f}/s over the run), replies {r['received']:,}, "
          f"lost {r['sent'] - r['received']:,} (fwd {r['fwd_lost']}, ret {r['ret_lost']}), "
          f"bad replies {r['bad']}, status answered {r['status_answered']}/{args.agents}")
    print(f"reflector CPU {cpu:.2f} s over {wall:.1f} s = {r['cpu_pct']:.1f} % of one core, "
          f"{r['cpu_us_per_packet']:.1f} µs per packet; client CPU {r['client_cpu_s']:.1f} s")
    hold, rtt = r["hold_ms"], r["rtt_ms"]
    if r["late_ms"]:
        print(f"sends' lateness against their schedule ms {_fmt(r['late_ms'])}")
    if r["t1_skew_ms"]:
        print(f"t1 against each agent's own schedule ms {_fmt(r['t1_skew_ms'])}")
    print(f"arrivals within 50 µs of the one before {r['close_pct']:.1f} %, "
          f"while the one before was being answered {r['queued_pct']:.1f} %")
    if hold:
        print(f"added delay (t3 − t2) ms {_fmt(hold)} (goal p99 < 0.2)")
    print(f"reference, a bare Python UDP echo under the paced load: kernel stamp to user space ms "
          f"{_fmt(ref)} over {ref['n']:,} packets (its sends' lateness ms {_fmt(ref['late_ms'])})")
    if hold:
        print(f"ratio to the reference: p50 {hold['p50'] / ref['p50']:.2f}×, "
              f"p99 {hold['p99'] / ref['p99']:.2f}×")
    if rtt:
        print(f"client RTT ms {_fmt(rtt)}")
    stopped = [line for line in err.splitlines() if "reflector stopped" in line]
    if stopped:
        print(stopped[-1].strip())
    r["ok"] = bool(hold) and hold["p99"] < 0.2 and r["received"] == r["sent"] and not r["bad"]
    print("RESULT", "PASS" if r["ok"] else "FAIL")
    return r


def _fmt(q: dict[str, float]) -> str:
    return f"p50={q['p50']:.4f} p99={q['p99']:.4f} max={q['max']:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--pps", type=float, default=10.0, help="requests per second per agent")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--client", choices=("paced", "asyncio", "both"), default="paced",
                    help="the load: paced as independent agents send, or netprobe's asyncio client per "
                         "agent in one process (bunched), or one then the other")
    ap.add_argument("--phases", choices=("even", "random"), default="even",
                    help="paced: agent i at i·interval/N, or each agent at a random phase")
    ap.add_argument("--jitter-us", type=float, default=0.0, metavar="J",
                    help="paced: each request ± up to J µs off its agent's schedule")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, metavar="FILE", help="append each mode's figures")
    ap.add_argument("--no-keep-awake", action="store_true", help="let idle vCPUs halt")
    ap.add_argument("--sse-streams", type=int, default=0, metavar="N",
                    help="keep the target's HTTP side busy with N SSE streams (20 ms events) meanwhile")
    ap.add_argument("--pythonpath", type=Path, default=None, metavar="DIR",
                    help="run this checkout's netprobe target (default: this one)")
    ap.add_argument("--reflector-script", type=Path, default=None, metavar="FILE",
                    help="run `python FILE target …` instead of `python -m netprobe.cli target …` (a copy "
                         "of the reflector instrumented to say where its time goes)")
    ap.add_argument("--rt", action="store_true",
                    help="run the target and the reference at SCHED_FIFO 10 (chrt; root): other work on "
                         "a shared machine no longer delays their wake-ups")
    ap.add_argument("--sse-run", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--load-run", help=argparse.SUPPRESS)
    ap.add_argument("--reference-run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference_run:
        load = json.loads(args.reference_run)
        keys = [bytes(32)] * load["agents"]
        _, late = owd_paced.run(load["port"], keys, _plan(load), raw=True)
        print(json.dumps(_q([n / 1e6 for n in late])))
        return 0
    if args.sse_run:
        port, streams, secs = args.sse_run
        asyncio.run(_sse_streams(int(port), int(streams), float(secs)))
        return 0
    if args.load_run:
        print(json.dumps(_load_run(json.loads(args.load_run))))
        return 0
    rows = [measure(args, c) for c in (("paced", "asyncio") if args.client == "both" else (args.client,))]
    if args.json is not None:
        with args.json.open("a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
