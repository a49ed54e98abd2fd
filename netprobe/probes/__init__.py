"""Probe registry. Adding a probe = one module here + one entry below; nothing in the core changes."""

from __future__ import annotations

from netprobe.probes import icmp, mtr, sse, tcp
from netprobe.probes.base import ProbeContext, ProbeSettings, ProbeSpec, ProbeTarget

REGISTRY: dict[str, ProbeSpec] = {spec.name: spec for spec in (icmp.SPEC, tcp.SPEC, mtr.SPEC, sse.SPEC)}

__all__ = ["REGISTRY", "ProbeContext", "ProbeSettings", "ProbeSpec", "ProbeTarget"]
