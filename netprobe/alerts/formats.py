"""What each notifier kind sends for one transition: the request (URL, JSON body), nothing sent here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from netprobe.alerts.quorum import Group
from netprobe.config.alerts import AlertRule, NotifierConfig
from netprobe.times import iso

AM_PATH = "/api/v2/alerts"
def unit(metric: str) -> str:
    """The unit a metric's value is shown in, by its name (every probe's metrics, whatever they are)."""
    if metric.endswith("_pct"):
        return " %"
    if metric.endswith("_ms"):
        return " ms"
    return "/min" if metric.endswith("_per_min") else ""


@dataclass(frozen=True, slots=True)
class Agreement:
    """Quorum rules: which agents saw it. A quorum alert names the group (its agent and target are
    ""); a local one is one agent × target's, seen by fewer agents than the quorum."""

    group: Group
    quorum: int
    local: bool
    agents: tuple[str, ...]                  # the agents that agreed (local: the one agent)
    targets: tuple[str, ...]                 # their targets in the group
    values: Mapping[str, float] = field(default_factory=dict)   # each agent's value in the window
    reporting: int = 0                       # agents of the scope with a value on the group then

    def who(self) -> str:
        g = self.group
        scope = f"{g.scope} {g.scope_value}" if g.scope_value else f"no {g.scope}"
        if self.local:
            return (f"local to {', '.join(self.agents)}: {len(self.agents)} of {self.reporting} agent(s) of "
                    f"{scope} (quorum {self.quorum}): last mile, not the route")
        return f"{len(self.agents)} agents of {scope} agree ({', '.join(self.agents)}; quorum {self.quorum})"


@dataclass(frozen=True, slots=True)
class Notification:
    """One alert transition (or, with `repeat`, a still-firing alert re-sent to Alertmanager)."""

    rule: AlertRule
    agent: str
    target: str
    state: Literal["firing", "resolved"]
    value: float | None
    probe: str | None
    started_at: datetime | None       # start of the first bad window
    ended_at: datetime | None         # resolved: end of the window that cleared it
    window_start: datetime
    window_end: datetime
    valid_until: datetime             # Alertmanager endsAt while firing: re-sent before this passes
    repeat: bool = False
    agreement: Agreement | None = None   # quorum rules

    @property
    def route(self) -> bool:
        """A quorum alert (about a datacenter and line, not one agent × target)."""
        return self.agreement is not None and not self.agreement.local

    @property
    def local(self) -> bool:
        return self.agreement is not None and self.agreement.local

    @property
    def id(self) -> str:
        a = self.agreement
        if a is not None and not a.local:
            return f"{self.rule.name}/{a.group.scope}={a.group.scope_value}/{a.group.label()}"
        return f"{self.rule.name}/{self.agent}/{self.target}" + ("/local" if self.local else "")

    def summary(self) -> str:
        r = self.rule
        shown = f"{r.metric} {number(self.value)}{unit(r.metric)}"
        a = self.agreement
        where = f"{a.group.label()}" if a is not None and not a.local else f"{self.agent} → {self.target}"
        tail = f": {a.who()}" if a is not None and self.state == "firing" else ""
        if self.state == "firing":
            head = "[LOCAL]" if self.local else "[FIRING]"
            return f"{head} {r.name}: {shown} {r.op} {number(r.threshold)} on {where}{tail}"
        side = "≤" if r.op in (">", ">=") else "≥"
        kind = " (local)" if self.local else ""
        return f"[RESOLVED] {r.name}: {shown} ({side} {number(r.clear_at)}) on {where}{kind}"

    def description(self) -> str:
        r = self.rule
        source = f" ({self.probe} rounds)" if self.probe else ""
        lines = [f"{r.metric} over the {_span(r.window)} window {iso(self.window_start)} – "
                 f"{iso(self.window_end)} was {number(self.value)}{unit(r.metric)}{source}",
                 f"raise: {r.op} {number(r.threshold)} for {r.for_windows} window(s) in a row; "
                 f"clear: {'≤' if r.op in ('>', '>=') else '≥'} {number(r.clear_at)}"]
        if self.started_at is not None:
            lines.append(f"since {iso(self.started_at)}")
        if self.ended_at is not None:
            lines.append(f"ended {iso(self.ended_at)}")
        a = self.agreement
        if a is not None:
            seen = ", ".join(f"{agent} {number(v)}{unit(r.metric)}" for agent, v in a.values.items())
            lines.append(a.who() + (f"; values: {seen}" if seen else ""))
        return "\n".join(lines)


