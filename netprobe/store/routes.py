"""Route verdicts of stored rounds of the route probes (mtr, rmtr; docs/probes.md), without SQL: what route
events and the reports' detected lines read from an envelope. Apart from netprobe.store.events so that
the report's read path (netprobe.store.fleet) does not import SQLAlchemy for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from netprobe.probes import REGISTRY

_HASH_MAX = 64                           # path_changes.old_hash/new_hash


def route_probes(direction: str | None = None) -> tuple[str, ...]:
    """The probes whose rounds carry a route verdict (their specs' route_of, told by their
    route_direction without loading it): mtr, rmtr; with `direction`, those tracing that way
    (forward: mtr; return: rmtr)."""
    return tuple(name for name, spec in REGISTRY.items()
                 if spec.route_direction is not None and direction in (None, spec.route_direction))


@dataclass(frozen=True, slots=True)
class Route:
    """The route verdict of one usable round of a route probe (`probe`)."""

    probe: str
    result_id: str
    started_at: datetime
    label: str | None
    hash: str
    mismatch: bool
    asns: list[Any]
    declared: Any
    hops: list[list[str]]

    @property
    def order(self) -> tuple[datetime, str]:
        """Results are ordered by start time, then id (so ties still order the same everywhere)."""
        return (self.started_at, self.result_id)

    def summary(self) -> dict[str, Any]:
        return {"label": self.label, "hash": self.hash, "hops": self.hops}


def route_of(result_id: str, started_at: datetime, envelope: Mapping[str, Any]) -> Route | None:
    """route_of_envelope of a stored round, read from its JSON as the database returns it (route
    history, the fleet's detected lines; on PostgreSQL each hub cut down to its addresses). Lenient
    about the shape: an odd route is unusable, never an error, so a collector does not refuse
    envelopes an agent stored."""
    result = envelope.get("result")
    probe = envelope.get("probe")
    if not isinstance(probe, str) or probe not in route_probes() or not isinstance(result, Mapping):
        return None
    route = result.get("route")
    # `reached` is not pinned in docs/api.md: only an explicit false makes a result unusable
    if result.get("status") == "error" or result.get("reached") is False or not isinstance(route, Mapping):
        return None
    digest = route.get("hash")
    if not isinstance(digest, str) or not 0 < len(digest) <= _HASH_MAX:
        return None
    label = route.get("label")
    asns = route.get("asns")
    target = envelope.get("target")
    declared = route.get("declared_line", target.get("line") if isinstance(target, Mapping) else None)
    return Route(probe=probe, result_id=result_id, started_at=started_at,
                 label=label if isinstance(label, str) else None, hash=digest,
                 mismatch=route.get("mismatch") is True, asns=list(asns) if isinstance(asns, list) else [],
                 declared=declared, hops=_hops(result.get("report")))


def _hops(report: Any) -> list[list[str]]:
    """Addresses seen at each hop (`[]` for a silent one), from mtr's report.hubs."""
    hubs = report.get("hubs") if isinstance(report, Mapping) else None
    if not isinstance(hubs, list):
        return []
    return [[a for a in hub.get("addresses") or [] if isinstance(a, str)] if isinstance(hub, Mapping) else []
            for hub in hubs]


__all__ = ["Route", "route_of", "route_probes"]
