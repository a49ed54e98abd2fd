"""config.example.toml and the agent profiles in agents/ must parse, and the example must show every key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from netprobe.config.agent import load_config
from netprobe.config.alerts import AlertRule, NotifierConfig
from netprobe.config.sections import (
    AgentConfig,
    GeoIPConfig,
    LogConfig,
    ReflectorConfig,
    ResolverConfig,
    StorageConfig,
)
from netprobe.config.targets import TargetConfig
from netprobe.lab.spec import load_spec
from netprobe.net.lines import ClassificationConfig, LineRule, PrefixEntry
from netprobe.probes import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "config.example.toml"
COLLECTOR_EXAMPLE = ROOT / "config.collector.example.toml"
COLLECTOR_ONLY = {"alerts": {"quorum", "scope", "notify_local"}}   # an agent refuses them
LAB_SPECS = {"lab.toml", "lab-bench.toml"}  # lab specs, not agent configs (owned by the lab)


def fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


def test_example_parses() -> None:
    config = load_config(EXAMPLE)
    assert config.targets
    for target in config.targets:
        assert set(target.probes) <= set(REGISTRY)


def test_example_sets_every_key_of_every_model() -> None:
    raw: dict[str, Any] = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    sections: dict[str, type[BaseModel]] = {
        "agent": AgentConfig, "storage": StorageConfig, "resolver": ResolverConfig, "log": LogConfig,
        "geoip": GeoIPConfig, "classification": ClassificationConfig, "reflector": ReflectorConfig}
    for name, model in sections.items():
        assert fields(model) <= set(raw[name]), f"[{name}] misses {fields(model) - set(raw[name])}"
    for name, model, entries in (("prefixes", PrefixEntry, raw["classification"]["prefixes"]),
                                 ("rules", LineRule, raw["classification"]["rules"])):
        shown = {k for entry in entries for k in entry}
        assert fields(model) <= shown, f"[[classification.{name}]] never shows {fields(model) - shown}"
    collector: dict[str, Any] = tomllib.loads(COLLECTOR_EXAMPLE.read_text(encoding="utf-8"))
    for name, model in (("alerts", AlertRule), ("notifiers", NotifierConfig)):
        shown = {k for entry in raw[name] for k in entry}
        only = COLLECTOR_ONLY.get(name, set())
        assert fields(model) - only <= shown, f"[[{name}]] never shows {fields(model) - only - shown}"
        in_collector = {k for entry in collector[name] for k in entry}
        assert only <= in_collector, f"collector [[{name}]] never shows {only - in_collector}"
    target_keys = {k for t in raw["targets"] for k in t}
    missing = fields(TargetConfig) - target_keys
    assert not missing, f"[[targets]] misses {missing}"
    for name, spec in REGISTRY.items():
        shown = set(raw["probes"].get(name, {}))
        for target in raw["targets"]:
            shown |= set(target.get(name, {}))
        missing = fields(spec.settings_model) - shown
        assert not missing, f"[probes.{name}] / [targets.{name}] never show {missing}"


def test_example_classification_is_the_builtin_default() -> None:
    # The example documents the defaults; copying it must change nothing.
    assert load_config(EXAMPLE).classification == ClassificationConfig()


def test_every_key_in_example_is_commented() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    assignment = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_-]*\s*=")
    for i, line in enumerate(lines):
        if assignment.match(line):
            commented = "#" in line or (i > 0 and lines[i - 1].lstrip().startswith("#"))
            assert commented, f"config.example.toml line {i + 1} has no comment: {line!r}"


def test_example_uses_documentation_hosts_only() -> None:
    raw = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    for target in raw["targets"]:
        host = target["host"]
        assert host.endswith(".example.net") or host.startswith("2001:db8:"), host


def agent_profiles() -> list[Path]:
    return sorted(p for p in (ROOT / "agents").glob("*.toml") if p.name not in LAB_SPECS)


@pytest.mark.parametrize("path", agent_profiles(), ids=lambda p: p.name)
def test_agent_profiles_parse(path: Path) -> None:
    config = load_config(path)
    assert config.targets


def test_profiles_present() -> None:
    names = {p.name for p in agent_profiles()}
    assert {"sh-telecom.toml", "bj-unicom.toml", "lab-agent.toml"} <= names
    assert (ROOT / "agents" / "README.md").is_file()


def test_lab_agent_probes_every_lab_route_by_name() -> None:
    config = load_config(ROOT / "agents" / "lab-agent.toml")
    routes = {r.id: r for r in load_spec(ROOT / "agents" / "lab.toml").routes}
    assert [t.id for t in config.targets] == list(routes), "probe every route of the bundled lab"
    for target in config.targets:
        assert (target.datacenter, target.line) == (routes[target.id].datacenter, routes[target.id].line)
        assert target.host == f"{target.id}.lab"
        assert target.probes == ("icmp", "tcp", "mtr") and target.tcp_port == 443
        assert target.family == "ipv4"  # the default line rules know IPv4 carrier prefixes only
        for probe in ("icmp", "tcp"):
            s = config.probe_settings(target, probe).model_dump()
            assert (s["every"], s["count"], s["interval"], s["timeout"]) == (10.0, 10, 0.2, 1.0)
        mtr = config.probe_settings(target, "mtr").model_dump()
        assert (mtr["every"], mtr["cycles"]) == (30.0, 5)  # a trace within a one-minute demo
