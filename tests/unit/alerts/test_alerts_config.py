"""[[alerts]] and [[notifiers]] in agent and collector configs: parsed, and every problem named by path."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from netprobe.cli import app
from netprobe.config.agent import parse_config
from netprobe.config.collector import parse_collector_config
from netprobe.errors import ConfigError, SetupError

AGENT = """
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"
[[targets]]
id = "hk-cn2"
host = "hk1.example.net"
probes = ["icmp"]
[[targets]]
id = "tyo-163"
host = "tyo1.example.net"
probes = ["icmp"]
"""
GOOD = """
[[alerts]]
name = "loss"
metric = "loss_pct"
op = ">"
threshold = 1.0
clear_threshold = 0.5
window = "5m"
for_windows = 3
targets = ["hk-*", "tyo-163"]
notify = ["ops"]
[[notifiers]]
name = "ops"
kind = "webhook"
url = "http://127.0.0.1:9099/hook"
"""
COLLECTOR = '[storage]\nurl = "sqlite:///x.db"\n'


def problems(text: str, collector: bool = False) -> list[str]:
    with pytest.raises(ConfigError) as err:
        if collector:
            parse_collector_config(COLLECTOR + text, source="c.toml")
        else:
            top = text.startswith("notifiers =")      # a top-level key must come before any table
            parse_config(text + AGENT if top else AGENT + text, source="a.toml")
    assert err.value.exit_code == 2
    return err.value.problems


def test_agent_and_collector_parse_the_same_rules() -> None:
    agent = parse_config(AGENT + GOOD)
    collector = parse_collector_config(COLLECTOR + GOOD.replace('"tyo-163"', '"sg-*"'))
    [rule] = agent.alerts
    assert (rule.name, rule.metric, rule.op, rule.threshold, rule.clear_threshold, rule.window,
            rule.for_windows, rule.targets, rule.notify, rule.severity) == \
        ("loss", "loss_pct", ">", 1.0, 0.5, 300.0, 3, ("hk-*", "tyo-163"), ("ops",), "warning")
    assert rule.matches("hk-cn2") and rule.matches("tyo-163") and not rule.matches("sg-cn2")
    assert collector.alerts[0].matches("sg-cn2") and collector.notifiers == agent.notifiers
    assert parse_config(AGENT).alerts == () and parse_config(AGENT).notifiers == ()


def test_defaults() -> None:
    cfg = parse_config(AGENT + """
