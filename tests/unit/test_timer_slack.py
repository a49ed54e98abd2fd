"""The agent's timer slack: capped by its probes' intervals, set on the thread, inherited by later threads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from netprobe.config.agent import load_config
from netprobe.errors import ConfigError
from netprobe.times import set_timer_slack, timer_slack, timer_slack_for


def test_the_slack_is_at_most_a_tenth_of_the_shortest_interval() -> None:
    assert timer_slack_for(0.02, None) == 0.02
    assert timer_slack_for(0.02, 0.5) == 0.02
    assert timer_slack_for(0.02, 0.05) == pytest.approx(0.005)
    assert timer_slack_for(0.0, 0.05) == 0.0


def test_set_on_a_thread_and_inherited_by_the_threads_it_starts() -> None:
    seen: dict[str, float] = {}

    def child() -> None:
        seen["child"] = timer_slack()

    def worker() -> None:
        set_timer_slack(0.007)
        seen["own"] = timer_slack()
        t = threading.Thread(target=child)
        t.start()
        t.join()
        set_timer_slack(0)
        seen["reset"] = timer_slack()

    before = timer_slack()
    t = threading.Thread(target=worker)   # not this test process's own thread: it keeps its slack
    t.start()
    t.join()
    assert seen["own"] == pytest.approx(0.007)
    assert seen["child"] == pytest.approx(0.007)
    assert seen["reset"] == pytest.approx(before)   # 0: back to the thread's default
    assert timer_slack() == before


AGENT = """[agent]
id = "a"
region = "r"
isp = "i"
timezone = "UTC"
{extra}
[[targets]]
id = "t"
host = "127.0.0.1"
probes = ["icmp"]
"""


def test_config_default_and_bounds(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT.format(extra=""))
    assert load_config(cfg).agent.timer_slack == 0.02
    cfg.write_text(AGENT.format(extra='timer_slack = "0"'))
    assert load_config(cfg).agent.timer_slack == 0.0
    cfg.write_text(AGENT.format(extra='timer_slack = "200ms"'))
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert "agent.timer_slack" in str(err.value.problems)
