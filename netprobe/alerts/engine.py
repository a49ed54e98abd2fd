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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from netprobe.alerts import states, transitions
from netprobe.alerts.formats import Agreement, Notification
from netprobe.alerts.notify import Dispatcher
from netprobe.alerts.states import AlertState, Transition
from netprobe.alerts.values import WindowReader
from netprobe.config.alerts import AlertRule, NotifierConfig
from netprobe.logs import log_event
from netprobe.store import Store, fleet
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

        changes: list[transitions.Change] = []
        async with self._states.locked(rule.name) as stored:
            current = states.by_key(stored.rows)
            done = states.cursor(current.values())
            changed: dict[states.Key, AlertState] = {}
            for (start, end), found in zip(windows, values, strict=True):
                if done is not None and end <= done:
                    continue     # another evaluator (a second collector) applied it already
                if rule.quorum is None:
                    changes += transitions.plain_window(rule, current, changed, found, start, end)
                else:
                    changes += transitions.quorum_window(rule, current, changed, found, agents, targets,
                                                         start, end)
                self.stats.windows += 1
            await stored.save([states.to_row(s, rule) for s in changed.values()], now)
            await stored.record([e for c in changes for e in transitions.events(rule, c, targets)])
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
                   for s, agreement in transitions.open_alerts(rule, current, agents, targets)]
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
