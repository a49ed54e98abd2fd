"""Notifiers against a local HTTP receiver on 127.0.0.1: each kind's payload (Alertmanager's against
its v2 OpenAPI schema), DingTalk and Feishu signatures, retries, a receiver that never answers, secrets
kept out of logs, and `netprobe alerts test`."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import logging
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from aiohttp import web

from netprobe.alerts.formats import Notification, dingtalk_sign, feishu_sign
from netprobe.alerts.notify import Dispatcher
from netprobe.config.alerts import AlertRule, NotifierConfig
from netprobe.logs import FIELDS_ATTR, _Handler, setup_logging

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RULE = AlertRule(name="loss", metric="loss_pct", op=">", threshold=1.0, clear_threshold=0.5, window=300.0,
                 for_windows=3, notify=("x",), severity="critical")

# postableAlerts of Alertmanager's OpenAPI v2 spec (api/v2/openapi.yaml): an array of postableAlert,
# which is alert (labels required: a map of strings; generatorURL a uri) plus startsAt, endsAt
# (date-time) and annotations (a map of strings).
AM_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["labels"],
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "startsAt": {"type": "string", "format": "date-time"},
            "endsAt": {"type": "string", "format": "date-time"},
            "generatorURL": {"type": "string", "format": "uri"},
        },
        "additionalProperties": False,
    },
}


def note(state: str = "firing", **kw: Any) -> Notification:
    base: dict[str, Any] = {
        "rule": RULE, "agent": "sh-ct-1", "target": "hk-cn2", "state": state, "value": 2.5, "probe": "icmp",
        "started_at": T0, "ended_at": T0 + timedelta(minutes=20) if state == "resolved" else None,
        "window_start": T0 + timedelta(minutes=10), "window_end": T0 + timedelta(minutes=15),
        "valid_until": T0 + timedelta(minutes=30)}
    return Notification(**{**base, **kw})


@dataclass
class Receiver:
    """Records every POST; answers from `answers` (status, JSON body) in turn, then 200 {}."""

    url: str = ""
    got: list[dict[str, Any]] = field(default_factory=list)
    answers: list[tuple[int, Any]] = field(default_factory=list)
    hang: bool = False

    async def handle(self, request: web.Request) -> web.Response:
        self.got.append({"path": request.path, "query": dict(request.query), "headers": dict(request.headers),
                         "json": await request.json()})
        if self.hang:
            await asyncio.sleep(3600)
        status, body = self.answers.pop(0) if self.answers else (200, {})
        return web.json_response(body, status=status)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/{tail:.*}", rec.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    rec.url = f"http://{host}:{port}"
    yield rec
    await runner.cleanup()


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """What the logs really say: formatted and masked, as on stderr."""
    buf = io.StringIO()
    setup_logging("debug", "logfmt", stream=buf)
    yield buf
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)


def notifier(kind: str, url: str, **kw: Any) -> NotifierConfig:
    return NotifierConfig.model_validate({"name": "x", "kind": kind, "url": url, **kw})


async def send(cfg: NotifierConfig, n: Notification, backoff: float = 0.01) -> Dispatcher:
    d = Dispatcher([cfg], backoff=backoff)
    d.start()
    d.submit(n, [cfg.name])
    await d.close(5.0)
    return d


async def test_webhook_posts_one_json_object_per_transition(receiver: Receiver) -> None:
    cfg = notifier("webhook", receiver.url + "/hook", headers={"Authorization": "Bearer s3cret"})
    d = await send(cfg, note())
    await send(cfg, note("resolved", value=0.2))
    [firing, resolved] = [r["json"] for r in receiver.got]
    assert receiver.got[0]["path"] == "/hook"
    assert receiver.got[0]["headers"]["Authorization"] == "Bearer s3cret"
    assert {"alert", "state", "agent", "target", "metric", "value", "threshold", "started_at"} <= set(firing)
    assert (firing["alert"], firing["rule"], firing["state"], firing["agent"], firing["target"]) == \
        ("loss", "loss", "firing", "sh-ct-1", "hk-cn2")
    assert (firing["metric"], firing["value"], firing["op"]) == ("loss_pct", 2.5, ">")
    assert (firing["threshold"], firing["clear_threshold"]) == (1.0, 0.5)
    assert (firing["started_at"], firing["ended_at"]) == ("2026-11-20T12:00:00Z", None)
    assert firing["window"] == {"start": "2026-11-20T12:10:00Z", "end": "2026-11-20T12:15:00Z",
                                "seconds": 300}
    assert (resolved["state"], resolved["value"], resolved["ended_at"]) == \
        ("resolved", 0.2, "2026-11-20T12:20:00Z")
    assert d.stats()["x"] == {"queued": 0, "sent": 1, "failed": 0, "retries": 0, "dropped": 0}


async def test_alertmanager_v2_payload_matches_the_openapi_schema(receiver: Receiver) -> None:
    cfg = notifier("alertmanager", receiver.url + "/")
    await send(cfg, note())
    await send(cfg, note("resolved"))
    await send(cfg, note(repeat=True))
    assert [r["path"] for r in receiver.got] == ["/api/v2/alerts"] * 3
    checker = jsonschema.Draft202012Validator(AM_SCHEMA, format_checker=jsonschema.FormatChecker())
    for r in receiver.got:
        checker.validate(r["json"])
    firing, resolved = receiver.got[0]["json"][0], receiver.got[1]["json"][0]
    assert firing["labels"] == {"alertname": "loss", "agent": "sh-ct-1", "target": "hk-cn2",
                                "metric": "loss_pct", "severity": "critical", "source": "netprobe"}
    assert firing["annotations"]["summary"] == "[FIRING] loss: loss_pct 2.5 % > 1 on sh-ct-1 → hk-cn2"
    assert (firing["startsAt"], firing["endsAt"]) == ("2026-11-20T12:00:00Z", "2026-11-20T12:30:00Z")
    assert (resolved["startsAt"], resolved["endsAt"]) == ("2026-11-20T12:00:00Z", "2026-11-20T12:20:00Z")
    with pytest.raises(jsonschema.ValidationError):           # the schema does bite
        checker.validate([{"labels": {"value": 2.5}}])


async def test_repeats_go_to_alertmanager_only(receiver: Receiver) -> None:
    cfgs = [notifier("webhook", receiver.url + "/hook", name="hook"),
            notifier("alertmanager", receiver.url, name="am")]
    d = Dispatcher(cfgs, backoff=0.01)
    d.start()
    d.submit(note(repeat=True), ["hook", "am"])
    await d.close(5.0)
    assert [r["path"] for r in receiver.got] == ["/api/v2/alerts"]


async def test_feishu_text_card_and_signature(receiver: Receiver) -> None:
    await send(notifier("feishu", receiver.url + "/open-apis/bot/v2/hook/abc", style="text"), note())
    before = int(time.time())
    await send(notifier("feishu", receiver.url + "/hook", secret="fs-secret"), note("resolved"))
    text, card = receiver.got[0]["json"], receiver.got[1]["json"]
    assert text["msg_type"] == "text" and text["content"]["text"].startswith("[FIRING] loss: loss_pct 2.5 %")
    assert card["msg_type"] == "interactive"
    assert card["card"]["header"]["title"]["content"].startswith("[RESOLVED] loss")
    assert card["card"]["header"]["template"] == "green"
    assert card["card"]["elements"][0]["text"]["tag"] == "lark_md"
    ts = int(card["timestamp"])
    assert before <= ts <= time.time() + 1
    expected = base64.b64encode(hmac.new(f"{ts}\nfs-secret".encode(), b"", hashlib.sha256).digest()).decode()
    assert card["sign"] == expected == feishu_sign("fs-secret", ts)


async def test_dingtalk_markdown_signed_in_the_query(receiver: Receiver) -> None:
    before = int(time.time() * 1000)
    await send(notifier("dingtalk", receiver.url + "/robot/send?access_token=tok123", secret="SEC-abc"),
               note())
    [got] = receiver.got
    assert got["query"]["access_token"] == "tok123"
    ts = int(got["query"]["timestamp"])
    assert before <= ts <= time.time() * 1000 + 1000
    # the robot's own check: base64(HMAC-SHA256(secret, "timestamp\nsecret")), urlencoded in the URL
    want = base64.b64encode(hmac.new(b"SEC-abc", f"{ts}\nSEC-abc".encode(), hashlib.sha256).digest()).decode()
    assert got["query"]["sign"] == want == dingtalk_sign("SEC-abc", ts)
    body = got["json"]
    assert body["msgtype"] == "markdown" and body["markdown"]["title"].startswith("[FIRING] loss")
    assert body["markdown"]["text"].startswith("### [FIRING] loss")


def test_dingtalk_signature_is_urlencoded() -> None:
    from netprobe.alerts.formats import request

    cfg = notifier("dingtalk", "http://127.0.0.1:9/robot/send?access_token=t", secret="s")
    url, _ = request(cfg, "s", note(), now=1700000000.123)
    query = urllib.parse.urlsplit(url).query
    raw_sign = query.split("sign=")[1]
    assert "+" not in raw_sign and "/" not in raw_sign and "=" not in raw_sign   # %2B %2F %3D
    assert urllib.parse.unquote(raw_sign) == dingtalk_sign("s", 1700000000123)


async def test_wecom_markdown_and_text(receiver: Receiver) -> None:
    await send(notifier("wecom", receiver.url + "/cgi-bin/webhook/send?key=k"), note())
    await send(notifier("wecom", receiver.url + "/cgi-bin/webhook/send?key=k", style="text"),
               note("resolved"))
    md, text = receiver.got[0]["json"], receiver.got[1]["json"]
    assert md["msgtype"] == "markdown"
    assert md["markdown"]["content"].startswith('<font color="warning">[FIRING]')
    assert text == {"msgtype": "text", "text": {"content": text["text"]["content"]}}
    assert text["text"]["content"].startswith("[RESOLVED] loss: loss_pct 2.5 % (≤ 0.5)")


async def test_log_notifier_writes_one_structured_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="netprobe.alerts")
    d = Dispatcher([NotifierConfig(name="x", kind="log")])
    d.start()
    d.submit(note(), ["x"])
    await d.close(1.0)
    [record] = [r for r in caplog.records if r.getMessage() == "alert firing"]
    fields = getattr(record, FIELDS_ATTR)
    assert record.levelname == "WARNING"
    assert (fields["alert"], fields["agent"], fields["target"], fields["value"]) == \
        ("loss", "sh-ct-1", "hk-cn2", 2.5)
    assert d.stats()["x"]["sent"] == 1


async def test_a_bot_error_code_is_a_failure_and_not_retried(receiver: Receiver, logged: io.StringIO) -> None:
    receiver.answers = [(200, {"errcode": 310000, "errmsg": "sign not match"})]
    d = await send(notifier("dingtalk", receiver.url + "/robot/send?access_token=TOPSECRET", secret="SEC-x"),
                   note())
    assert len(receiver.got) == 1
    assert d.stats()["x"] == {"queued": 0, "sent": 0, "failed": 1, "retries": 0, "dropped": 0}
    text = logged.getvalue()
    assert "notification failed" in text and "sign not match" in text
    assert "TOPSECRET" not in text and "SEC-x" not in text


async def test_retries_with_backoff_until_the_receiver_recovers(receiver: Receiver) -> None:
    receiver.answers = [(503, {"error": "busy"}), (502, {}), (200, {})]
    d = await send(notifier("webhook", receiver.url + "/hook", retries=3), note())
    assert len(receiver.got) == 3
    assert [r["json"]["state"] for r in receiver.got] == ["firing"] * 3
    assert d.stats()["x"] == {"queued": 0, "sent": 1, "failed": 0, "retries": 2, "dropped": 0}


async def test_retries_are_bounded_and_4xx_is_final(receiver: Receiver) -> None:
    receiver.answers = [(500, {})] * 5
    d = await send(notifier("webhook", receiver.url + "/hook", retries=2), note())
    assert len(receiver.got) == 3 and d.stats()["x"]["failed"] == 1 and d.stats()["x"]["retries"] == 2
    receiver.got.clear()
    receiver.answers = [(404, {})]
    d = await send(notifier("webhook", receiver.url + "/hook", retries=2), note())
    assert len(receiver.got) == 1 and d.stats()["x"]["failed"] == 1


async def test_a_receiver_that_never_answers_blocks_nothing(receiver: Receiver, logged: io.StringIO) -> None:
    receiver.hang = True
    hung = notifier("webhook", receiver.url + "/hook?key=HIDDEN", name="hung", timeout=0.2, retries=1)
    d = Dispatcher([hung, NotifierConfig(name="log", kind="log")], backoff=0.01, max_queue=3)
    d.start()
    t0 = time.monotonic()
    for _ in range(5):
        d.submit(note(), ["hung", "log"])
    assert time.monotonic() - t0 < 0.05                         # submit never waits
    assert d.stats()["log"]["sent"] == 5                        # the other notifier is unaffected
    await asyncio.sleep(0.6)                                    # first delivery: 2 attempts × 0.2 s
    assert d.stats()["hung"]["failed"] >= 1
    t1 = time.monotonic()
    await d.close(0.3)
    assert time.monotonic() - t1 < 0.6                          # bounded shutdown
    stats = d.stats()["hung"]
    assert stats["dropped"] == 2 and stats["queued"] >= 1       # 5 into a queue of 3
    text = logged.getvalue()
    assert "no answer within 0.2 s" in text and "HIDDEN" not in text


async def test_connection_refused_is_data(closed_port: int) -> None:
    d = Dispatcher([notifier("wecom", f"http://127.0.0.1:{closed_port}/send?key=KEYVALUE", retries=0)])
    outcomes = await d.send_now(note())
    assert not outcomes["x"].ok and outcomes["x"].retryable
    assert "KEYVALUE" not in (outcomes["x"].error or "")


# -- netprobe alerts test ---------------------------------------------------------------------------

AGENT_CFG = """
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"
[[targets]]
id = "hk-cn2"
host = "hk1.example.net"
probes = ["icmp"]
"""


async def alerts_test(path: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "netprobe.cli", "alerts", "test", "--config", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_alerts_test_command(receiver: Receiver, tmp_path: Path, closed_port: int) -> None:
    good = tmp_path / "good.toml"
    good.write_text(AGENT_CFG + f"""
