"""The target page's alert history: a plain HTML table of alert_events rows, every value escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from netprobe.alerts.formats import number, unit
from netprobe.store.alert_events import AlertEvent
from netprobe.times import iso

_HEAD = ("When (UTC)", "Alert", "State", "Value", "Threshold", "Datacenter / line", "Seen by")


def _state(e: AlertEvent) -> str:
    if e.state == "local":
        return "local (last mile)"
    if e.state == "resolved" and e.local:
        return "resolved (local)"
    return "firing (route)" if e.state == "firing" and e.quorum is not None else e.state


def _seen_by(e: AlertEvent) -> str:
    if e.quorum is None:
        return e.agent_id
    scope = f"{e.scope} {e.scope_value}" if e.scope_value else f"no {e.scope}"
    agents = ", ".join(e.agents) or e.agent_id
    return f"{agents} ({len(e.agents) or 1} of {scope}; quorum {e.quorum})"


def alert_history_html(events: Sequence[AlertEvent]) -> str:
    """A <table> of `events` in the order given (history() gives newest first)."""
    if not events:
        return '<p class="alerts-none">No alerts in this span.</p>'
    rows = []
    for e in events:
        where = " / ".join(p for p in (e.datacenter, e.line) if p) or "–"
        cells = (iso(e.at), e.rule, _state(e), f"{e.metric} {number(e.value)}{unit(e.metric)}",
                 number(e.threshold), where, _seen_by(e))
        rows.append(f'<tr class="alert-{escape(e.state)}">'
                    + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    return (f'<table class="alert-history"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')
