"""One rule's windows applied to its states (pure): the transitions of each window, with (quorum rules)
who agreed, the alerts open after them, and the alert_events rows each transition is recorded as.
Quorum groups and local alerts: netprobe.alerts.quorum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from netprobe.alerts import quorum, states
from netprobe.alerts.formats import Agreement
from netprobe.alerts.quorum import Group, Judged, Key
from netprobe.alerts.states import AlertState, Transition
from netprobe.alerts.values import Value
from netprobe.config.alerts import AlertRule
from netprobe.store.alert_events import AlertEvent
from netprobe.store.fleet import AgentInfo, TargetInfo


@dataclass(frozen=True, slots=True)
class Change:
    """One transition in one window: of an agent × target, or (quorum rules) of a group."""

    old: AlertState
    new: AlertState
    transition: Transition
    start: datetime
    end: datetime
    agreement: Agreement | None = None


def _step(rule: AlertRule, old: AlertState, seen: Value | Judged | None, start: datetime, end: datetime
          ) -> tuple[AlertState, Transition | None]:
    """states.step on a pair's (or a group's) value in the window; None: no data."""
    return states.step(rule, old, seen.value if seen else None, seen.probe if seen else None, start, end)


def plain_window(rule: AlertRule, current: dict[Key, AlertState], changed: dict[Key, AlertState],
                  found: Mapping[Key, Value], start: datetime, end: datetime) -> list[Change]:
    out = []
    for key in sorted(set(current) | {k for k in found if rule.matches(k[1])}):
        if quorum.is_group(key):
            continue      # left by the rule when it had a quorum
        old = current.get(key) or AlertState(rule.name, *key)
        new, transition = _step(rule, old, found.get(key) if rule.matches(key[1]) else None, start, end)
        current[key] = changed[key] = new
        if transition is not None:
            out.append(Change(old, new, transition, start, end))
    return out


def quorum_window(rule: AlertRule, current: dict[Key, AlertState], changed: dict[Key, AlertState],
                   found: Mapping[Key, Value], agents: Mapping[str, AgentInfo],
                   targets: Mapping[str, TargetInfo], start: datetime, end: datetime) -> list[Change]:
    """One window of a quorum rule: each group's state on its N-th worst agent, then each pair's,
    a pair's alert being local unless a firing group counts its agent among those that agreed."""
    assert rule.quorum is not None
    judged = quorum.judge(rule, found, agents, targets)
    groups = {g.key: g for g in judged}
    groups.update({k: s.group for k, s in current.items() if s.group is not None and k not in groups})
    out = []
    for key in sorted(groups):
        group, seen = groups[key], judged.get(groups[key])
        old = current.get(key) or AlertState(rule.name, *key, group=group)
        new, transition = _step(rule, old, seen, start, end)
        now_bad = seen.members if seen else old.members
        if new.state == "firing":
            members = now_bad if transition == "firing" else tuple(sorted({*old.members, *now_bad}))
        else:      # pending: this window's bad pairs (no data: the last ones); ok: none
            members = now_bad if new.state == "pending" else ()
        new = replace(new, members=members, group=group)
        current[key] = changed[key] = new
        if transition is not None:
            out.append(Change(old, new, transition, start, end,
                               _agreement(rule, group, new.members or old.members, seen)))
    # a pair is covered by a firing group that counts its agent; one a pending group counts waits
    # (a route problem may be building up), and turns local only if the group does not fire
    covered = {(a, s.group) for s in current.values() if s.group is not None and s.state != "ok"
               for a, _ in s.members}
    pairs = {k for k in current if not quorum.is_group(k)} | {k for k in found if rule.matches(k[1])}
    for key in sorted(pairs):
        old = current.get(key) or AlertState(rule.name, *key)
        new, transition = _step(rule, old, found.get(key) if rule.matches(key[1]) else None, start, end)
        group = quorum.group_of(rule, key, agents, targets)
        local = (key[0], group) not in covered
        if transition == "firing" or (new.state == "firing" and local and not old.local):
            # raised while no firing group counts this agent (or the route problem it was part of
            # ended and it goes on): local; raised with its group: part of the route problem
            new = replace(new, local=local)
            transition = "firing" if local else None
        elif transition == "resolved" and not old.local:
            transition = None        # it ended with (or after) the route problem it was part of
        current[key] = changed[key] = new
        if transition is not None:
            out.append(Change(old, new, transition, start, end,
                               _local_agreement(rule, group, key, new, judged.get(group))))
    return out


