"""Route events from traced routes (docs/probes.md): path changes and line mismatches, stored in
`path_changes`, each with the direction of the path it is about: forward (agent → target, mtr) or
return (target → agent, rmtr). Each route probe's rounds are a history of their own: a return path is
compared only with the return path before it. The kind of a mismatch is its probe's (line_mismatch
forward, return_line_mismatch on the way back).

Detected inside Store.write, in the results' transaction, from nothing but the stored envelopes, so an
agent (SQLite) and a collector ingesting the same envelopes (PostgreSQL) record the same events.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence, Set
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Select, TextualSelect, and_, bindparam, insert, or_, select, text

from netprobe.probes import REGISTRY
from netprobe.store.engine import AsyncConnection
from netprobe.store.envelopes import Envelope
from netprobe.store.routes import _HASH_MAX, Route, route_of, route_probes
from netprobe.store.schema import path_changes, probe_results

PATH_CHANGE = "path_change"
_PAGE = 32                               # stored rows read at a time while looking for the previous route
_FIRST_PAGE = 2                          # ... at first: usually the newest one before the batch is it
_LABEL_MAX = 32                          # path_changes.label


@dataclass(frozen=True, slots=True)
class PathEvent:
    agent_id: str
    target_id: str
    detected_at: datetime
    kind: str
    old_hash: str | None
    new_hash: str | None
    label: str | None
    details: dict[str, Any]
    direction: str          # forward | return: the way the path runs (the probe's route_direction)

    def to_row(self) -> dict[str, Any]:
        # the column is short; a long custom label is kept whole in details
        label = self.label[:_LABEL_MAX] if self.label is not None else None
        return {**asdict(self), "label": label}


def route_of_envelope(env: Envelope) -> Route | None:
    """The route of a usable round being stored, from its typed result (its probe's route_of); None
    for another probe, a result in error, a destination not reached, or no usable path hash."""
    spec = REGISTRY.get(env.probe)
    if spec is None or spec.route_of is None:
        return None
    line = env.target.get("line")
    seen = spec.route_of(env.result, line if isinstance(line, str) else None)
    if seen is None or not 0 < len(seen.hash) <= _HASH_MAX:
        return None
    return Route(probe=env.probe, result_id=env.id, started_at=env.started_at, label=seen.label,
                 hash=seen.hash, mismatch=seen.mismatch, asns=list(seen.asns), declared=seen.declared,
                 hops=seen.hops)


def compare(previous: Route | None, current: Route, agent_id: str, target_id: str) -> list[PathEvent]:
    """Events of `current` given the usable route of the same probe before it (None: the first one seen)."""
    spec = REGISTRY[current.probe]
    direction = spec.route_direction
    assert direction is not None          # a route's probe has one (ProbeSpec checks)
    events = []
    old_hash = previous.hash if previous is not None else None
    if previous is not None and previous.hash != current.hash:
        events.append(PathEvent(
            agent_id, target_id, current.started_at, PATH_CHANGE, old_hash, current.hash, current.label,
            {"before": previous.summary(), "after": current.summary(), "result_id": current.result_id},
            direction))
    # a mismatch that persists (same detected label) is one event, not one per round
    ongoing = previous is not None and previous.mismatch and previous.label == current.label
    if current.mismatch and not ongoing:
        events.append(PathEvent(
            agent_id, target_id, current.started_at, spec.mismatch_kind, old_hash, current.hash,
            current.label, {"declared": current.declared, "detected": current.label, "asns": current.asns,
                            "hash": current.hash, "result_id": current.result_id}, direction))
    return events


@functools.cache
def _page_query(dialect: str, limit: int, skipping: bool) -> Select[Any]:
    """One page of an agent × target × probe's usable stored routes before a cursor, newest first. Built once:
    SQLAlchemy spends longer building a statement than PostgreSQL does running this one."""
    c = probe_results.c
    # Ties on started_at are broken by id in code-point order, as Python compares the batch's ids;
    # PostgreSQL's default collation is locale-aware, so ask for bytewise ("C"), SQLite's default.
    rid = c.id.collate("C") if dialect == "postgresql" else c.id
    query = (select(c.id, c.started_at, c.envelope)
             .where(c.agent_id == bindparam("agent_id"), c.target_id == bindparam("target_id"),
                    c.probe == bindparam("probe"), c.status != "error",
                    or_(c.started_at < bindparam("at"), and_(c.started_at == bindparam("at"),
                                                             rid < bindparam("rid"))))
             .order_by(c.started_at.desc(), rid.desc()).limit(limit))
    if skipping:   # not even read: the batch's own rows are there already, and an mtr envelope is big
        query = query.where(c.id.not_in(bindparam("skip", expanding=True)))
    return query


# An mtr envelope as route_of reads it: each hub of result.report.hubs cut down to its addresses (the
# rest of a hub, its statistics, is most of the envelope), everything else as stored. PostgreSQL
# writes and the driver parses a third of the text.
_PG_ROUTE_PART = (
    "CASE WHEN jsonb_typeof(c.envelope #> '{result,report,hubs}') = 'array' "
    "THEN jsonb_set(c.envelope, '{result,report,hubs}', (SELECT coalesce(jsonb_agg("
    "CASE WHEN jsonb_typeof(h.hub) = 'object' THEN jsonb_build_object('addresses', h.hub -> 'addresses') "
    "ELSE h.hub END ORDER BY h.i), CAST('[]' AS jsonb)) "
    "FROM jsonb_array_elements(c.envelope #> '{result,report,hubs}') WITH ORDINALITY AS h(hub, i))) "
    "ELSE c.envelope END")


@functools.cache
def _pg_first_pages() -> TextualSelect:
    """PostgreSQL: _page_query's first page (_FIRST_PAGE rows, skipping) of several agent × target ×
    probe keys at once, each with its own cursor, in one statement rather than one per key. `skip`
    holds every key's ids: result ids are unique, so another key's never match. The envelopes come as
    route_of reads them (_PG_ROUTE_PART)."""
    c = probe_results.c
    return text(
        "SELECT k.n, p.id, p.started_at, p.envelope "
        "FROM unnest(CAST(:agents AS text[]), CAST(:targets AS text[]), CAST(:probes AS text[]), "
        "CAST(:ats AS timestamptz[]), CAST(:rids AS text[])) "
        "WITH ORDINALITY AS k(agent_id, target_id, probe, at, rid, n) "
        f"CROSS JOIN LATERAL (SELECT c.id, c.started_at, {_PG_ROUTE_PART} AS envelope "
        "FROM probe_results AS c "
        "WHERE c.agent_id = k.agent_id AND c.target_id = k.target_id AND c.probe = k.probe "
        "AND c.status <> 'error' AND (c.started_at < k.at "
        'OR (c.started_at = k.at AND c.id COLLATE "C" < k.rid COLLATE "C")) '
        "AND c.id <> ALL(CAST(:skip AS text[])) "
        f'ORDER BY c.started_at DESC, c.id COLLATE "C" DESC LIMIT {_FIRST_PAGE}) AS p '
        'ORDER BY k.n, p.started_at DESC, p.id COLLATE "C" DESC'
    ).columns(n=Integer(), id=c.id.type, started_at=c.started_at.type, envelope=c.envelope.type)


Key = tuple[str, str, str]      # agent_id, target_id, probe: one route history


async def _first_pages(conn: AsyncConnection, cursors: Sequence[tuple[Key, tuple[datetime, str]]],
                       skip: Set[str]) -> list[list[tuple[str, datetime, Any]]]:
    """Each (agent_id, target_id, probe) key's first page before its cursor, as stored_routes would
    read it."""
    rows = await conn.execute(_pg_first_pages(), {
        "agents": [k[0] for k, _ in cursors], "targets": [k[1] for k, _ in cursors],
        "probes": [k[2] for k, _ in cursors],
        "ats": [at for _, (at, _) in cursors], "rids": [rid for _, (_, rid) in cursors],
        "skip": sorted(skip)})
    pages: list[list[tuple[str, datetime, Any]]] = [[] for _ in cursors]
    for n, result_id, started_at, envelope in rows:
        pages[n - 1].append((result_id, started_at, envelope))
    return pages


async def stored_routes(conn: AsyncConnection, key: Key, first: tuple[datetime, str],
                        last: tuple[datetime, str], skip: Set[str],
                        first_page: Sequence[tuple[str, datetime, Any]] | None = None
                        ) -> tuple[Route | None, list[Route]]:
    """Of one agent × target × probe, the last usable stored route ordered before `first`, and the
    usable stored routes between `first` and `last` (results that arrived out of order), ignoring the
    ids in `skip`. `first_page`: the first page of rows, when already read (_first_pages)."""
    agent_id, target_id, probe = key
    params: dict[str, Any] = {"agent_id": agent_id, "target_id": target_id, "probe": probe}
    if skip:
        params["skip"] = sorted(skip)
    between: list[Route] = []
    cursor = last
    limit = _FIRST_PAGE
    while True:
        if first_page is not None:
            page: Sequence[tuple[str, datetime, Any]] = first_page
            first_page = None
        else:
            query = _page_query(conn.dialect.name, limit, bool(skip))
            page = [tuple(row) for row in
                    (await conn.execute(query, {**params, "at": cursor[0], "rid": cursor[1]}))]
        for result_id, started_at, envelope in page:
            route = None if result_id in skip else route_of(result_id, started_at, envelope)
            if route is None:
                continue
            if route.order < first:
                return route, between[::-1]
            between.append(route)
        if len(page) < limit:
            return None, between[::-1]
        cursor = (page[-1][1], page[-1][0])
        limit = _PAGE


async def record_new(conn: AsyncConnection, new: Sequence[Envelope]) -> int:
    """Detect and store the events caused by `new`, results just inserted in this transaction (in time
    order); returns how many."""
    by_key: dict[Key, list[Route]] = {}
    new_mtr: dict[Key, set[str]] = {}    # stored_routes ignores these, usable or not
    routed = route_probes()
    for env in new:
        key = (str(env.agent["id"]), str(env.target["id"]), env.probe)
        if env.probe in routed:
            new_mtr.setdefault(key, set()).add(env.id)
        route = route_of_envelope(env)
        if route is not None:       # an unusable result never emits, so it needs no history either
            by_key.setdefault(key, []).append(route)
    new_ids = {env.id for env in new}
    events: list[PathEvent] = []
    pairs = sorted(by_key.items())
    for _, routes in pairs:
        routes.sort(key=lambda r: r.order)
    firsts: list[list[tuple[str, datetime, Any]]] | None = None
    if conn.dialect.name == "postgresql" and len(pairs) > 1:
        firsts = await _first_pages(conn, [(key, routes[-1].order) for key, routes in pairs],
                                    set().union(*new_mtr.values()))
    for i, (key, routes) in enumerate(pairs):
        previous, stored = await stored_routes(conn, key, routes[0].order, routes[-1].order, new_mtr[key],
                                               firsts[i] if firsts is not None else None)
        # the routes in time order, after `previous`: only the new ones emit events, the others
        # (already stored) serve as what came before
        for route in sorted([*stored, *routes], key=lambda r: r.order):
            if route.result_id in new_ids:
                events += compare(previous, route, key[0], key[1])
            previous = route
    # stable: one agent × target × probe's events keep the walk's order (by result, then kind)
    events.sort(key=lambda e: (e.detected_at, e.agent_id, e.target_id))
    if events:
        await conn.execute(insert(path_changes), [e.to_row() for e in events])
    return len(events)
