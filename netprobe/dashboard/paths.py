"""The target page's path history: per direction, each route event with its time on the agent's clock,
the line before → after, and a compact hop diff (hops removed and added, the unchanged ones counted)."""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from html import escape
from typing import NamedTuple
from zoneinfo import ZoneInfo

from netprobe.probes import REGISTRY
from netprobe.probes.base import DIRECTIONS, Direction
from netprobe.report.svg import line_colour
from netprobe.store.path_history import PathChange, PathHistory

_SILENT = "???"                 # a hop that did not answer (mtr's ???)
_WAYS: dict[Direction, str] = {"forward": "Forward path (agent → target",
                               "return": "Return path (target → agent"}


def _titles() -> dict[Direction, str]:
    """Per direction, its heading naming the probes that trace it (their specs' route_direction)."""
    out = {}
    for direction in DIRECTIONS:
        # route_direction is set exactly when route_of is (the spec checks): no runtime to load
        tracers = [n for n, spec in REGISTRY.items() if spec.route_direction == direction]
        out[direction] = f"{_WAYS[direction]}{', ' if tracers else ''}{', '.join(tracers)})"
    return out


def _hop(addresses: list[str]) -> str:
    return " ".join(addresses) if addresses else _SILENT


class Step(NamedTuple):
    """`same`: n hops unchanged; `~`: the hop at TTL n (new path) was `before`, is `after`; `-`: the
    hop at TTL n of the old path is gone; `+`: the hop at TTL n of the new path is new."""

    kind: str
    n: int
    before: str = ""
    after: str = ""


@dataclass(frozen=True, slots=True)
class HopDiff:
    steps: list[Step]
    added: int          # hops of the new path not in the old (a changed hop is one added, one removed)
    removed: int


def hop_diff(before: list[list[str]], after: list[list[str]]) -> HopDiff:
    a, b = [_hop(h) for h in before], [_hop(h) for h in after]
    steps: list[Step] = []
    added = removed = 0
    for op, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            steps.append(Step("same", i2 - i1))
            continue
        paired = min(i2 - i1, j2 - j1)      # a replaced run: hop for hop, then what is left over
        steps += [Step("~", j1 + k + 1, a[i1 + k], b[j1 + k]) for k in range(paired)]
        steps += [Step("-", i + 1, before=a[i]) for i in range(i1 + paired, i2)]
        steps += [Step("+", j + 1, after=b[j]) for j in range(j1 + paired, j2)]
        removed += i2 - i1
        added += j2 - j1
    return HopDiff(steps, added, removed)


def _line(label: str | None) -> str:
    if not label:
        return '<span class="line">—</span>'
    return (f'<span class="line" style="border-left:0.7em solid {line_colour(label)};padding-left:0.3em">'
            f"{escape(label)}</span>")


def _diff_html(d: HopDiff) -> str:
    parts = []
    for kind, n, old, new in d.steps:
        if kind == "same":
            parts.append(f'<span class="same">{n} hop{"s" * (n != 1)} same</span>')
        elif kind == "~":
            parts.append(f'<span class="changed">{n}: <del>{escape(old)}</del> → '
                         f'<ins>{escape(new)}</ins></span>')
        elif kind == "-":
            parts.append(f'<del title="hop {n} before">−{n} {escape(old)}</del>')
        else:
            parts.append(f'<ins title="hop {n} after">+{n} {escape(new)}</ins>')
    return (f'<span class="hop-count">+{d.added} / −{d.removed} hops:</span> '
            f'<span class="hop-diff">{" · ".join(parts)}</span>')


def _event(e: PathChange, zone: ZoneInfo) -> str:
    at = e.detected_at.astimezone(zone)
    when = (f'<time datetime="{e.detected_at.isoformat()}">{at:%Y-%m-%d %H:%M} '
            f'{escape(at.tzname() or "")}</time>')
    if e.kind == "path_change":
        lines = f"{_line(e.before_label)} → {_line(e.label)}"
        diff = (_diff_html(hop_diff(e.before_hops, e.after_hops))
                if e.before_hops is not None and e.after_hops is not None else "hops not recorded")
        return f'<li class="path-change">{when} · {lines} · {diff}</li>'
    return (f'<li class="line-mismatch">{when} · detected {_line(e.label)}, sold as '
            f'{_line(e.declared)}</li>')


def history_html(histories: dict[str, PathHistory], zone: ZoneInfo, days: int) -> str:
    out = []
    for direction, title in _titles().items():
        h = histories.get(direction, PathHistory([], 0))
        out.append(f'<h4>{escape(title)}</h4>')
        if not h.events:
            out.append(f'<p class="none">no path changes in the last {days} day{"s" * (days != 1)}</p>')
            continue
        more = (f'<p class="more">the newest {len(h.events)} of {h.total} events</p>'
                if h.total > len(h.events) else "")
        out.append(f'<ol class="path-history" data-direction="{direction}">'
                   + "".join(_event(e, zone) for e in h.events) + f"</ol>{more}")
    return "".join(out)


__all__ = ["HopDiff", "Step", "history_html", "hop_diff"]
