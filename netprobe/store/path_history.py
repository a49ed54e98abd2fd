"""One agent × target's route events per direction (forward: mtr; return: rmtr), newest first, as the
dashboard's target page lists them: each with the hops and line before and after. Plain SQL
(netprobe.store.reads) on the path_changes index (agent, target, detected_at)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from netprobe.probes.base import DIRECTIONS
from netprobe.store.reads import Source, utc


@dataclass(frozen=True, slots=True)
class PathChange:
    id: int
    detected_at: datetime
    kind: str                            # path_change | line_mismatch | return_line_mismatch
    direction: str
    old_hash: str | None
    new_hash: str | None
    label: str | None                    # the line of the path after the event
    before_label: str | None             # path_change: the line before
    before_hops: list[list[str]] | None  # path_change: addresses per hop, before and after
    after_hops: list[list[str]] | None
    declared: str | None                 # mismatch: the line the target was sold as


@dataclass(frozen=True, slots=True)
class PathHistory:
    events: list[PathChange]             # newest first, at most the limit asked for
    total: int                           # events of this direction since the start asked for


def _hops(summary: Any) -> list[list[str]] | None:
    hops = summary.get("hops") if isinstance(summary, Mapping) else None
    if not isinstance(hops, list):
        return None
    return [[a for a in h if isinstance(a, str)] if isinstance(h, list) else [] for h in hops]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _change(row: tuple[Any, ...]) -> PathChange:
    rid, at, kind, direction, old_hash, new_hash, label, details = row
    if isinstance(details, str):          # SQLite keeps JSON as text; PostgreSQL's JSONB arrives decoded
        details = json.loads(details)
    d = details if isinstance(details, Mapping) else {}
    before, after = d.get("before"), d.get("after")
    return PathChange(int(rid), utc(at), kind, direction, old_hash, new_hash, label,
                      _text(before.get("label")) if isinstance(before, Mapping) else None,
                      _hops(before), _hops(after), _text(d.get("declared")))


async def path_history(store: Source, agent_id: str, target_id: str, since: datetime,
                       limit: int) -> dict[str, PathHistory]:
    """Per direction, the newest `limit` route events detected at or after `since`, and how many
    there are in all."""
    params = {"a": agent_id, "t": target_id, "since": since}
    out: dict[str, PathHistory] = {}
    async with store.reading("reading path events from") as conn:
        totals: dict[str, int] = dict(await conn.fetch(
            "SELECT direction, count(*) FROM path_changes WHERE agent_id = %(a)s AND target_id = %(t)s"
            " AND detected_at >= %(since)s GROUP BY direction", params))
        for direction in DIRECTIONS:
            total = int(totals.get(direction, 0))
            rows = await conn.fetch(
                "SELECT id, detected_at, kind, direction, old_hash, new_hash, label, details"
                " FROM path_changes WHERE agent_id = %(a)s AND target_id = %(t)s AND detected_at >= %(since)s"
                f" AND direction = %(d)s ORDER BY detected_at DESC, id DESC LIMIT {int(limit)}",
                {**params, "d": direction}) if total else []
            out[direction] = PathHistory([_change(r) for r in rows], total)
    return out


__all__ = ["PathChange", "PathHistory", "path_history"]
