"""icmp's registry entry: what the reports, alerts and config read without its runtime (netprobe.probes.icmp:
settings, engine, result type)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import AlertMetric, ProbeSpec, ReportRole

if TYPE_CHECKING:
    from netprobe.probes.icmp import IcmpResult, IcmpSettings

SPEC: ProbeSpec[IcmpSettings, IcmpResult] = ProbeSpec(
    name="icmp", runtime="netprobe.probes.icmp", cli="netprobe.probes.icmp_cli",
    agent_wide=(("max_rate", "the send-rate cap is the agent's, for all targets together"),),
    alert_metrics=(AlertMetric("loss_pct"), AlertMetric("rtt_p95_ms"), AlertMetric("jitter_ms"),
                   AlertMetric("attainment_pct", slo=True)),
    report=ReportRole(rtt_rank=0))