[[alerts]]
name = "rtt"
metric = "rtt_p95_ms"
threshold = 150
notify = ["log"]
[[notifiers]]
name = "log"
kind = "log"
""")
    [rule], [log] = cfg.alerts, cfg.notifiers
    assert (rule.op, rule.clear_at, rule.window, rule.for_windows, rule.targets) == \
        (">", 150.0, 300.0, 1, ("*",))
    assert (log.url, log.timeout, log.retries, log.style, log.read_secret()) == ("", 10.0, 3, "markdown", "")


@pytest.mark.parametrize(("snippet", "wanted"), [
    (GOOD.replace('notify = ["ops"]', 'notify = ["ops", "opz"]'),
     "alerts[0].notify[1]: unknown notifier 'opz'; notifiers: ops"),
    (GOOD.replace('op = ">"', 'op = "=>"'), "alerts[0].op: Input should be '>', '>=', '<' or '<='"),
    (GOOD.replace("clear_threshold = 0.5", "clear_threshold = 2.0"),
     "alerts[0].clear_threshold: 2 is above threshold 1"),
    (GOOD.replace('op = ">"', 'op = "<"'), "alerts[0].clear_threshold: 0.5 is below threshold 1"),
    (GOOD.replace('metric = "loss_pct"', 'metric = "loss"'), "alerts[0].metric: Input should be 'loss_pct'"),
    (GOOD.replace('"tyo-163"', '"tyo-164"'), "alerts[0].targets[1]: unknown target 'tyo-164'"),
    (GOOD.replace('window = "5m"', 'window = "2.5s"'), "alerts[0].window: Input should be greater than"),
    (GOOD.replace('window = "5m"', 'window = "90.5s"'), "alerts[0].window: must be a whole number"),
    (GOOD.replace("for_windows = 3", "for_windows = 0"), "alerts[0].for_windows: Input should be greater"),
    (GOOD.replace("threshold = 1.0", 'threshold = "1"'),
     "alerts[0].threshold: Input should be a valid number"),
    (GOOD.replace('notify = ["ops"]', "notify = []"), "alerts[0].notify: Tuple should have at least 1"),
    (GOOD.replace('name = "loss"', 'name = "loss"\ncolour = "red"'), "alerts[0].colour: unknown key"),
    (GOOD + GOOD.split("[[notifiers]]")[0], "alerts[1].name: duplicate alert 'loss'"),
    (GOOD + "[[notifiers]]" + GOOD.split("[[notifiers]]")[1], "notifiers[1].name: duplicate notifier 'ops'"),
    (GOOD.replace('kind = "webhook"', 'kind = "slack"'), "notifiers[0].kind: Input should be 'webhook'"),
    (GOOD.replace('url = "http://127.0.0.1:9099/hook"', ""), "notifiers[0].url: required for kind 'webhook'"),
    (GOOD.replace("http://127.0.0.1", "ftp://127.0.0.1"), "notifiers[0].url: is not an http:// or https://"),
    (GOOD + 'secret = "s"\n', "notifiers[0].secret: only for kind dingtalk or feishu, not 'webhook'"),
    (GOOD.replace('"webhook"', '"dingtalk"') + 'secret = "s"\nsecret_env = "X"\n',
     "notifiers[0].secret_env: give one of secret, secret_file, secret_env"),
    (GOOD.replace('"webhook"', '"wecom"') + 'headers = { A = "b" }\n', "notifiers[0].headers: only for kind"),
    ("notifiers = 3\n", "notifiers: must be an array of tables ([[notifiers]])"),
])
def test_problems_name_the_field(snippet: str, wanted: str) -> None:
    found = problems(snippet)
    assert any(p.startswith(wanted) for p in found), found


def test_collector_problems_name_the_field() -> None:
    found = problems(GOOD.replace('notify = ["ops"]', 'notify = ["opz"]'), collector=True)
    assert found == ["alerts[0].notify[0]: unknown notifier 'opz'; notifiers: ops"]
    # the collector has no target list to check ids against
    assert parse_collector_config(COLLECTOR + GOOD.replace('"tyo-163"', '"anything"')).alerts


def test_config_check_exits_2_naming_the_fields(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text(AGENT + GOOD.replace('op = ">"', 'op = "=>"').replace('["ops"]', '["opz"]'))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    assert [line.split(":")[0] for line in result.output.splitlines()[1:]] == ["alerts[0].op",
                                                                               "alerts[0].notify[0]"]


def test_config_check_names_an_unreadable_secret_file(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text(AGENT + f"""
[[notifiers]]
name = "ding"
kind = "dingtalk"
url = "http://127.0.0.1:9/robot/send?access_token=t"
secret_file = "{tmp_path / 'missing.secret'}"
""")
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2 and "notifiers[0].secret_file:" in result.output
    cfg = parse_config(path.read_text())
    with pytest.raises(SetupError, match=r"notifiers\[ding\].secret_file"):
        cfg.notifiers[0].read_secret()
    (tmp_path / "missing.secret").write_text("s3cret\n")
    assert cfg.notifiers[0].read_secret() == "s3cret"


def test_secrets_stay_out_of_reprs() -> None:
    cfg = parse_config(AGENT + """
[[notifiers]]
name = "ding"
kind = "dingtalk"
url = "http://127.0.0.1:9/robot/send?access_token=t"
secret = "TOPSECRET"
[[notifiers]]
name = "hook"
kind = "webhook"
url = "http://127.0.0.1:9/hook"
headers = { Authorization = "Bearer HIDDEN" }
""")
    assert "TOPSECRET" not in repr(cfg) and "HIDDEN" not in repr(cfg)
