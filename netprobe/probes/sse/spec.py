"""sse's registry entry: what the reports, alerts and config read without its runtime (runtime.py:
settings, stream reader, result type, rollup extras)."""

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
    RollupFigure,
)

if TYPE_CHECKING:
    from netprobe.probes.sse.runtime import SseResult, SseSettings

# means over streams of each stream's gap p95 / delay-variation p95; stalls per minute of streamed time
# (each stream's stalls over its duration, summed); openai mode: the server's share of the first token
# (first event − response headers, the network's round trip cancels) and time per output token
ROLLUP_FIGURES = (RollupFigure("gap_p95_ms", "gap_p95_ms"),
                  RollupFigure("delay_var_p50_ms", "delay_var_p50_ms"),
                  RollupFigure("delay_var_p95_ms", "delay_var_p95_ms"),
                  RollupFigure("stalls_per_min", "stalls", per="stream_s", per_scale=60.0),
                  RollupFigure("server_first_ms", "server_first_ms"), RollupFigure("tpot_ms", "tpot_ms"),
                  RollupFigure("server_first_ln_mean", "server_first_ln"),
                  RollupFigure("server_first_ln2_mean", "server_first_ln2"))


def _runtime() -> ProbeRuntime[SseSettings, SseResult]:
    from netprobe.probes.sse.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.sse.command import CLI

    return CLI


SPEC: ProbeSpec[SseSettings, SseResult] = ProbeSpec(
    name="sse", runtime=_runtime, cli=_cli,
    rollup_figures=ROLLUP_FIGURES,
    alert_metrics=(AlertMetric("stalls_per_min"),), report=ReportRole(figures=(
        ("sse_first_event_p95_ms", "rtt_p95_ms"), ("stalls_per_min", "stalls_per_min"),
        ("sse_delay_var_p95_ms", "delay_var_p95_ms"),
        ("sse_delay_var_p50_ms", "delay_var_p50_ms"),
        ("sse_gap_p95_ms", "gap_p95_ms"), ("sse_server_first_ms", "server_first_ms"),
        ("sse_tpot_ms", "tpot_ms"), ("sse_server_first_ln_mean", "server_first_ln_mean"),
        ("sse_server_first_ln2_mean", "server_first_ln2_mean")),
        on_row=("sse_first_event_p95_ms", "stalls_per_min"),
        columns=(ReportColumn("sse 1st p95", "sse_first_event_p95_ms"),
                 ReportColumn("stalls/min", "stalls_per_min", "rate"))),
    page=PageTable("SSE", "SSE streams", (
        PageFigure("first event P50, ms", "rtt_p50_ms"),
        PageFigure("first event P95, ms", "rtt_p95_ms"),
        PageFigure("stalls per minute", "stalls_per_min", "rate"),
        PageFigure("gap P95 (mean of streams), ms", "gap_p95_ms"),
        PageFigure("server's first token (mean), ms", "server_first_ms"),
        PageFigure("time per output token (mean), ms", "tpot_ms"),
        PageFigure("streams (failed)", "rounds", "rounds"))))
