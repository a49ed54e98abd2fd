"""Quorum rules (docs/alerts.md): a collector rule with `quorum = N` judges groups, not single agents.

A group is one scope value (the agents' region, or isp with `scope = "isp"`, from the agents table) ×
one datacenter × one declared line (from the targets table; a target without a datacenter is a group
of its own). In a window an agent's value on the group is its worst over its targets there; the
group's value is the N-th worst of those. So, with the rule's own op and thresholds:

    the group's window is bad    ⟺ at least N agents are bad in it
    it is clear (hysteresis)     ⟺ fewer than N agents are beyond clear_threshold
    it has no data               ⟺ fewer than N agents have a value (nothing changes, as for a pair)

and the group runs the same state machine as a pair (for_windows, clear_threshold). Each agent ×
target still runs its own, and a pair that fires is
    - part of the route problem when a firing group counts its agent among those that agreed
      (no alert of its own: the group's names it);
    - held while a pending group counts its agent (a route problem may be building up: the pair
      fired first because the group had a window without quorum data);
    - otherwise a *local* alert (last mile): recorded and, with `notify_local`, notified as such.
      A pair still firing when the route problem it was part of clears becomes local then.
A local alert keeps its own course until the pair clears, even if a group fires with it later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from netprobe.alerts.values import Value
from netprobe.config.alerts import AlertRule
from netprobe.store.fleet import AgentInfo, TargetInfo

Key = tuple[str, str]          # agent_id, target_id
MARK = "@"                     # alert_states keys of groups start with it (ids cannot)
_KEY_LEN = 128                 # alert_states' id columns


@dataclass(frozen=True, slots=True, order=True)
class Group:
    scope: str                 # region | isp
    scope_value: str           # "" when the agent declared none
    datacenter: str
    line: str

    @property
    def key(self) -> Key:
        """Where the group's state lives in alert_states (agent_id, target_id)."""
        return (_fit(f"{MARK}{self.scope}:{self.scope_value}"), _fit(f"{MARK}{self.datacenter}/{self.line}"))

    def label(self) -> str:
        return f"{self.datacenter}/{self.line}" if self.line else self.datacenter


@dataclass(frozen=True, slots=True)
class Judged:
    """One group in one window."""

    value: float | None                  # the N-th worst agent's value; None: fewer than N have one
    probe: str | None
    members: tuple[Key, ...]             # agent × target pairs bad in the window
    values: Mapping[str, float]          # each agent's worst value on the group
    reporting: int                       # agents with a value

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(sorted({a for a, _ in self.members}))


def is_group(key: Key) -> bool:
    return key[0].startswith(MARK)


def _fit(text: str) -> str:
    if len(text) <= _KEY_LEN:
        return text
    return text[:_KEY_LEN - 17] + "~" + hashlib.sha256(text.encode()).hexdigest()[:16]


def group_of(rule: AlertRule, key: Key, agents: Mapping[str, AgentInfo],
             targets: Mapping[str, TargetInfo]) -> Group:
    agent, target = agents.get(key[0]), targets.get(key[1])
    scope_value = (agent.region if rule.scope == "region" else agent.isp) if agent is not None else None
    datacenter = target.datacenter if target is not None else None
    line = target.line if target is not None else None
    return Group(rule.scope, scope_value or "", datacenter or key[1], line or "")


def judge(rule: AlertRule, found: Mapping[Key, Value], agents: Mapping[str, AgentInfo],
          targets: Mapping[str, TargetInfo]) -> dict[Group, Judged]:
    """Every group with a value in `found` (one window's values of the rule's targets)."""
    assert rule.quorum is not None
    worst: dict[Group, dict[str, tuple[float, str]]] = {}
    bad: dict[Group, list[Key]] = {}
    for key, v in sorted(found.items()):
        if v.value is None or not rule.matches(key[1]):
            continue
        group = group_of(rule, key, agents, targets)
        seen = worst.setdefault(group, {})
        held = seen.get(key[0])
        if held is None or (v.value > held[0] if rule.worst_first else v.value < held[0]):
            seen[key[0]] = (v.value, v.probe)
        if rule.is_bad(v.value):
            bad.setdefault(group, []).append(key)
    out: dict[Group, Judged] = {}
    for group, per_agent in worst.items():
        ranked = sorted(per_agent.values(), key=lambda vp: vp[0], reverse=rule.worst_first)
        nth = ranked[rule.quorum - 1] if len(ranked) >= rule.quorum else None
        out[group] = Judged(value=nth[0] if nth else None, probe=nth[1] if nth else None,
                            members=tuple(bad.get(group, ())),
                            values={a: vp[0] for a, vp in sorted(per_agent.items())},
                            reporting=len(per_agent))
    return out
