"""tcp's registry entry: what the reports, alerts and config read without its runtime
(runtime.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import (
    AlertMetric,
    PageFigure,
    PageTable,
    ProbeCli,
    ProbeRuntime,
    ProbeSpec,
    ReportColumn,
    ReportRole,
)

if TYPE_CHECKING:
    from netprobe.probes.tcp.runtime import TcpResult, TcpSettings


def _runtime() -> ProbeRuntime[TcpSettings, TcpResult]:
    from netprobe.probes.tcp.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.tcp.command import CLI

    return CLI


SPEC: ProbeSpec[TcpSettings, TcpResult] = ProbeSpec(
    name="tcp", runtime=_runtime, cli=_cli,
    alert_metrics=(AlertMetric("rtt_p95_ms", rank=2), AlertMetric("jitter_ms", rank=2),
                   AlertMetric("attainment_pct", rank=2, slo=True)),
    report=ReportRole(figures=(("tcp_connect_p95_ms", "rtt_p95_ms"),),
                      columns=(ReportColumn("tcp p95", "tcp_connect_p95_ms"),),
                      on_row=("tcp_connect_p95_ms",)),
    page=PageTable("TCP", "TCP connect", (
        PageFigure("connect P50, ms", "rtt_p50_ms"), PageFigure("connect P95, ms", "rtt_p95_ms"),
        PageFigure("failed connects, %", "loss_pct", "pct"),
        PageFigure("rounds (failed)", "rounds", "rounds"))))
