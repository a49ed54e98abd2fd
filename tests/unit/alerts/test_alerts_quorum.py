"""Quorum rules over real stored rounds, on SQLite and PostgreSQL: a route problem seen by enough agents
of a region raises one alert naming them; one agent's bad last mile is a local alert; for_windows and
hysteresis per group; a restart neither re-fires nor forgets; every transition lands in alert_events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from netprobe.alerts import formats
from netprobe.alerts.engine import AlertEngine
from netprobe.alerts.formats import Notification
from netprobe.alerts.quorum import Group, judge
from netprobe.alerts.values import Value
from netprobe.config.alerts import AlertRule
from netprobe.dashboard.alerts import alert_history_html
from netprobe.store import Store, open_store
from netprobe.store import alert_events as history
from netprobe.store.fleet import AgentInfo, TargetInfo
from tests.support.alert_routes import firing_routes
from tests.support.alert_sink import Recorder
from tests.support.pg import BOTH, database_url
from tests.support.store import icmp_envelope, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SETTLE = 30.0
MINUTE = timedelta(minutes=1)
EAST = ("ea", "eb", "ec")             # three agents of cn-east
HK = ("hk-cn2", "hk", "cn2-gia")
TYO = ("tyo-cn2", "tokyo", "cn2-gia")


def rule(**kw: Any) -> AlertRule:
    base: dict[str, Any] = {"name": "loss", "metric": "loss_pct", "op": ">", "threshold": 20.0,
                            "clear_threshold": 10.0, "window": 60.0, "for_windows": 2, "quorum": 2,
                            "notify": ("ops",)}
    return AlertRule.model_validate({**base, **kw})


def at(minute: int) -> datetime:
    return T0 + (minute + 1) * MINUTE + timedelta(seconds=SETTLE)


@pytest.fixture(params=BOTH)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url(request.param, tmp_path) as got:
        yield got


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    s = await open_store(url)
    yield s
    await s.close()


async def put(store: Store, minute: int, agent: str, target: tuple[str, str, str], lost: int,
              region: str = "cn-east") -> None:
    """One icmp round of 10 requests, `lost` of them lost, by `agent` (of `region`) to `target`."""
    samples: list[float | None] = [None] * lost + [30.0 + i for i in range(10 - lost)]
    env = icmp_envelope(T0 + minute * MINUTE + timedelta(seconds=10), samples, agent=agent, target=target[0])
    env["agent"]["region"] = region
    env["target"].update(datacenter=target[1], line=target[2])
    await store.write(typed([env]))


def sent(sink: Recorder) -> list[Notification]:
    return [n for n, _ in sink.sent if not n.repeat]


def test_a_group_is_bad_when_n_agents_are_and_clear_when_fewer_than_n_stay_above_clear() -> None:
    agents = {a: AgentInfo(a, "cn-east", "telecom", None) for a in ("a", "b", "c")}
    targets = {"t": TargetInfo("t", None, "hk", "cn2-gia"), "u": TargetInfo("u", None, "hk", "cn2-gia")}
    hk = Group("region", "cn-east", "hk", "cn2-gia")
    r = rule()

    def one(**values: float) -> tuple[float | None, tuple[str, ...]]:
        found = {(k[0], "u" if k.endswith("2") else "t"): Value(v, "icmp") for k, v in values.items()}
        got = judge(r, found, agents, targets)[hk]
        return got.value, got.agents

    assert one(a=50, b=30, c=0) == (30, ("a", "b"))         # the 2nd worst: bad, 2 agree
    assert one(a=50, b=15, c=0) == (15, ("a",))             # 1 bad: the group is not (and not clear)
    assert one(a=50, b=5, c=0) == (5, ("a",))               # fewer than 2 above clear: clear
    assert one(a=50) == (None, ("a",))                      # one agent with data: the group has none
    assert one(a=0, a2=50, b=40) == (40, ("a", "b"))        # an agent's worst target counts once
    low = rule(metric="attainment_pct", op="<", threshold=95, clear_threshold=97)
    found = {("a", "t"): Value(90, "icmp"), ("b", "t"): Value(96, "icmp"), ("c", "t"): Value(99, "icmp")}
    assert judge(low, found, agents, targets)[hk].value == 96   # the 2nd lowest: not bad, not clear


async def test_route_problem_raises_one_quorum_alert_and_a_last_mile_stays_local(store: Store) -> None:
    sink = Recorder()
    engine = AlertEngine(store, [rule()], sink, settle=SETTLE)
    await engine.evaluate_due(at(-1))
    for minute in range(4):
        for agent in EAST:
            await put(store, minute, agent, HK, 5)                           # the route: all three lose
            await put(store, minute, agent, TYO, 5 if agent == "ec" else 0)  # ec's own path only
        await put(store, minute, "na", HK, 5, region="cn-north")             # alone in its region
    for minute in range(2):         # the route recovers for ea and eb; ec's loss goes on
        for agent in EAST:
            await put(store, 4 + minute, agent, HK, 5 if agent == "ec" else 0)
            await put(store, 4 + minute, agent, TYO, 5 if agent == "ec" else 0)
    for minute in range(6):
        await engine.evaluate_due(at(minute))

    notes = sent(sink)
    route = [n for n in notes if n.route]
    local = [n for n in notes if n.local]
    assert [(n.state, n.window_end) for n in route] == [("firing", T0 + 2 * MINUTE),
                                                        ("resolved", T0 + 5 * MINUTE)]
    fired = route[0]
    assert fired.agreement is not None
    assert (fired.agreement.agents, fired.agreement.group) == (EAST, Group("region", "cn-east", "hk",
                                                                              "cn2-gia"))
    assert fired.value == 50.0 and fired.agreement.values == {a: 50.0 for a in EAST}
    # local: ec on tokyo, na (alone in cn-north) on hk, and ec on hk once the route problem ended
    assert sorted((n.state, n.agent, n.target, n.window_end) for n in local) == [
        ("firing", "ec", "hk-cn2", T0 + 5 * MINUTE), ("firing", "ec", "tyo-cn2", T0 + 2 * MINUTE),
        ("firing", "na", "hk-cn2", T0 + 2 * MINUTE)]
    tyo = next(n for n in local if n.target == "tyo-cn2")
    assert tyo.agreement is not None and tyo.agreement.reporting == 3
    assert all(n.route or n.local for n in notes)

    body = formats.webhook(fired)
    assert {k: body[k] for k in ("scope", "scope_value", "datacenter", "line", "agents", "quorum", "local",
                                 "agent", "target")} == {
        "scope": "region", "scope_value": "cn-east", "datacenter": "hk", "line": "cn2-gia",
        "agents": list(EAST), "quorum": 2, "local": False, "agent": None, "target": None}
    assert body["targets"] == ["hk-cn2"] and body["agent_values"] == {a: 50.0 for a in EAST}
    [am] = formats.alertmanager(fired)
    assert am["labels"] == {"alertname": "loss", "metric": "loss_pct", "severity": "warning",
                            "source": "netprobe", "scope": "region", "scope_value": "cn-east",
                            "datacenter": "hk", "line": "cn2-gia", "local": "false"}
    assert am["annotations"]["agents"] == "ea,eb,ec" and am["annotations"]["quorum"] == "2"
    assert "3 agents of region cn-east agree (ea, eb, ec; quorum 2)" in fired.summary()
    lbody = formats.webhook(tyo)
    assert (lbody["local"], lbody["agents"], lbody["agent"], lbody["target"]) == \
        (True, ["ec"], "ec", "tyo-cn2")
    assert tyo.summary().startswith("[LOCAL] loss:") and "last mile" in tyo.summary()
    [lam] = formats.alertmanager(tyo)
    assert lam["labels"] == {"alertname": "loss", "metric": "loss_pct", "severity": "warning",
                             "source": "netprobe", "scope": "region", "scope_value": "cn-east",
                             "datacenter": "tokyo", "line": "cn2-gia", "local": "true", "agent": "ec",
                             "target": "tyo-cn2"}
    for style in ("markdown", "text"):
        assert "ea, eb, ec" in str(formats.feishu(fired, style)) + str(formats.dingtalk(fired, style)) + \
            str(formats.wecom(fired, style))

    # the history: one row per agreeing agent × target, local rows, resolutions
    rows = await history.history(store, "ea", "hk-cn2", T0, T0 + MINUTE * 10)
    assert [(e.state, e.local, e.at, e.agents, e.quorum, e.scope_value) for e in rows] == [
        ("resolved", False, T0 + 5 * MINUTE, EAST, 2, "cn-east"),
        ("firing", False, T0 + 2 * MINUTE, EAST, 2, "cn-east")]
    assert rows[1].value == 50.0 and rows[1].details["quorum_value"] == 50.0
    ec = await history.history(store, "ec", "hk-cn2", T0, T0 + MINUTE * 10)
    assert [(e.state, e.local) for e in ec] == [("local", True), ("resolved", False), ("firing", False)]
    now = await history.firing(store)
    assert sorted((e.agent_id, e.target_id, e.state) for e in now) == [
        ("ec", "hk-cn2", "local"), ("ec", "tyo-cn2", "local"), ("na", "hk-cn2", "local")]
    routes = await firing_routes(store)
    assert [(r.datacenter, r.line, r.local, r.scope_value, r.agents) for r in routes] == [
        ("hk", "cn2-gia", True, "cn-east", ("ec",)), ("hk", "cn2-gia", True, "cn-north", ("na",)),
        ("tokyo", "cn2-gia", True, "cn-east", ("ec",))]
    page = alert_history_html(ec)
    assert page.count("<tr class=") == 3 and "local (last mile)" in page and "firing (route)" in page
    assert "ea, eb, ec (3 of region cn-east; quorum 2)" in page

    # a restart neither re-fires nor forgets: the next windows only repeat what is open
    again = Recorder()
    restarted = AlertEngine(store, [rule()], again, settle=SETTLE)
    await restarted.evaluate_due(at(6))
    assert sent(again) == [] and sorted((n.agent, n.target) for n, _ in again.sent) == [
        ("ec", "hk-cn2"), ("ec", "tyo-cn2"), ("na", "hk-cn2")]


async def test_for_windows_counts_the_groups_windows_and_local_alerts_can_stay_quiet(store: Store) -> None:
    sink = Recorder()
    engine = AlertEngine(store, [rule(for_windows=3, notify_local=False)], sink, settle=SETTLE)
    await engine.evaluate_due(at(-1))
    bad = {0: ("ea", "eb"), 1: ("ea",), 2: ("eb", "ec"), 3: ("ea", "ec"), 4: ("ea", "eb", "ec")}
    for minute, agents in bad.items():
        for agent in EAST:
            await put(store, minute, agent, HK, 5 if agent in agents else 0)
    for minute in range(5):
        await engine.evaluate_due(at(minute))
    # window 1 had one bad agent: the group's streak restarts; windows 2, 3, 4 raise it
    notes = sent(sink)
    assert [(n.state, n.window_end, n.agreement.agents if n.agreement else ()) for n in notes] == [
        ("firing", T0 + 5 * MINUTE, EAST)]
    # no agent's own streak reached 3 outside the route problem (ec's did, with it): nothing local
    assert sorted((e.agent_id, e.state, e.local) for e in await history.firing(store)) == [
        (a, "firing", False) for a in EAST]
    # with notify_local = false a local alert is recorded, never sent
    sink2 = Recorder()
    quiet = AlertEngine(store, [rule(for_windows=1, notify_local=False, name="quiet")], sink2, settle=SETTLE)
    await quiet.evaluate_due(at(4))
    await put(store, 5, "ea", TYO, 5)
    await put(store, 5, "eb", TYO, 0)
    await quiet.evaluate_due(at(5))
    assert sink2.sent == []
    [recorded] = await history.firing(store, agent_id="ea", target_id="tyo-cn2")
    assert (recorded.rule, recorded.state, recorded.local, recorded.agents) == \
        ("quiet", "local", True, ("ea",))


async def test_a_pair_that_fires_while_its_group_is_pending_waits_for_it(store: Store) -> None:
    """Window 0 has only ea's rounds (the others' arrive later): the group has no data, ea's pair
    counts a bad window the group does not; in window 1 ea's pair fires, the group is only pending
    with ea among the bad: ea waits, and window 2 raises the route problem, nothing local."""
    sink = Recorder()
    engine = AlertEngine(store, [rule()], sink, settle=SETTLE)
    await engine.evaluate_due(at(-1))
    await put(store, 0, "ea", HK, 5)
    for minute in (1, 2, 3):
        for agent in EAST:
            await put(store, minute, agent, HK, 5 if minute < 3 or agent == "ea" else 0)
    for minute in range(4):
        await engine.evaluate_due(at(minute))
    # window 3: the route clears, ea goes on: its alert is local from then
    assert [(n.state, n.route, n.local, n.agent, n.window_end) for n in sent(sink)] == [
        ("firing", True, False, "", T0 + 3 * MINUTE), ("resolved", True, False, "", T0 + 4 * MINUTE),
        ("firing", False, True, "ea", T0 + 4 * MINUTE)]


async def test_a_condition_seen_by_fewer_than_the_quorum_is_local_to_each_of_them(store: Store) -> None:
    sink = Recorder()
    engine = AlertEngine(store, [rule(quorum=3, for_windows=1)], sink, settle=SETTLE)
    await engine.evaluate_due(at(-1))
    for agent in EAST:
        await put(store, 0, agent, HK, 0 if agent == "ec" else 5)
    await engine.evaluate_due(at(0))
    notes = sent(sink)
    assert [(n.agent, n.local) for n in notes] == [("ea", True), ("eb", True)]
    for n in notes:
        assert n.agreement is not None and n.agreement.agents == ("ea", "eb")
        assert "local to ea, eb: 2 of 3 agent(s) of region cn-east (quorum 3)" in n.summary()
        assert formats.webhook(n)["agent_values"] == {"ea": 50.0, "eb": 50.0}
    rows = await history.firing(store)
    assert [(e.agent_id, e.state, e.agents) for e in rows] == [("ea", "local", ("ea", "eb")),
                                                               ("eb", "local", ("ea", "eb"))]


async def test_a_plain_rule_records_its_transitions_too(store: Store) -> None:
    engine = AlertEngine(store, [rule(quorum=None, for_windows=1)], Recorder(), settle=SETTLE)
    await engine.evaluate_due(at(-1))
    await put(store, 0, "ea", TYO, 5)
    await put(store, 1, "ea", TYO, 0)
    for minute in range(2):
        await engine.evaluate_due(at(minute))
    rows = await history.history(store, "ea", "tyo-cn2", T0, T0 + MINUTE * 5)
    assert [(e.state, e.at, e.value, e.datacenter, e.line, e.local, e.quorum, e.agents, e.started_at)
            for e in rows] == [("resolved", T0 + 2 * MINUTE, 0.0, "tokyo", "cn2-gia", False, None, (), T0),
                               ("firing", T0 + MINUTE, 50.0, "tokyo", "cn2-gia", False, None, (), T0)]
    assert await history.firing(store) == []
    assert await history.history(store, "ea", "tyo-cn2", T0 + 3 * MINUTE, T0 + MINUTE * 5) == []


def test_quorum_is_refused_in_an_agents_config_and_scope_needs_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    from netprobe.config.collector import parse_collector_config
    from netprobe.errors import ConfigError

    agent = tmp_path / "agent.toml"
    agent.write_text('[agent]\nid = "a"\nregion = "cn-east"\n[[targets]]\nid = "t"\nhost = "127.0.0.1"\n'
                     'probes = ["icmp"]\n[[alerts]]\nname = "loss"\nmetric = "loss_pct"\nthreshold = 1\n'
                     'quorum = 2\nnotify = ["log"]\n[[notifiers]]\nname = "log"\nkind = "log"\n')
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "config", "check", str(agent)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "alerts[0].quorum: collector only" in out.stdout + out.stderr
    base = ('[storage]\nurl = "sqlite:///x.db"\n[[notifiers]]\nname = "log"\nkind = "log"\n'
            '[[alerts]]\nname = "loss"\nmetric = "loss_pct"\nthreshold = 1\nnotify = ["log"]\n')
    with pytest.raises(ConfigError, match=r"alerts\[0\].*scope applies only with quorum"):
        parse_collector_config(base + 'scope = "isp"\n')
    with pytest.raises(ConfigError, match=r"alerts\[0\]\.scope"):
        parse_collector_config(base + 'quorum = 2\nscope = "city"\n')
    cfg = parse_collector_config(base + 'quorum = 3\nscope = "isp"\nnotify_local = false\n')
    assert (cfg.alerts[0].quorum, cfg.alerts[0].scope, cfg.alerts[0].notify_local) == (3, "isp", False)


def test_alert_history_html_escapes_everything() -> None:
    e = history.AlertEvent(rule="loss", agent_id="<a&b>", target_id="t", metric="loss_pct", value=2.5,
                           threshold=1.0, state="firing", at=T0, datacenter="hk<script>", line='"x"')
    page = alert_history_html([e])
    assert "<script>" not in page and "hk&lt;script&gt;" in page and "&lt;a&amp;b&gt;" in page
    assert "loss_pct 2.5 %" in page and "2026-11-20T12:00:00Z" in page
    assert alert_history_html([]) == '<p class="alerts-none">No alerts in this span.</p>'
