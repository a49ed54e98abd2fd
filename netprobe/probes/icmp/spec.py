"""icmp's registry entry: what the reports, alerts and config read without its runtime (runtime.py:
settings, engine, result type)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import AlertMetric, ProbeCli, ProbeRuntime, ProbeSpec, ReportRole

if TYPE_CHECKING:
    from netprobe.probes.icmp.runtime import IcmpResult, IcmpSettings


def _runtime() -> ProbeRuntime[IcmpSettings, IcmpResult]:
    from netprobe.probes.icmp.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.icmp.command import CLI

    return CLI


SPEC: ProbeSpec[IcmpSettings, IcmpResult] = ProbeSpec(
    name="icmp", runtime=_runtime, cli=_cli,
    agent_wide=(("max_rate", "the send-rate cap is the agent's, for all targets together"),),
    alert_metrics=(AlertMetric("loss_pct"), AlertMetric("rtt_p95_ms"), AlertMetric("jitter_ms"),
                   AlertMetric("attainment_pct", slo=True)),
    report=ReportRole(rtt_rank=0))
