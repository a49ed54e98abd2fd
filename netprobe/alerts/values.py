"""One window's value per agent × target for a metric, from the raw rounds stored in [start, end).

Windows are shorter than the hourly rollups, so the rounds are read raw and rolled up here with the
store's own Rollup (DDSketch quantiles, the same loss, jitter and stall figures as reports).

Which rounds a metric reads: the first probe in its list that has rounds for that target in the
window (so a target probed by icmp and mtr is judged on icmp, one probed only by mtr on mtr's path
loss and destination RTT). The lists come from the probes' specs (alert_metrics, by rank); today:

    loss_pct        icmp, mtr, owd     100·(sent−received)/sent over the window's rounds
    rtt_p95_ms      icmp, mtr, tcp, owd  P95 of every RTT sample (tcp: connect time), merged DDSketch
    jitter_ms       icmp, mtr, tcp, owd  mean of the rounds' jitter
    fwd_loss_pct    owd                requests the reflector never saw, over every request sent
    ret_loss_pct    owd                replies that never came back, over every request sent
    stalls_per_min  sse                stalls over streamed minutes
    path_change     mtr, rmtr          route events detected in the window, either direction (0 when
                                       mtr or rmtr ran and saw none)
    line_mismatch   mtr                  "  (forward: the path out is not the line sold)
    return_line_mismatch  rmtr           "  (the way back is not the line sold)
    asymmetric      rmtr               1 when the latest forward and return labels differ as of the
                                       window's end, 0 when they agree (pairs rmtr traced in it)
    attainment_pct  icmp, mtr, tcp     share of requests whose first token meets the rule's
                                       slo_ttft_ms (docs/numbers.md: 3 round trips from the window's RTT
                                       samples and loss, no server time)

A metric counted from route events counts the events of its providers' directions (forward for mtr,
return for rmtr), for every pair one of them ran for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from netprobe.probes import REGISTRY
from netprobe.store import Rollup, Store, fleet, windows

Key = tuple[str, str]          # agent_id, target_id


def _providers(events: bool, lines: bool = False) -> dict[str, tuple[str, ...]]:
    """metric → the probes providing it, lowest rank first (registry order among equals)."""
    ranked: dict[str, list[tuple[int, int, str]]] = {}
    for i, (name, spec) in enumerate(REGISTRY.items()):
        for m in spec.alert_metrics:
            if m.events == events and m.lines == lines:
                ranked.setdefault(m.name, []).append((m.rank, i, name))
    return {metric: tuple(name for _, _, name in sorted(found)) for metric, found in ranked.items()}


@dataclass(frozen=True, slots=True)
class Value:
    value: float | None        # None: the rounds there carry no such figure (e.g. RTT at 100 % loss)
    probe: str


class WindowReader:
    """Reads windows for one evaluation pass; each (probe, window) is read once however many rules
    use it. `agent_id` None: every agent (the collector)."""

    def __init__(self, store: Store, agent_id: str | None) -> None:
        self._store = store
        self._agent = agent_id
        self._rollups: dict[tuple[str, datetime, datetime], dict[Key, Rollup]] = {}
        self._events: dict[tuple[str, tuple[str, ...], datetime, datetime], dict[Key, int]] = {}
        self._ran: dict[tuple[str, datetime, datetime], set[Key]] = {}

    async def values(self, metric: str, start: datetime, end: datetime, slo_ttft_ms: float = 1000.0
                     ) -> dict[Key, Value]:
        events = _providers(events=True)   # metrics counted from route events
        lines = _providers(events=False, lines=True)
        out: dict[Key, Value] = {}
        if metric in lines:
            return await self._asymmetric(lines[metric][0], start, end)
        if metric in events:
            probes = events[metric]
            directions = tuple(dict.fromkeys(d for p in probes if (d := REGISTRY[p].route_direction)))
            counts = await self._event_counts(metric, directions, start, end)
            for probe in probes:        # a pair is told by the first of them (by rank) that ran for it
                for key in await self._probe_ran(probe, start, end):
                    out.setdefault(key, Value(float(counts.get(key, 0)), probe))
            for key, n in counts.items():
                out.setdefault(key, Value(float(n), probes[0]))
            return out
        slo = metric in _slo_metrics()
        for probe in _providers(events=False)[metric]:
            for key, rollup in (await self._rollup(probe, start, end)).items():
                if key not in out and rollup.rounds:
                    got = _attainment(rollup, slo_ttft_ms) if slo else _figure(rollup, metric)
                    out[key] = Value(got, probe)
        return out

    async def _asymmetric(self, probe: str, start: datetime, end: datetime) -> dict[Key, Value]:
        """For each pair `probe` traced usably in the window: 1 when the latest labels of the two
        directions as of the window's end differ, 0 when they agree, no value when one is unknown."""
        pairs = await self._probe_ran(probe, start, end)
        fwd = await fleet.detected_lines(self._store, pairs, end, "forward")
        ret = await fleet.detected_lines(self._store, pairs, end, "return")
        out: dict[Key, Value] = {}
        for key in pairs:
            f, r = fwd.get(key), ret.get(key)
            out[key] = Value(None if f is None or r is None else float(f.label != r.label), probe)
        return out

    async def _rollup(self, probe: str, start: datetime, end: datetime) -> dict[Key, Rollup]:
        cache_key = (probe, start, end)
        if cache_key not in self._rollups:
            out: dict[Key, Rollup] = {}
            for row in await self._store.results(self._agent, None, probe, start, end):
                out.setdefault((row.agent_id, row.target_id), Rollup()).add(row.envelope)
            self._rollups[cache_key] = out
        return self._rollups[cache_key]

    async def _probe_ran(self, probe: str, start: datetime, end: datetime) -> set[Key]:
        """Agent × target pairs with a usable round of `probe` (mtr, rmtr) in the window (a round in error
        cannot detect a route change, so it is no evidence of a steady route either)."""
        if (probe, start, end) not in self._ran:
            self._ran[(probe, start, end)] = await windows.pairs_with_usable_rounds(
                self._store, probe, start, end, self._agent)
        return self._ran[(probe, start, end)]

    async def _event_counts(self, kind: str, directions: tuple[str, ...], start: datetime,
                            end: datetime) -> dict[Key, int]:
        cache_key = (kind, directions, start, end)
        if cache_key not in self._events:
            self._events[cache_key] = await windows.event_counts(self._store, kind, directions, start, end,
                                                                 self._agent)
        return self._events[cache_key]


def _slo_metrics() -> set[str]:
    return {m.name for spec in REGISTRY.values() for m in spec.alert_metrics if m.slo}


def _attainment(rollup: Rollup, ttft_ms: float) -> float | None:
    """The share of requests within `ttft_ms` from the window's RTT samples and loss (none: no RTT)."""
    from netprobe.budget.attainment import Dist, SloModel, attainment_pct
    from netprobe.store.sketch import positive_bins

    got = positive_bins(rollup.sketch) if rollup.sketch is not None else None
    if not got:
        return None
    loss = (rollup.sent - rollup.received) / rollup.sent if rollup.sent else 0.0
    return attainment_pct(Dist.of(*zip(*got, strict=True)), loss, None, SloModel(ttft_ms))


def _figure(rollup: Rollup, metric: str) -> float | None:
    figures: dict[str, Any] = rollup.figures()
    value = figures.get(metric)
    return float(value) if isinstance(value, int | float) else None
