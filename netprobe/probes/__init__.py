"""Probe registry. Adding a probe = one module here (its ProbeSpec) + one entry below; nothing in the
core changes: config, scheduler, store, rollups, alerts, reports and the CLI read what they need of a
probe from its spec."""

from __future__ import annotations

from netprobe.probes import icmp, mtr, owd, rmtr, sse, tcp
from netprobe.probes.base import ProbeContext, ProbeSettings, ProbeSpec, ProbeTarget
from netprobe.probes.results import ProbeResult

REGISTRY: dict[str, ProbeSpec[ProbeSettings, ProbeResult]] = {spec.name: spec for spec in (
    icmp.SPEC,
    tcp.SPEC,
    mtr.SPEC,
    sse.SPEC,
    owd.SPEC,
    rmtr.SPEC,
)}

__all__ = ["REGISTRY", "ProbeContext", "ProbeSettings", "ProbeSpec", "ProbeTarget"]
