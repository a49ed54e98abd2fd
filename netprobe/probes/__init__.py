"""Probe registry. Adding a probe = one package here (netprobe/probes/<name>/: its spec, runtime,
command, engine and what its far end needs) + its spec's line below (imported, named in REGISTRY);
nothing in the core changes: config, scheduler, store, rollups, alerts, reports and the CLI read what
they need of a probe from its spec.
The built-in probes' specs leave their runtime parts (settings, engines, packet code) to their runtime
modules (ProbeSpec.runtime), so the registry is cheap for the reports to import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from netprobe.probes.base import ProbeContext, ProbeSpec, ProbeTarget
from netprobe.probes.icmp.spec import SPEC as ICMP
from netprobe.probes.mtr.spec import SPEC as MTR
from netprobe.probes.owd.spec import SPEC as OWD
from netprobe.probes.results import ProbeResult
from netprobe.probes.rmtr.spec import SPEC as RMTR
from netprobe.probes.sse.spec import SPEC as SSE
from netprobe.probes.tcp.spec import SPEC as TCP

if TYPE_CHECKING:
    from netprobe.probes.settings import ProbeSettings as ProbeSettings

REGISTRY: dict[str, ProbeSpec[ProbeSettings, ProbeResult]] = {
    spec.name: spec for spec in (ICMP, TCP, MTR, SSE, OWD, RMTR)}


def __getattr__(name: str) -> Any:
    if name == "ProbeSettings":      # pydantic: imported by those that validate settings, not the reports
        from netprobe.probes.settings import ProbeSettings

        return ProbeSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REGISTRY", "ProbeContext", "ProbeSettings", "ProbeSpec", "ProbeTarget"]
