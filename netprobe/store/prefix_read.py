"""The question a report asks of the prefix rollups (netprobe.store.prefix): "these local days of this
agent", per series from a few prefix rows and the hourly rows after them. Plain SQL
(netprobe.store.reads), so a report runs it without SQLAlchemy; the writers' side (fold, invalidate)
is netprobe.store.prefix_sql."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from netprobe.store.prefix import COUNTERS, LEVELS, covers, day_folded, level_for, midnight
from netprobe.store.reads import Conn, utc

if TYPE_CHECKING:
    from netprobe.store.hour_arrays import HourArrays

_HOUR = timedelta(hours=1)
REFOLD = "prefix_refold_from"     # store_meta: a late write emptied some series before this instant
Days = dict[str, "HourArrays"]     # per probe: the agent's series of it

# What the arrays take of an hourly row (netprobe.store.hour_arrays.Builder.add_hour, prefix.extremes_of)
_HOUR_COLS = ("target_id", "probe", "hour", *COUNTERS, "rtt_min", "rtt_max", "sketch", "extras")


# The prefix rows a report reads, by primary key, each with only what it is read for: the sums (the
# payload) or not, and one level of the sparse table (a level column per k). One statement per agent
# instead of one per set of columns over the agent's index range. VALUES columns are column1… on
# PostgreSQL and SQLite alike; column6 is the row's place in the list.
_LEVEL = " ".join(f"WHEN {k} THEN r.l{k}" for k in range(LEVELS))
_ROWS = ("SELECT v.column6, r.zone, CASE WHEN v.column4 = 1 THEN r.payload END,"
         f" CASE v.column5 {_LEVEL} END"
         " FROM %(rows)s v JOIN rollups_prefix r ON r.agent_id = %(a)s AND r.target_id = v.column1"
         " AND r.probe = v.column2 AND r.folded_until = v.column3")
_KEYS_PER_READ = 2000          # one statement per agent of a few hundred series (each is a round trip)
# A LIMIT keeps PostgreSQL from pulling the subquery up into the outer one, which evaluated each of
# its index descents twice (once per use of the column: 4 per series instead of 2).
_FENCE = 2**31 - 1


def _marks(n_probes: int, targets: bool) -> str:
    """Per series of one agent with a row by `now`: that newest row, its newest by `start`, and only
    where there is none by `start`, its first. Index descents per series (the agent's targets found by
    skipping along the primary key), so the cost follows the series, not the days they have stored.
    (A series without a row by `now` is read from its hours; the first row matters only to a series
    that starts within the days.)"""
    kinds = " UNION ALL ".join(f"SELECT %(p{i})s AS probe" for i in range(n_probes))
    one = ("(SELECT {f}(r.folded_until) FROM rollups_prefix r WHERE r.agent_id = %(a)s"
           " AND r.target_id = {t}.target_id AND r.probe = {t}.probe{cond})")
    return f"""
        WITH RECURSIVE t(id) AS (
            SELECT (SELECT min(target_id) FROM rollups_prefix WHERE agent_id = %(a)s)
            UNION ALL
            SELECT (SELECT min(target_id) FROM rollups_prefix WHERE agent_id = %(a)s AND target_id > t.id)
            FROM t WHERE t.id IS NOT NULL)
        SELECT m.target_id, m.probe, m.last, m.before,
               CASE WHEN m.before IS NULL THEN {one.format(f="min", t="m", cond="")} END AS first
        FROM (
            SELECT s.target_id, s.probe,
                   {one.format(f="max", t="s", cond=" AND r.folded_until <= %(now)s")} AS last,
                   {one.format(f="max", t="s", cond=" AND r.folded_until <= %(start)s")} AS before
            FROM (SELECT t.id AS target_id, k.probe AS probe FROM t, ({kinds}) k
                  WHERE t.id IS NOT NULL{" AND t.id IN %(targets)s" if targets else ""}) s
            LIMIT {_FENCE}) m
        WHERE m.last IS NOT NULL"""


async def local_days(conn: Conn, agent_id: str, zone: ZoneInfo, first: date, now: datetime,
                     probes: Sequence[str], targets: Sequence[str] | None = None,
                     hours_of_day: Mapping[str, Sequence[int]] | None = None) -> Days:
    """Per (target, probe) of this agent: sums and extremes per local hour of day over the hours whose
    local date is ≥ `first` and that started before `now` (so: the last N local days, today included).
    `hours_of_day`: per probe, the only hours of day wanted (None: all 24)."""
    from netprobe.store import hour_arrays as arrays  # NumPy: readers only, never an agent's writes

    if targets is not None and not targets:
        return {}
    start = midnight(first, zone)
    # No zone here: the marks come from the primary key alone; the rows read below are checked for it.
    lasts: dict[tuple[str, str], datetime] = {}
    befores: dict[tuple[str, str], datetime] = {}
    firsts: dict[tuple[str, str], datetime] = {}
    params: dict[str, Any] = {"a": agent_id, "now": now, "start": start,
                              **{f"p{i}": p for i, p in enumerate(probes)}}
    if targets is not None:
        params["targets"] = list(targets)
    for target_id, probe, last, before, first_fu in await conn.fetch(_marks(len(probes), targets is not None),
                                                                     params):
        key = (target_id, probe)
        lasts[key] = utc(last)
        if before is not None:
            befores[key] = utc(before)
        else:
            firsts[key] = utc(first_fu)

    # Which rows to read, per series: L (sums + extremes at its day), B (sums before the first day),
    # R (extremes of the 2^k days starting at the first day). The series of an agent share a few
    # instants (its folds' ends): each is taken to local time once.
    @cache
    def day_of(fu: datetime) -> date:
        return day_folded(fu, zone)

    @cache
    def midnight_of(day: date) -> datetime:
        return midnight(day, zone)

    plan: dict[tuple[str, str], dict[str, Any]] = {}
    for key, fu_last in lasts.items():
        if fu_last <= start:
            continue                  # folded only up to before these days: all from hourly rows
        d_last = day_of(fu_last)
        d_first = first
        fu_before = befores.get(key)
        if fu_before is None:         # no data before the first day: start at the series' first day
            d_first = max(first, day_of(firsts[key]))
        n = (d_last - d_first).days + 1
        if n < 1 or not covers(n):
            continue
        k = level_for(n)
        fu_r = midnight_of(d_first + timedelta(days=(1 << k)))
        plan[key] = {"L": fu_last, "B": fu_before, "R": fu_r if fu_r < fu_last else fu_last, "k": k}
    # Per row wanted: its sums or not, and its level (each series reads one level).
    wanted: dict[tuple[str, str, datetime], list[int]] = {}
    for key, p in plan.items():
        for fu, sums, level in ((p["L"], 1, True), (p["B"], 1, False), (p["R"], 0, True)):
            if fu is not None:
                flags = wanted.setdefault((*key, fu), [0, -1])
                flags[0] |= sums
                if level:
                    flags[1] = p["k"]
    fetched: dict[tuple[str, str, datetime], tuple[bytes | None, bytes | None]] = {}
    zone_key = str(zone.key)
    keys = list(wanted)
    for i in range(0, len(keys), _KEYS_PER_READ):
        part = keys[i:i + _KEYS_PER_READ]
        rows = [(*k, *wanted[k], i + j) for j, k in enumerate(part)]
        for at, row_zone, sums, level in await conn.fetch(_ROWS, {"a": agent_id, "rows": rows}):
            if row_zone == zone_key:      # rows of another zone: the fold has yet to redo them
                fetched[keys[at]] = (sums, level)

    builders = {p: arrays.Builder() for p in probes}
    tails: dict[tuple[str, str], datetime] = {}
    missing = False
    for key, p in plan.items():
        lrow, rrow = fetched.get((*key, p["L"])), fetched.get((*key, p["R"]))
        brow = fetched.get((*key, p["B"])) if p["B"] is not None else None
        if lrow is None or rrow is None or (p["B"] is not None and brow is None):
            missing = True            # a fold or a late write in between: read the hours instead
            continue
        b = builders[key[1]]
        assert lrow[0] is not None
        b.add_payload(key[0], lrow[0], 1.0)
        if brow is not None:
            assert brow[0] is not None
            b.add_payload(key[0], brow[0], -1.0)
        b.add_stored_extremes(key[0], lrow[1])
        b.add_stored_extremes(key[0], rrow[1])
        tails[key] = p["L"]
    # Hours after each series' newest row (its tail), and every hour of series without usable rows:
    # of the whole days if nothing of this agent is folded, else only since the fold (new series) or
    # since a late write emptied some (the refold marker). No list of series goes into the SQL: the
    # tails start at one instant in the usual case, and series without rows are rare.
    since = start
    marker: str | None = None
    if lasts and not missing:
        since = max(start, min(lasts.values()) - timedelta(days=1))
        got = await conn.fetch("SELECT value FROM store_meta WHERE key = %(k)s", {"k": REFOLD})
        marker = got[0][0] if got else None
        if marker is not None:
            since = max(start, min(since, datetime.fromisoformat(marker) - timedelta(days=1)))
    where = "agent_id = %(a)s AND probe IN %(probes)s AND hour < %(now)s"
    hp: dict[str, Any] = {"a": agent_id, "probes": list(probes), "now": now}
    if targets is not None:
        where += " AND target_id IN %(targets)s"
        hp["targets"] = list(targets)
    hq = f"SELECT {', '.join(_HOUR_COLS)} FROM rollups_hourly WHERE {where}"
    t0 = min(tails.values(), default=since)       # the rows filter below keeps each series' own hours
    only_of = hours_of_day or {}
    queries = [(hq + " AND hour >= %(t0)s", {**hp, "t0": t0})]
    # Series without usable rows, with hours before the tails start: only where rows went missing
    # (read from the first day) or a late write or a skipped series left the refold marker. Otherwise
    # every series with hours before the last fold has rows up to it (the fold takes every series
    # with hours after its newest row), so a series without rows has hours only in the tail query's.
    if since < t0 and (missing or marker is not None):
        gap = " AND hour >= %(since)s AND hour < %(t0)s"
        seen = await conn.fetch(f"SELECT DISTINCT target_id, probe FROM rollups_hourly WHERE {where}{gap}",
                                {**hp, "since": since, "t0": t0})
        new = sorted({(r[0], r[1]) for r in seen} - set(tails))
        if new:
            queries.append((hq + gap + " AND target_id IN %(new)s",
                            {**hp, "since": since, "t0": t0, "new": sorted({t for t, _ in new})}))
    @cache
    def local(hour: datetime) -> datetime:        # an agent's rows share a few dozen hours
        return hour.astimezone(zone)
    for sql, args in queries:
        for r in await conn.fetch(sql, args):
            m = dict(zip(_HOUR_COLS, r, strict=True))
            hour = m["hour"] = utc(m["hour"])
            key = (m["target_id"], m["probe"])
            tail = tails.get(key)
            at = local(hour)
            if (hour < tail if tail is not None else hour < since) or at.date() < first:
                continue
            h = at.hour
            only = only_of.get(key[1])
            if only is not None and h not in only:
                continue
            builders[key[1]].add_hour(key[0], h, m)
    out: Days = {}
    for probe, b in builders.items():
        built = b.build(only_of.get(probe))
        if built.targets:
            out[probe] = built
    return out


__all__ = ["REFOLD", "Days", "local_days"]
