"""The demo's agent configuration is a valid one for every route of the bundled lab (the lab test runs
it; this catches a bad key or a round that does not fit without root)."""

from __future__ import annotations

from pathlib import Path

from netprobe.config.agent import parse_config
from netprobe.demo.run import SPEC, agent_config
from netprobe.lab.spec import load_spec


def test_demo_agent_config_is_valid(tmp_path: Path) -> None:
    routes = load_spec(SPEC).routes
    config = parse_config(agent_config(routes, tmp_path / "live.db", tmp_path / "reflector.token"))
    assert [t.id for t in config.targets] == [r.id for r in routes]
    assert all({"icmp", "tcp", "mtr", "owd"} <= set(t.probes) for t in config.targets)
    # the way back traced where the lab's datacenter sends its own traffic: its first route
    traced = {t.id for t in config.targets if "rmtr" in t.probes}
    assert traced == {"hk-cn2", "tyo-cn2", "sg-cn2", "us-cn2", "hk-gia-163", "la-163-gt"}
    assert config.reflector.token_file == str(tmp_path / "reflector.token")
    assert all(str(t.option("reflector")).endswith(f"{t.id}.lab:8473") for t in config.targets)
