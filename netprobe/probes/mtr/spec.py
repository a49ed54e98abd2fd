"""mtr's registry entry: what the reports, alerts and config read without its runtime (runtime.py:
settings, trace engine, line classifier, result type, route verdicts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import AlertMetric, ProbeCli, ProbeRuntime, ProbeSpec, ReportRole

if TYPE_CHECKING:
    from netprobe.probes.mtr.runtime import MtrResult, MtrSettings


def _runtime() -> ProbeRuntime[MtrSettings, MtrResult]:
    from netprobe.probes.mtr.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.mtr.command import CLI

    return CLI


SPEC: ProbeSpec[MtrSettings, MtrResult] = ProbeSpec(
    name="mtr", runtime=_runtime, cli=_cli,
    # its destination's figures stand in for icmp's where a target has no icmp
    alert_metrics=(AlertMetric("loss_pct", rank=1), AlertMetric("rtt_p95_ms", rank=1),
                   AlertMetric("jitter_ms", rank=1), AlertMetric("path_change", events=True),
                   AlertMetric("line_mismatch", events=True),
                   AlertMetric("attainment_pct", rank=1, slo=True)),
    report=ReportRole(rtt_rank=1), route_direction="forward")
