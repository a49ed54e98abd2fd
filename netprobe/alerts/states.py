"""The alert state machine (pure) and its rows in `alert_states` (one per rule × agent × target).

    ok ──bad──▶ pending ──(for_windows bad in a row)──▶ firing ──clear──▶ ok
     ▲            │ not bad                              │ bad or between: stays firing
     └────────────┘

A window without data changes nothing. Only ok/pending → firing ("firing") and firing → ok
("resolved") are transitions worth a notification. Quorum rules (netprobe.alerts.quorum) run the
same machine per group as well, on the group's value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from netprobe.alerts.quorum import Group
from netprobe.config.alerts import AlertRule
from netprobe.store.alert_states import AlertStateRow

State = Literal["ok", "pending", "firing"]
Transition = Literal["firing", "resolved"]
Key = tuple[str, str]            # agent_id, target_id


@dataclass(frozen=True, slots=True)
class AlertState:
    """One rule × agent × target, as of the end of `window_end` (the last window evaluated)."""

    rule: str
    agent_id: str
    target_id: str
    state: State = "ok"
    bad_windows: int = 0                 # bad windows in a row (while pending or firing)
    value: float | None = None           # the last window's value that had data
    probe: str | None = None             # which probe's rounds gave it
    started_at: datetime | None = None   # start of the first bad window of the streak
    fired_at: datetime | None = None     # end of the window that raised it
    window_end: datetime | None = None   # end of the last window evaluated
    local: bool = False                  # quorum rules, a pair: its firing is local (last mile)
    members: tuple[Key, ...] = ()        # quorum group: the pairs that agreed while it fires
    group: Group | None = None           # quorum group: which one (None: an agent × target)

    @property
    def key(self) -> Key:
        return (self.agent_id, self.target_id)


def step(rule: AlertRule, current: AlertState, value: float | None, probe: str | None,
         window_start: datetime, window_end: datetime) -> tuple[AlertState, Transition | None]:
    """The state after one window whose value is `value` (None: no data, nothing changes)."""
    if value is None:
        return replace(current, window_end=window_end), None
    seen = replace(current, value=value, probe=probe, window_end=window_end)
    bad = rule.is_bad(value)
    if current.state == "firing":
        if rule.is_clear(value):
            return replace(seen, state="ok", bad_windows=0, started_at=None, fired_at=None, local=False,
                           members=()), "resolved"
        # between the thresholds, or still bad: hysteresis keeps it firing
        return replace(seen, bad_windows=current.bad_windows + bad), None
    if not bad:
        return replace(seen, state="ok", bad_windows=0, started_at=None, fired_at=None), None
    streak = current.bad_windows + 1
    started = current.started_at if current.state == "pending" and current.started_at else window_start
    if streak >= rule.for_windows:
        return replace(seen, state="firing", bad_windows=streak, started_at=started, fired_at=window_end), \
            "firing"
    return replace(seen, state="pending", bad_windows=streak, started_at=started, fired_at=None), None


# -- persistence ----------------------------------------------------------------------------------

def from_row(row: AlertStateRow) -> AlertState:
    state: State = row.state if row.state in ("ok", "pending", "firing") else "ok"   # type: ignore[assignment]
    return AlertState(rule=row.rule, agent_id=row.agent_id, target_id=row.target_id, state=state,
                      bad_windows=row.bad_windows, value=row.value, probe=row.probe,
                      started_at=row.started_at, fired_at=row.fired_at, window_end=row.window_end,
                      local=row.local, members=row.members,
                      group=Group(*row.group) if row.group is not None else None)


def to_row(s: AlertState, rule: AlertRule) -> AlertStateRow:
    return AlertStateRow(rule=s.rule, agent_id=s.agent_id, target_id=s.target_id, state=s.state,
                         bad_windows=s.bad_windows, value=s.value, started_at=s.started_at, probe=s.probe,
                         fired_at=s.fired_at, window_end=s.window_end, window_s=int(rule.window),
                         metric=rule.metric, local=s.local, members=s.members,
                         group=(s.group.scope, s.group.scope_value, s.group.datacenter, s.group.line)
                         if s.group is not None else None)


def by_key(rows: Iterable[AlertStateRow]) -> dict[Key, AlertState]:
    return {r.key: from_row(r) for r in rows}


def cursor(states: Iterable[AlertState]) -> datetime | None:
    """End of the last window evaluated for a rule: the latest any of its rows records."""
    ends = [s.window_end for s in states if s.window_end is not None]
    return max(ends) if ends else None
