"""`netprobe demo` (root): the lab of agents/lab.toml, the real agent probing it through one compressed
day with the lab's peak profile in the evening, then the evening-peak report, the budget for a 1 s
TTFT and the alerts that fired. The lab comes down however the demo ends."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from zoneinfo import ZoneInfo

from netprobe.alerts.formats import Notification
from netprobe.config.alerts import AlertRule
from netprobe.errors import SetupError
from netprobe.farend import tokens as token_file
from netprobe.lab import api
from netprobe.lab.addressing import AGENT_NS
from netprobe.lab.spec import RouteSpec, load_spec
from netprobe.textout import Out, console_width, style, width_of
from netprobe.times import utc_now

from .timeline import Timeline, replay, simulated_day

SPEC = Path(__file__).with_name("lab.toml")     # shipped with the package; agents/lab.toml links here
TIMEZONE = "Asia/Shanghai"
PEAK_HOURS = range(20, 23)                      # the report's default window, 20:00-23:00
TTFT_MS = 1000.0
# Loss over 3 simulated hours (one aligned window is exactly 20:00-23:00 in Shanghai): enough requests
# that the ordinary lines' peak loss stands clear of their off-peak loss.
REFLECTOR_PORT = 8473                           # `netprobe target` in each datacenter: emitter and reflector
# …and an inference server of known speed: first token after a log-normal 150 ms (P50) / 300 ms (P95)
# "prefill", then one token every 20 ms
PREFILL_MS, TOKEN_MS = (150.0, 300.0), 20
EMITTER = "/sse?count=40&interval_ms=20"
ALERT = {"name": "peak-loss", "metric": "loss_pct", "op": ">", "threshold": 3.0, "clear_threshold": 1.5,
         "window": 3 * 3600.0, "for_windows": 1, "targets": ["*"], "notify": ["demo"]}


def agent_config(routes: Sequence[RouteSpec], db: Path, token: Path) -> str:
    """The demo agent: every route by name over IPv4; icmp every second (20 requests), tcp every 2 s,
    an mtr trace every 10 s, so each simulated hour holds about a hundred requests per route; and owd
    to each datacenter's reflector every second (25 requests), to tell the two directions apart; and
    rmtr (the reflector's trace back) every 31 s for the first route of each datacenter: the lab's
    datacenter sends its own traffic by its first route, so only that one's way back is traced. A
    stream every 2 s: from the emitter (/sse, stalls and delay variation) on each datacenter's first
    route, from the OpenAI-style endpoint (the server's first-token time and TPOT) on the others."""
    head = f'''[agent]
id = "demo-agent"
region = "cn-east"
isp = "telecom"
timezone = "{TIMEZONE}"

[storage]
url = "sqlite:///{db}"

[probes.icmp]
every = "1s"
count = 20
interval = "0.02s"
timeout = "0.5s"

[probes.tcp]
every = "2s"
count = 3
interval = "0.1s"
timeout = "0.5s"

[probes.mtr]
every = "10s"
cycles = 3
interval = "0.3s"
timeout = "0.5s"

[probes.owd]
every = "1s"
count = 25
interval = "0.02s"
timeout = "0.4s"

[probes.rmtr]
every = "31s"
cycles = 3
interval = "0.3s"
timeout = "5s"

[probes.sse]
every = "2s"
mode = "openai"
max_tokens = 8
timeout = "5s"
idle_timeout = "2s"

[reflector]
token_file = "{token}"
'''
    first = {next(r.id for r in routes if r.datacenter == dc) for dc in {r.datacenter for r in routes}}
    targets = [f'''
[[targets]]
id = "{r.id}"
host = "{r.id}.lab"
datacenter = "{r.datacenter}"
line = "{r.line}"
probes = ["icmp", "tcp", "mtr", "owd", "sse"{', "rmtr"' if r.id in first else ""}]
family = "ipv4"
tcp_port = {r.tcp_ports[0]}
reflector = "http://{r.id}.lab:{REFLECTOR_PORT}"
sse_url = "http://{r.id}.lab:{REFLECTOR_PORT}{EMITTER if r.id in first else '/v1/chat/completions'}"
{'[targets.sse]' + chr(10) + 'mode = "emitter"' + chr(10) if r.id in first else ""}''' for r in routes]
    return head + "".join(targets)


class _Recorder:
    """The alert engine's notifier for the demo: keeps the transitions to print them."""

    def __init__(self) -> None:
        self.notes: list[Notification] = []

    def submit(self, n: Notification, names: Sequence[str]) -> None:
        if not n.repeat:
            self.notes.append(n)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (systemd, timeout) unwinds like Ctrl-C, so the lab still comes down."""
    def handler(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run(out: Path, hour_seconds: float, console: Out) -> None:
    if not api.has_lab_privileges():
        raise SetupError("netprobe demo builds network namespaces: run it as root (sudo netprobe demo)")
    spec = load_spec(SPEC)
    out.mkdir(parents=True, exist_ok=True)
    live, demo = out / "live.db", out / "demo.db"
    for old in (live, demo):
        for path in (old, old.with_name(old.name + "-wal"), old.with_name(old.name + "-shm")):
            path.unlink(missing_ok=True)
    config, tokens, token = out / "agent.toml", out / "reflector-tokens.json", out / "reflector.token"
    tokens.unlink(missing_ok=True)
    token.write_text(token_file.issue(tokens, "demo-agent")[0] + "\n")
    token.chmod(0o600)
    config.write_text(agent_config(spec.routes, live, token))
    with _terminate_as_interrupt():
        try:
            _rule(console, "1. the lab")
            state = api.up(SPEC, replace=True)
            console.print(f"{len(state.routes)} emulated routes from {SPEC.name}: "
                          + ", ".join(f"{r.id} ({r.line})" for r in spec.routes))
            namespaces = sorted({r.namespace for r in state.routes.values()})
            with _reflectors(namespaces, tokens, out / "reflectors.log"):
                console.print(f"netprobe target in each of {len(namespaces)} datacenters: a reflector "
                              "(owd tells the way out from the way back), an SSE emitter and an "
                              f"OpenAI-style server (first token {PREFILL_MS[0]:g} ms P50, "
                              f"{PREFILL_MS[1]:g} ms P95, then one every {TOKEN_MS} ms)")
                timeline = _probe_a_day(config, out / "agent.log", hour_seconds, console)
        finally:
            api.down()
        console.print("lab down")
    asyncio.run(_results(live, demo, timeline, out, console))


def _probe_a_day(config: Path, log: Path, hour_seconds: float, console: Out) -> Timeline:
    _rule(console, "2. the agent, through one compressed day")
    with log.open("wb") as sink:
        agent = subprocess.Popen(["ip", "netns", "exec", AGENT_NS, sys.executable, "-m", "netprobe.cli",
                                  "agent", "run", "--config", str(config)], stdout=sink, stderr=sink)
    try:
        _wait_started(agent, log)
        now = utc_now()
        timeline = Timeline(real_start=now, sim_start=simulated_day(TIMEZONE, now), hour_seconds=hour_seconds)
        profile = "base"
        for hour in range(24):
            wanted = "peak" if hour in PEAK_HOURS else "base"
            if wanted != profile:
                api.set_impairments(SPEC, profile=wanted)
                profile = wanted
            shown = style("peak profile", "red") if profile == "peak" else "base profile"
            console.print(f"  {hour:02d}:00  {shown}")
            due = timeline.real_start + timedelta(seconds=(hour + 1) * hour_seconds)
            time.sleep(max(0.0, (due - utc_now()).total_seconds()))
            if agent.poll() is not None:
                raise SetupError(f"the agent exited ({agent.returncode}); its log: {log}")
    finally:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(15)
            except subprocess.TimeoutExpired:
                agent.kill()
    return timeline


@contextlib.contextmanager
def _reflectors(namespaces: Sequence[str], tokens: Path, log: Path) -> Iterator[None]:
    """`netprobe target --udp … --tokens …` in each datacenter namespace, until the day is over."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with log.open("wb") as sink:
            for ns in namespaces:
                at = f"0.0.0.0:{REFLECTOR_PORT}"
                serve = [sys.executable, "-m", "netprobe.cli", "target", "--listen", at, "--udp", at,
                         "--tokens", str(tokens), "--prefill-ms", "{:g},{:g}".format(*PREFILL_MS),
                         "--token-ms", str(TOKEN_MS),
                         "--seed", "7"]
                procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *serve], stdout=sink, stderr=sink))
        deadline = time.monotonic() + 30.0
        while log.read_bytes().count(b"reflector listening") < len(procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SetupError(f"the reflectors did not start; their log: {log}")
            time.sleep(0.1)
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def _wait_started(agent: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b"agent started" in log.read_bytes():
            return
        if agent.poll() is not None:
            raise SetupError(f"the agent exited ({agent.returncode}) before starting; its log: {log}")
        time.sleep(0.1)
    raise SetupError(f"the agent did not start within {timeout:g} s; its log: {log}")


async def _results(live_db: Path, demo_db: Path, timeline: Timeline, out: Path, console: Out) -> None:
    from netprobe.alerts.engine import AlertEngine
    from netprobe.budget.attainment import SloModel
    from netprobe.budget.compute import BudgetParams, budget_rows, candidate
    from netprobe.budget.table import print_budget, print_slo
    from netprobe.report.peak import compute
    from netprobe.report.render_html import html
    from netprobe.report.render_table import print_table
    from netprobe.report.slo import SloRequest
    from netprobe.stats import LogNormal
    from netprobe.store import open_store

    live = await open_store(f"sqlite:///{live_db}")
    demo = await open_store(f"sqlite:///{demo_db}")
    try:
        rounds = await replay(live, demo, timeline)
        console.print(f"{rounds} rounds stored, replayed onto the simulated day in {demo_db}")
        _rule(console, "3. the evening peak (20:00-23:00) against off-peak (03:00-06:00)")
        # every route with the servers' known first-token time, so the routes compare on the network alone
        # (the openai-mode streams measure it on half of them: the report's sse columns)
        slo = SloRequest(SloModel(TTFT_MS), server=LogNormal.through(*PREFILL_MS), outcome=True, hours=True,
                         curve=True)
        report = await compute(demo, days=2, now=timeline.sim_end + timedelta(hours=1), slo=slo)
        report = dataclasses.replace(report, note=timeline.note(TIMEZONE))
        print_table(report, console)
        page = out / "report.html"
        page.write_text(html(report), encoding="utf-8")

        _rule(console, f"4. the budget for a {TTFT_MS:g} ms time to first token")
        params = BudgetParams(ttft_ms=TTFT_MS)
        rows = budget_rows([c for c in map(candidate, report.rows) if c is not None], params)
        print_slo(rows, slo)      # what share of requests meets it: the server as the streams measured it
        print_budget(rows, params, worst_case=True)

        _rule(console, "5. alerts")
        rule = AlertRule.model_validate(ALERT)
        recorder = _Recorder()
        engine = AlertEngine(demo, [rule], recorder, settle=0.0)
        await engine.evaluate_due(timeline.sim_start)          # begin at the simulated midnight
        await engine.evaluate_due(timeline.sim_end)
        console.print(f"rule {rule.name}: loss_pct > {rule.threshold:g} % over 3-hour windows, "
                      f"clears at ≤ {rule.clear_threshold:g} %")
        for n in recorder.notes:
            colour = "red" if n.state == "firing" else "green"
            console.print(f"  {style(n.summary(), colour)}  (window ending {_local(n.window_end)})")
        if not recorder.notes:
            console.print("  none fired")
        _rule(console, "files")
        console.print(f"HTML report: {page}\nreport database: {demo_db} (netprobe report peak --db "
                      f"sqlite:///{demo_db} --days 2)\nagent log: {out / 'agent.log'}")
    finally:
        await live.close()
        await demo.close()


def _rule(out: Out, title: str) -> None:
    """A heading across the console: ── title ── (rich's rule)."""
    width = out.width or console_width(out.file)
    left = (width - width_of(title)) // 2 - 1
    right = width - left - width_of(title) - 2
    out.print(style("─" * left, "green") + " " + style(title, "bold") + " " + style("─" * right, "green"))


def _local(ts: datetime) -> str:
    return f"{ts.astimezone(ZoneInfo(TIMEZONE)):%H:%M} {TIMEZONE}"


def default_out() -> Path:
    return Path(os.environ.get("NETPROBE_DEMO_DIR", "netprobe-demo")).resolve()
