"""owd's registry entry: what the reports, alerts and config read without its runtime (runtime.py:
settings, UDP client, result type, rollup extras)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import (
    AlertMetric,
    ProbeCli,
    ProbeRuntime,
    ProbeSpec,
    ReportColumn,
    ReportRole,
    RollupFigure,
)

if TYPE_CHECKING:
    from netprobe.probes.owd.runtime import OwdResult, OwdSettings

ROLLUP_FIGURES = (
    RollupFigure("fwd_loss_pct", "owd_fwd_lost", per="owd_sent", per_scale=100.0),
    RollupFigure("ret_loss_pct", "owd_ret_lost", per="owd_sent", per_scale=100.0),
    RollupFigure("fwd_delay_var_p50_ms", "owd_fwd_var_p50_ms"),
    RollupFigure("fwd_delay_var_p95_ms", "owd_fwd_var_p95_ms"),
    RollupFigure("ret_delay_var_p50_ms", "owd_ret_var_p50_ms"),
    RollupFigure("ret_delay_var_p95_ms", "owd_ret_var_p95_ms"),
    RollupFigure("fwd_ms", "owd_fwd_ms"),
    RollupFigure("ret_ms", "owd_ret_ms"),
)


def _runtime() -> ProbeRuntime[OwdSettings, OwdResult]:
    from netprobe.probes.owd.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.owd.command import CLI

    return CLI


SPEC: ProbeSpec[OwdSettings, OwdResult] = ProbeSpec(
    name="owd", runtime=_runtime, cli=_cli,
    rollup_figures=ROLLUP_FIGURES,
    alert_metrics=(AlertMetric("fwd_loss_pct"), AlertMetric("ret_loss_pct"),
                   AlertMetric("loss_pct", rank=3), AlertMetric("rtt_p95_ms", rank=3),
                   AlertMetric("jitter_ms", rank=3)),
    report=ReportRole(rtt_rank=2, figures=(
        ("fwd_loss_pct", "fwd_loss_pct"), ("ret_loss_pct", "ret_loss_pct"),
        ("fwd_delay_var_p50_ms", "fwd_delay_var_p50_ms"), ("fwd_delay_var_p95_ms", "fwd_delay_var_p95_ms"),
        ("ret_delay_var_p50_ms", "ret_delay_var_p50_ms"), ("ret_delay_var_p95_ms", "ret_delay_var_p95_ms"),
        ("fwd_ms", "fwd_ms"), ("ret_ms", "ret_ms"), ("owd_rtt_p95_ms", "rtt_p95_ms")),
        # where the peak's loss and jitter happen: shown once some target has owd rounds
        columns=(ReportColumn("fwd loss%", "fwd_loss_pct", "pct", when_measured=True),
                 ReportColumn("ret loss%", "ret_loss_pct", "pct", when_measured=True),
                 ReportColumn("fwd var p95", "fwd_delay_var_p95_ms", when_measured=True),
                 ReportColumn("ret var p95", "ret_delay_var_p95_ms", when_measured=True))))
