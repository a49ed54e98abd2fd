"""The monitoring stack of the integration tests, started once: a real agent (probing loopback with
icmp, tcp and mtr), uploading to a real collector process, writing InfluxDB line protocol to a real
VictoriaMetrics, both exporters scraped every second by a real Prometheus."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.agent import FAST_PROBES
from tests.support.collector import CLI, CollectorProcess, add_agent, collector_config, wait_for
from tests.support.prometheus import prometheus
from tests.support.servers import free_port, prom_query
from tests.support.victoria import victoria_metrics

AGENT = {"id": "it-agent", "region": "it-east", "isp": "lo"}
TARGET = {"id": "lo4", "datacenter": "lo-dc", "line": "cn2-gia"}

# a rule on each side so their alerting families are on /metrics (it never fires on loopback)
LOG_ALERT = """
[[alerts]]
name = "slow"
metric = "rtt_p95_ms"
threshold = 5000
window = "10s"
notify = ["log"]

[[notifiers]]
name = "log"
kind = "log"
"""

AGENT_CONFIG = """
[agent]
id = "{agent[id]}"
region = "{agent[region]}"
isp = "{agent[isp]}"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[metrics]
listen = "{metrics}"

[uplink]
url = "{collector}"
token_file = "{uplink_token}"

[influxdb]
url = "{influx}"
org = "ops"
bucket = "netprobe"
token_file = "{influx_token}"

""" + FAST_PROBES + """
[probes.mtr]
every = "1s"
cycles = 2
interval = "0.05s"
timeout = "0.5s"

[[targets]]
id = "{target[id]}"
host = "127.0.0.1"
datacenter = "{target[datacenter]}"
line = "{target[line]}"
probes = ["icmp", "tcp", "mtr"]
tcp_port = {tcp_port}
"""


@dataclass(frozen=True)
class Stack:
    agent_metrics: str        # the agent's /metrics URL
    collector_metrics: str    # the collector's
    prometheus: str           # base URLs
    victoria: str


@contextlib.contextmanager
def _listener() -> Iterator[int]:
    """A TCP listener on loopback for the tcp probe (the kernel completes the handshakes)."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(128)
        yield int(srv.getsockname()[1])


@contextlib.contextmanager
def _agent(config: Path, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen([*CLI, "agent", "run", "--config", str(config)],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.terminate()
        code = proc.wait(15)
        assert code == 0, log.read_text(errors="replace")


def _ready(prom: str, vm: str) -> bool:
    """Two scrapes of the agent's histogram with rounds in between (of every probe: mtr's come last),
    one of the collector holding the agent's rounds, and VictoriaMetrics holding every probe's."""
    if not (prom_query(prom, 'increase(netprobe_rtt_seconds_count{probe="mtr"}[5s]) > 0') and
            prom_query(prom, "netprobe_collector_last_rtt_seconds")):
        return False
    urllib.request.urlopen(f"{vm}/internal/force_flush", timeout=5).read()
    return all(prom_query(vm, f"netprobe_{probe}_up") for probe in ("icmp", "tcp", "mtr"))


@contextlib.contextmanager
def stack(tmp: Path) -> Iterator[Stack]:
    cport, mport = free_port(), free_port()
    collector_url = f"http://127.0.0.1:{cport}"
    with contextlib.ExitStack() as es:
        # Prometheus first: it hands its first targets to the scrapers after about 5 s (service
        # discovery's update interval), which this overlaps with the rest starting
        prom = es.enter_context(prometheus(
            tmp / "prometheus", {"netprobe-agent": [f"127.0.0.1:{mport}"],
                                 "netprobe-collector": [f"127.0.0.1:{cport}"]},
            {"netprobe-agent": {"agent": AGENT["id"], "region": AGENT["region"], "isp": AGENT["isp"]}}))
        vm = es.enter_context(victoria_metrics(tmp / "vm"))
        ccfg = collector_config(tmp / "collector.toml", f"sqlite:///{tmp / 'collector.db'}",
                                f"127.0.0.1:{cport}")
        with ccfg.open("a") as f:
            f.write(LOG_ALERT)
        add_agent(ccfg, AGENT["id"], tmp / "uplink.token")
        (tmp / "influx.token").write_text("unused-by-victoria\n")
        collector = CollectorProcess(ccfg, collector_url, tmp / "collector.log")
        collector.start()
        es.callback(collector.stop)
        tcp_port = es.enter_context(_listener())
        acfg = tmp / "agent.toml"
        acfg.write_text(AGENT_CONFIG.format(
            agent=AGENT, target=TARGET, db=tmp / "agent.db", metrics=f"127.0.0.1:{mport}",
            collector=collector_url, uplink_token=tmp / "uplink.token", influx=vm,
            influx_token=tmp / "influx.token", tcp_port=tcp_port) + LOG_ALERT)
        es.enter_context(_agent(acfg, tmp / "agent.log"))
        try:
            wait_for(lambda: _ready(prom, vm), 30, "Prometheus and VictoriaMetrics to hold the rounds")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{(tmp / 'agent.log').read_text(errors='replace')}") from None
        yield Stack(f"http://127.0.0.1:{mport}/metrics", f"{collector_url}/metrics", prom, vm)
