"""netprobe's exporters against the real Prometheus tools: `promtool check metrics` finds nothing in
either /metrics, and a real Prometheus scraping both answers PromQL over the agent's RTT histogram."""

from __future__ import annotations

import subprocess
import urllib.request

from tests.support.servers import prom_query
from tests.support.stack import AGENT, TARGET, Stack


def _lint(url: str) -> str:
    text: bytes = urllib.request.urlopen(url, timeout=10).read()
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert out.returncode == 0, (out.stdout + out.stderr).decode()
    return text.decode()


def test_promtool_finds_no_problem_in_the_agents_metrics(running: Stack) -> None:
    text = _lint(running.agent_metrics)
    assert "netprobe_rtt_seconds_bucket" in text and "netprobe_alerts_firing" in text


def test_promtool_finds_no_problem_in_the_collectors_metrics(running: Stack) -> None:
    text = _lint(running.collector_metrics)
    assert "netprobe_collector_last_rtt_seconds" in text and "netprobe_alerts_firing" in text


def test_prometheus_answers_quantiles_of_the_agents_rtt_histogram(running: Stack) -> None:
    expr = ('histogram_quantile(0.95, sum by (le, agent, region, isp, target, probe, datacenter, line) '
            '(rate(netprobe_rtt_seconds_bucket{job="netprobe-agent"}[10s])))')
    series = prom_query(running.prometheus, expr)
    by_probe = {s["metric"]["probe"]: s for s in series}
    assert {"icmp", "tcp", "mtr"} <= set(by_probe), series
    for s in by_probe.values():
        assert {k: v for k, v in s["metric"].items() if k != "probe"} == {
            "agent": AGENT["id"], "region": AGENT["region"], "isp": AGENT["isp"],     # the scrape config's
            "target": TARGET["id"], "datacenter": TARGET["datacenter"], "line": TARGET["line"]}
        p95 = float(s["value"][1])
        assert 0 < p95 <= 0.5, s      # loopback: under the smallest buckets' scale, never NaN
    # and the collector's view of the same agent, scraped by the same Prometheus
    rtt = prom_query(running.prometheus, f'netprobe_collector_last_rtt_seconds{{agent="{AGENT["id"]}"}}')
    assert rtt and {s["metric"]["probe"] for s in rtt} <= {"icmp", "tcp", "mtr"}
    assert all(s["metric"]["job"] == "netprobe-collector" and s["metric"]["target"] == TARGET["id"]
               for s in rtt)
