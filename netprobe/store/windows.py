"""What the alert windows ask of the raw rounds and route events, beyond Store.results: who has
rounds of a probe in a window, and how many route events of a kind each agent × target had."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select

from netprobe.store.schema import path_changes, probe_results
from netprobe.store.store import Store

Key = tuple[str, str]          # agent_id, target_id


async def pairs_with_usable_rounds(store: Store, probe: str, start: datetime, end: datetime,
                                   agent_id: str | None) -> set[Key]:
    """Agent × target pairs with a round of `probe` not in error, started in [start, end)
    (`agent_id` None: every agent)."""
    c = probe_results.c
    q = (select(c.agent_id, c.target_id).where(c.probe == probe, c.status != "error",
                                                c.started_at >= start, c.started_at < end)
         .group_by(c.agent_id, c.target_id))
    if agent_id is not None:
        q = q.where(c.agent_id == agent_id)
    async with store._read("reading alert windows from") as conn:
        return {(a, t) for a, t in await conn.execute(q)}


async def event_counts(store: Store, kind: str, directions: Sequence[str], start: datetime, end: datetime,
                       agent_id: str | None) -> dict[Key, int]:
    """Route events of `kind` about a path of one of `directions` (forward, return) detected in
    [start, end), per agent × target that had any."""
    p = path_changes.c
    q = (select(p.agent_id, p.target_id, func.count())
         .where(p.kind == kind, p.direction.in_(directions), p.detected_at >= start, p.detected_at < end)
         .group_by(p.agent_id, p.target_id))
    if agent_id is not None:
        q = q.where(p.agent_id == agent_id)
    async with store._read("reading alert windows from") as conn:
        return {(a, t): int(n) for a, t, n in await conn.execute(q)}
