"""rmtr's registry entry: what the reports, alerts and config read without its runtime
(runtime.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.base import AlertMetric, ProbeCli, ProbeRuntime, ProbeSpec, ReportRole

if TYPE_CHECKING:
    from netprobe.probes.rmtr.runtime import RmtrResult, RmtrSettings


def _runtime() -> ProbeRuntime[RmtrSettings, RmtrResult]:
    from netprobe.probes.rmtr.runtime import RUNTIME

    return RUNTIME


def _cli() -> ProbeCli:
    from netprobe.probes.rmtr.command import CLI

    return CLI


SPEC: ProbeSpec[RmtrSettings, RmtrResult] = ProbeSpec(
    name="rmtr", runtime=_runtime, cli=_cli,
    report=ReportRole(), route_direction="return", mismatch_kind="return_line_mismatch",
    # a change of the way back is a change of the route too: path_change counts both directions
    alert_metrics=(AlertMetric("path_change", rank=1, events=True),
                   AlertMetric("return_line_mismatch", events=True), AlertMetric("asymmetric", lines=True)))
