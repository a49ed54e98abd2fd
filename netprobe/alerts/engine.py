"""The scheduled evaluator: each rule's consecutive windows, aligned to UTC epoch multiples of its
`window`, evaluated once each, `settle` seconds after they close (late rounds still count).

Where a rule stands is the `alert_states` rows: each records the end of the last window evaluated,
so after a restart evaluation resumes with the next window (catching up at most MAX_CATCH_UP), a
firing alert stays firing without a second notification, and a pending one keeps its count. Each
rule's windows are applied in one transaction that first re-reads those rows under a lock, so
several collectors on one PostgreSQL apply (and notify) each window once between them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from netprobe.alerts import quorum, states
from netprobe.alerts.formats import Agreement, Notification
from netprobe.alerts.notify import Dispatcher
from netprobe.alerts.quorum import Group, Judged, Key
from netprobe.alerts.states import AlertState, Transition
from netprobe.alerts.values import Value, WindowReader
from netprobe.config.alerts import AlertRule, NotifierConfig
from netprobe.logs import log_event
from netprobe.store import Store, fleet
from netprobe.store.alert_events import AlertEvent
from netprobe.store.alert_states import AlertStates
from netprobe.store.fleet import AgentInfo, TargetInfo
from netprobe.times import iso, utc_now

log = logging.getLogger("netprobe.alerts")

SETTLE = 30.0                      # seconds after a window closes before it is evaluated
MAX_CATCH_UP = timedelta(days=1)   # after a long stop, older windows are skipped
MAX_SLEEP = 60.0                   # wake at least this often (a clock step is noticed)
RETRY_AFTER = 10.0                 # after a failed pass (database away), try again this much later
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Submitter(Protocol):
    def submit(self, n: Notification, names: Sequence[str]) -> None: ...


@dataclass(slots=True)
class EngineStats:
    passes: int = 0
    windows: int = 0               # rule × window evaluations applied
    errors: int = 0                # failed rule evaluations (retried)
    firing: int = 0                # alerts firing after the last pass
    transitions: dict[str, int] = field(default_factory=lambda: {"firing": 0, "resolved": 0})


def align_down(ts: datetime, seconds: float) -> datetime:
    step = int(seconds)
    return EPOCH + timedelta(seconds=int((ts - EPOCH).total_seconds()) // step * step)


def align_up(ts: datetime, seconds: float) -> datetime:
    down = align_down(ts, seconds)
    return down if down == ts else down + timedelta(seconds=int(seconds))


class AlertEngine:
    """Evaluates `rules` over `store` (only `agent_id`'s rounds when given) and submits transitions."""

    def __init__(self, store: Store, rules: Sequence[AlertRule], sink: Submitter, *,
                 agent_id: str | None = None, settle: float = SETTLE,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._store = store
        self._states = AlertStates(store)
        self.rules = tuple(rules)
        self._sink = sink
        self._agent = agent_id
        self.settle = settle
        self._clock = clock
        self._cursor: dict[str, datetime] = {}      # rule → end of the last window evaluated
        self._firing: dict[str, int] = {}
        self._failed = False
        self._task: asyncio.Task[None] | None = None
        self.stats = EngineStats()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alerts")

    async def close(self, timeout: float) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=timeout)

    async def _run(self) -> None:
        while True:
            await self.evaluate_due(self._clock())
            await asyncio.sleep(self.sleep_for(self._clock()))

    def sleep_for(self, now: datetime) -> float:
        """Seconds until the next window of any rule is due (bounded)."""
        if self._failed:
            return RETRY_AFTER
        waits = []
        for rule in self.rules:
            cur = self._cursor.get(rule.name) or align_down(now - timedelta(seconds=self.settle), rule.window)
            due = cur + timedelta(seconds=rule.window + self.settle)
            waits.append((due - now).total_seconds())
        return min(max(min(waits, default=MAX_SLEEP), 0.05), MAX_SLEEP)

    async def evaluate_due(self, now: datetime) -> list[Notification]:
        """Evaluate every window that has closed and settled by `now`; returns (and submits) what was
        sent: transitions, and repeats of still-firing alerts."""
        reader = WindowReader(self._store, self._agent)
        known = _Fleet(self._store)
        sent: list[Notification] = []
        self._failed = False
        for rule in self.rules:
            try:
                notes = await self._evaluate(rule, reader, known, now)
            except Exception as exc:   # the database is away: this rule's windows wait for the next pass
                self._failed = True
                self.stats.errors += 1
                log_event(log, "error", "alert evaluation failed; will retry", alert=rule.name,
                          error=str(exc))
                continue
            for n in notes:
                self._sink.submit(n, rule.notify)
            sent += notes
        self.stats.passes += 1
        self.stats.firing = sum(self._firing.values())
        return sent

    async def _evaluate(self, rule: AlertRule, reader: WindowReader, fleet: _Fleet, now: datetime
                        ) -> list[Notification]:
        width = timedelta(seconds=rule.window)
        # end of the newest window that has closed and settled
        closed = align_down(now - timedelta(seconds=self.settle), rule.window)
        cur = self._cursor.get(rule.name)
        if cur is None:
            # first start: begin with the window that closes next, do not judge the past
            cur = states.cursor(states.by_key(await self._states.load(rule.name)).values()) or closed
        cur = max(align_up(cur, rule.window), align_down(closed - MAX_CATCH_UP, rule.window))
        windows: list[tuple[datetime, datetime]] = []
        while cur + width <= closed:
            windows.append((cur, cur + width))
            cur += width
        if not windows:
            self._cursor[rule.name] = cur
            return []
        values = [await reader.values(rule.metric, start, end, rule.slo_ttft_ms) for start, end in windows]
        agents, targets = await fleet.get()

        changes: list[_Change] = []
        async with self._states.locked(rule.name) as stored:
            current = states.by_key(stored.rows)
            done = states.cursor(current.values())
            changed: dict[states.Key, AlertState] = {}
            for (start, end), found in zip(windows, values, strict=True):
                if done is not None and end <= done:
                    continue     # another evaluator (a second collector) applied it already
                if rule.quorum is None:
                    changes += _plain_window(rule, current, changed, found, start, end)
                else:
                    changes += _quorum_window(rule, current, changed, found, agents, targets, start, end)
                self.stats.windows += 1
            await stored.save([states.to_row(s, rule) for s in changed.values()], now)
            await stored.record([e for c in changes for e in _events(rule, c, targets)])
        self._cursor[rule.name] = windows[-1][1]
        notes = [self._notification(rule, c.old, c.new, c.transition, c.start, c.end, now, c.agreement)
                 for c in changes]
        for n in notes:
            self.stats.transitions[n.state] += 1
            log_event(log, "info", "alert state changed", alert=rule.name, state=n.state, agent=n.agent,
                      target=n.target, value=n.value, window_end=iso(n.window_end),
                      **({"local": n.local, "agents": ",".join(n.agreement.agents)} if n.agreement else {}))
        start, end = windows[-1]
        repeats = [self._notification(rule, s, s, None, start, end, now, agreement)
                   for s, agreement in _open(rule, current, agents, targets)]
        self._firing[rule.name] = len(repeats)
        raised = {n.id for n in notes}
        notes += [n for n in repeats if n.id not in raised]
        # a local alert is recorded either way; notified only when the rule says so
        return [n for n in notes if rule.notify_local or not n.local]

    def _notification(self, rule: AlertRule, old: AlertState, new: AlertState, transition: Transition | None,
                      start: datetime, end: datetime, now: datetime, agreement: Agreement | None = None
                      ) -> Notification:
        resolved = transition == "resolved"
        route = agreement is not None and not agreement.local
        # Alertmanager drops a firing alert at endsAt: re-sent every window, so three windows of slack
        valid = now + timedelta(seconds=3 * rule.window + self.settle)
        return Notification(rule=rule, agent="" if route else new.agent_id,
                            target="" if route else new.target_id,
                            state="resolved" if resolved else "firing", value=new.value, probe=new.probe,
                            started_at=old.started_at if resolved else new.started_at,
                            ended_at=end if resolved else None,
                            window_start=start, window_end=end, valid_until=valid, repeat=transition is None,
                            agreement=agreement)


class _Fleet:
    """The agents and targets tables, read once per pass and only when a rule has windows due."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._got: tuple[dict[str, AgentInfo], dict[str, TargetInfo]] | None = None

    async def get(self) -> tuple[dict[str, AgentInfo], dict[str, TargetInfo]]:
        if self._got is None:
            self._got = (await fleet.load_agents(self._store), await fleet.load_targets(self._store))
        return self._got


@dataclass(frozen=True, slots=True)
class _Change:
    """One transition in one window: of an agent × target, or (quorum rules) of a group."""

    old: AlertState
    new: AlertState
    transition: Transition
    start: datetime
    end: datetime
    agreement: Agreement | None = None


def _step(rule: AlertRule, old: AlertState, value: Value | None, start: datetime, end: datetime
          ) -> tuple[AlertState, Transition | None]:
    new, transition = states.step(rule, old, value.value if value else None, value.probe if value else None,
                                  start, end)
    return new, transition


def _plain_window(rule: AlertRule, current: dict[Key, AlertState], changed: dict[Key, AlertState],
                  found: Mapping[Key, Value], start: datetime, end: datetime) -> list[_Change]:
    out = []
    for key in sorted(set(current) | {k for k in found if rule.matches(k[1])}):
        if quorum.is_group(key):
            continue      # left by the rule when it had a quorum
        old = current.get(key) or AlertState(rule.name, *key)
        new, transition = _step(rule, old, found.get(key) if rule.matches(key[1]) else None, start, end)
        current[key] = changed[key] = new
        if transition is not None:
            out.append(_Change(old, new, transition, start, end))
    return out


def _quorum_window(rule: AlertRule, current: dict[Key, AlertState], changed: dict[Key, AlertState],
                   found: Mapping[Key, Value], agents: Mapping[str, AgentInfo],
                   targets: Mapping[str, TargetInfo], start: datetime, end: datetime) -> list[_Change]:
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
        new, transition = states.step(rule, old, seen.value if seen else None, seen.probe if seen else None,
                                      start, end)
        now_bad = seen.members if seen else old.members
        if new.state == "firing":
            members = now_bad if transition == "firing" else tuple(sorted({*old.members, *now_bad}))
        else:      # pending: this window's bad pairs (no data: the last ones); ok: none
            members = now_bad if new.state == "pending" else ()
        new = replace(new, members=members, group=group)
        current[key] = changed[key] = new
        if transition is not None:
            out.append(_Change(old, new, transition, start, end,
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
            out.append(_Change(old, new, transition, start, end,
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


def _open(rule: AlertRule, current: Mapping[Key, AlertState], agents: Mapping[str, AgentInfo],
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


def _events(rule: AlertRule, c: _Change, targets: Mapping[str, TargetInfo]) -> list[AlertEvent]:
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


class Alerting:
    """The evaluator and its notifiers, as the agent and the collector run them."""

    def __init__(self, rules: Sequence[AlertRule], notifiers: Sequence[NotifierConfig], *,
                 agent_id: str | None = None, settle: float = SETTLE) -> None:
        self.rules = tuple(rules)
        self.dispatcher = Dispatcher(notifiers)     # reads secret files: SetupError before anything opens
        self._agent = agent_id
        self._settle = settle
        self.engine: AlertEngine | None = None

    def start(self, store: Store) -> None:
        self.dispatcher.start()
        self.engine = AlertEngine(store, self.rules, self.dispatcher, agent_id=self._agent,
                                  settle=self._settle)
        self.engine.start()
        log_event(log, "info", "alerts started", rules=len(self.rules),
                  notifiers=len(self.dispatcher.notifiers), settle_s=self._settle)

    async def close(self, timeout: float) -> None:
        """Stop evaluating and give queued notifications what is left of `timeout` (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self.engine is not None:
            await self.engine.close(timeout / 2)
        await self.dispatcher.close(max(0.0, deadline - loop.time()))


def alerting(rules: Sequence[AlertRule], notifiers: Sequence[NotifierConfig], *, agent_id: str | None = None,
             settle: float = SETTLE) -> Alerting | None:
    """An Alerting when any rule is configured, else None (nothing runs)."""
    return Alerting(rules, notifiers, agent_id=agent_id, settle=settle) if rules else None