def _agreement(rule: AlertRule, group: Group, members: Sequence[Key], seen: Judged | None) -> Agreement:
    assert rule.quorum is not None
    agents = tuple(sorted({a for a, _ in members}))
    values = {a: v for a, v in (seen.values.items() if seen else ()) if a in agents}
    return Agreement(group=group, quorum=rule.quorum, local=False, agents=agents,
                     targets=tuple(sorted({t for _, t in members})), values=values,
                     reporting=seen.reporting if seen else 0)


def _local_agreement(rule: AlertRule, group: Group, key: Key, state: AlertState, seen: Judged | None
                     ) -> Agreement:
    """Local to the agents of the group bad in the window (fewer than the quorum), this one among them."""
    assert rule.quorum is not None
    agents = seen.agents if seen is not None and key[0] in seen.agents else (key[0],)
    values = {a: v for a, v in seen.values.items() if a in agents} if seen is not None else {}
    if state.value is not None:
        values[key[0]] = state.value
    return Agreement(group=group, quorum=rule.quorum, local=True, agents=agents, targets=(key[1],),
                     values=values, reporting=seen.reporting if seen else 0)


def open_alerts(rule: AlertRule, current: Mapping[Key, AlertState], agents: Mapping[str, AgentInfo],
          targets: Mapping[str, TargetInfo]) -> list[tuple[AlertState, Agreement | None]]:
    """The alerts firing after the rule's last window, with what a re-sent one says: every firing
    pair (plain rules); firing groups and local pairs (quorum rules)."""
    firing = [s for _, s in sorted(current.items()) if s.state == "firing"]
    if rule.quorum is None:
        return [(s, None) for s in firing if s.group is None]
    out: list[tuple[AlertState, Agreement | None]] = []
    for s in firing:
        if s.group is not None:
            out.append((s, _agreement(rule, s.group, s.members, None)))
        elif s.local:
            group = quorum.group_of(rule, s.key, agents, targets)
            out.append((s, _local_agreement(rule, group, s.key, s, None)))
    return out


def events(rule: AlertRule, c: Change, targets: Mapping[str, TargetInfo]) -> list[AlertEvent]:
    """alert_events rows of one transition: one per agent × target (a quorum alert: per member)."""
    a = c.agreement
    started = c.old.started_at if c.transition == "resolved" else c.new.started_at
    common: dict[str, Any] = {"rule": rule.name, "metric": rule.metric, "threshold": rule.threshold,
                              "at": c.end, "started_at": started}
    if a is not None:
        g = a.group
        common.update(local=a.local, scope=g.scope, scope_value=g.scope_value, quorum=a.quorum,
                      agents=a.agents)

    def where(target_id: str) -> dict[str, Any]:
        t = targets.get(target_id)
        return {"datacenter": t.datacenter if t else None, "line": t.line if t else None}

    if a is None or a.local:
        state = "local" if a is not None and c.transition == "firing" else c.transition
        details: dict[str, Any] = {"reporting": a.reporting} if a is not None else {}
        return [AlertEvent(agent_id=c.new.agent_id, target_id=c.new.target_id, value=c.new.value, state=state,
                           details=details, **where(c.new.target_id), **common)]
    details = {"quorum_value": c.new.value, "values": dict(a.values), "reporting": a.reporting}
    return [AlertEvent(agent_id=agent, target_id=target, value=a.values.get(agent), state=c.transition,
                       details=details, **where(target), **common)
            for agent, target in c.new.members or c.old.members]