def number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _span(seconds: float) -> str:
    s = int(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


# -- payloads ----------------------------------------------------------------------------------------

def webhook(n: Notification) -> dict[str, Any]:
    r = n.rule
    body: dict[str, Any] = {
        "alert": r.name, "rule": r.name, "id": n.id, "state": n.state,
        "agent": None if n.route else n.agent, "target": None if n.route else n.target,
        "metric": r.metric, "value": n.value, "op": r.op, "threshold": r.threshold,
        "clear_threshold": r.clear_at, "for_windows": r.for_windows, "severity": r.severity,
        "probe": n.probe, "started_at": iso_or_none(n.started_at), "ended_at": iso_or_none(n.ended_at),
        "window": {"start": iso(n.window_start), "end": iso(n.window_end), "seconds": int(r.window)},
        "summary": n.summary(), "local": n.local, "quorum": r.quorum}
    a = n.agreement
    if a is not None:
        body.update(scope=a.group.scope, scope_value=a.group.scope_value, datacenter=a.group.datacenter,
                    line=a.group.line, agents=list(a.agents), targets=list(a.targets),
                    agent_values=dict(a.values), reporting=a.reporting)
    return body


def _labels(n: Notification) -> dict[str, str]:
    """Alertmanager's identity of the alert: the same while it fires, re-sent, and resolves."""
    r = n.rule
    base = {"alertname": r.name, "metric": r.metric, "severity": r.severity, "source": "netprobe"}
    a = n.agreement
    if a is None:
        return {**base, "agent": n.agent, "target": n.target}
    g = a.group
    scope = {"scope": g.scope, "scope_value": g.scope_value, "datacenter": g.datacenter, "line": g.line,
             "local": "true" if a.local else "false"}
    return {**base, **scope, "agent": n.agent, "target": n.target} if a.local else {**base, **scope}


def alertmanager(n: Notification) -> list[dict[str, Any]]:
    """A postableAlerts array of one. Firing: endsAt = valid_until, re-sent each window while firing
    so Alertmanager never times it out; resolved: endsAt = when it cleared."""
    r = n.rule
    starts = n.started_at or n.window_start
    ends = n.ended_at if n.state == "resolved" and n.ended_at is not None else n.valid_until
    annotations = {"summary": n.summary(), "description": n.description(), "value": number(n.value),
                   "threshold": number(r.threshold)}
    if n.agreement is not None:
        annotations.update(agents=",".join(n.agreement.agents), quorum=str(n.agreement.quorum))
    return [{"labels": _labels(n), "annotations": annotations,
             "startsAt": iso(starts), "endsAt": iso(max(ends, starts + timedelta(seconds=1)))}]


def feishu(n: Notification, style: str) -> dict[str, Any]:
    if style == "text":
        return {"msg_type": "text", "content": {"text": f"{n.summary()}\n{n.description()}"}}
    return {"msg_type": "interactive", "card": {
        "config": {"wide_screen_mode": True},
        "header": {"title": {"tag": "plain_text", "content": n.summary()},
                   "template": "red" if n.state == "firing" else "green"},
        "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": n.description()}}]}}


def dingtalk(n: Notification, style: str) -> dict[str, Any]:
    if style == "text":
        return {"msgtype": "text", "text": {"content": f"{n.summary()}\n{n.description()}"}}
    body = "\n\n".join(n.description().split("\n"))
    return {"msgtype": "markdown", "markdown": {"title": n.summary(), "text": f"### {n.summary()}\n\n{body}"}}


def wecom(n: Notification, style: str) -> dict[str, Any]:
    if style == "text":
        return {"msgtype": "text", "text": {"content": f"{n.summary()}\n{n.description()}"}}
    color = "warning" if n.state == "firing" else "info"
    body = "\n".join(f"> {line}" for line in n.description().split("\n"))
    return {"msgtype": "markdown",
            "markdown": {"content": f'<font color="{color}">{n.summary()}</font>\n{body}'}}


def iso_or_none(ts: datetime | None) -> str | None:
    return iso(ts) if ts is not None else None


# -- signing ---------------------------------------------------------------------------------------

def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk robot signature: base64(HMAC-SHA256(key=secret, "timestamp\\nsecret"))."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu bot signature: base64(HMAC-SHA256(key="timestamp\\nsecret", empty message))."""
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def request(cfg: NotifierConfig, secret: str, n: Notification, now: float | None = None
            ) -> tuple[str, Any]:
    """(URL, JSON body) for one notification; signatures are computed fresh per attempt."""
    now = time.time() if now is None else now
    if cfg.kind == "webhook":
        return cfg.url, webhook(n)
    if cfg.kind == "alertmanager":
        base = cfg.url.rstrip("/")
        return (base if base.endswith(AM_PATH) else base + AM_PATH), alertmanager(n)
    if cfg.kind == "feishu":
        body = feishu(n, cfg.style)
        if secret:
            ts = int(now)
            body = {"timestamp": str(ts), "sign": feishu_sign(secret, ts), **body}
        return cfg.url, body
    if cfg.kind == "dingtalk":
        url = cfg.url
        if secret:
            ts = int(now * 1000)
            query = urllib.parse.urlencode({"timestamp": ts, "sign": dingtalk_sign(secret, ts)})
            url += ("&" if "?" in url else "?") + query
        return url, dingtalk(n, cfg.style)
    if cfg.kind == "wecom":
        return cfg.url, wecom(n, cfg.style)
    raise ValueError(f"kind {cfg.kind!r} sends no HTTP request")