[[notifiers]]
name = "hook"
kind = "webhook"
url = "{receiver.url}/hook"
[[notifiers]]
name = "ding"
kind = "dingtalk"
url = "{receiver.url}/robot/send?access_token=t"
secret = "s"
[[notifiers]]
name = "log"
kind = "log"
""")
    code, out, err = await alerts_test(good)
    assert code == 0, out + err
    assert out.splitlines() == ["hook (webhook): OK", "ding (dingtalk): OK", "log (log): OK"]
    assert {r["path"] for r in receiver.got} == {"/hook", "/robot/send"}
    assert next(r for r in receiver.got if r["path"] == "/hook")["json"]["alert"] == "netprobe-test"

    bad = tmp_path / "bad.toml"
    bad.write_text(f"""
[collector]
listen = "127.0.0.1:0"
[storage]
url = "sqlite:///{tmp_path / 'c.db'}"
[[notifiers]]
name = "hook"
kind = "webhook"
url = "{receiver.url}/hook"
[[notifiers]]
name = "gone"
kind = "alertmanager"
url = "http://127.0.0.1:{closed_port}"
""")
    code, out, err = await alerts_test(bad)
    assert code == 1, out + err
    lines = out.splitlines()
    assert lines[0] == "hook (webhook): OK"
    assert lines[1].startswith("gone (alertmanager): FAILED: ClientConnectorError")


async def test_alerts_test_on_a_bad_config_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(AGENT_CFG + '[[notifiers]]\nname = "n"\nkind = "pager"\nurl = "http://127.0.0.1:9"\n')
    code, _, err = await alerts_test(path)
    assert code == 2 and "notifiers[0].kind" in err and "Traceback" not in err


@pytest.mark.parametrize(("metric", "shown"), [
    ("fwd_loss_pct", "fwd_loss_pct 2.5 %"), ("ret_loss_pct", "ret_loss_pct 2.5 %"),
    ("attainment_pct", "attainment_pct 2.5 %"), ("rtt_p95_ms", "rtt_p95_ms 2.5 ms"),
    ("stalls_per_min", "stalls_per_min 2.5/min"), ("asymmetric", "asymmetric 2.5 >"),
    ("return_line_mismatch", "return_line_mismatch 2.5 >"),
])
def test_every_metric_formats_with_its_unit(metric: str, shown: str) -> None:
    """Every probe's metric reads in a message (the units come from the name, not from a list that a
    new probe's metric would be missing from)."""
    rule = RULE.model_copy(update={"metric": metric})
    assert shown in note(rule=rule).summary()
