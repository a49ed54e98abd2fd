"""Configuration: pinned keys, merging of per-target overrides, and every error named by its path."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from netprobe.config.agent import Config, load_config, parse_config
from netprobe.errors import ConfigError
from netprobe.net.pacing import DEFAULT_MAX_RATE
from netprobe.probes import REGISTRY
from netprobe.probes.base import ProbeTarget

AGENT = """
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"
"""

TARGET = """
[[targets]]
id = "hk-cn2"
host = "hk1.example.net"
datacenter = "hk"
line = "cn2-gia"
probes = ["icmp", "tcp"]
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="test.toml")
    assert info.value.source == "test.toml"
    assert info.value.exit_code == 2
    return info.value.problems


def test_minimal_config_gets_model_defaults() -> None:
    config = parse_config(AGENT + TARGET, source="t")
    assert isinstance(config, Config)
    assert config.storage.url is None  # the store picks its default
    assert config.storage.retention == 14 * 86400
    assert config.resolver.refresh == 300
    assert (config.log.level, config.log.format) == ("info", "logfmt")
    target = config.targets[0]
    assert (target.tcp_port, target.family, target.enabled, target.sse_url) == (443, "any", True, None)
    for name in target.probes:
        assert config.probe_settings(target, name) == REGISTRY[name].settings_model()
    assert set(config.probes) == set(REGISTRY)


def test_override_merges_over_probe_defaults_over_model_defaults() -> None:
    text = AGENT + """
[probes.icmp]
every = "30s"
count = 10
interval = "500ms"
""" + TARGET + """
[targets.icmp]
count = 5
timeout = 1
"""
    config = parse_config(text, source="t")
    target = config.targets[0]
    icmp = config.probe_settings(target, "icmp")
    assert icmp.model_dump() == {"every": 30.0, "count": 5, "interval": 0.5, "timeout": 1.0, "size": 56,
                                 "max_rate": DEFAULT_MAX_RATE}
    assert config.probes["icmp"].model_dump()["count"] == 10  # the default itself is untouched
    assert config.probe_settings(target, "tcp") == REGISTRY["tcp"].settings_model()
    with pytest.raises(KeyError):
        config.probe_settings(target, "no-such-probe")


def test_to_probe_target_and_envelope() -> None:
    text = AGENT + """
[[targets]]
id = "v6"
host = "2001:2::10"
datacenter = "tyo"
line = "163"
probes = ["tcp"]
tcp_port = 8443
sse_url = "https://tyo.example.net/sse"
family = "ipv6"
[[targets]]
id = "v4"
host = "198.18.0.1"
probes = ["icmp"]
family = "ipv4"
enabled = false
"""
    config = parse_config(text, source="t")
    assert config.targets[0].to_probe_target() == ProbeTarget(
        id="v6", host="2001:2::10", port=8443, url="https://tyo.example.net/sse", datacenter="tyo",
        line="163", family=socket.AF_INET6, options={"tcp_port": 8443, "sse_url": "https://tyo.example.net/sse"})
    assert config.targets[1].to_probe_target().family == socket.AF_INET
    assert config.agent_envelope() == {"id": "sh-ct-1", "region": "cn-east", "isp": "telecom",
                                       "timezone": "Asia/Shanghai"}
    jobs = [(t.id, p) for t, p, _ in config.jobs()]
    assert jobs == [("v6", "tcp")]  # the disabled target has no job


def test_config_is_frozen() -> None:
    config = parse_config(AGENT + TARGET, source="t")
    with pytest.raises(ValueError):
        config.agent.id = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        config.targets[0].host = "x"  # type: ignore[misc]
    assert isinstance(config.targets, tuple) and isinstance(config.targets[0].probes, tuple)


def test_every_problem_is_collected_with_its_path() -> None:
    text = """
surprise = 1
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "Mars/Olympus_Mons"
colour = "blue"
[storage]
retention = "forever"
[log]
level = "loud"
format = "xml"
[resolver]
refresh = 0
[probes.icmp]
count = 0
[[targets]]
id = "a"
host = "a.example.net"
probes = ["icmp"]
[[targets]]
id = "b"
host = ""
probes = ["tcp"]
tcp_port = 70000
[[targets]]
id = "a"
host = "c.example.net"
probes = ["tcp"]
[[targets]]
id = "d"
host = "d.example.net"
probes = ["icmp", "nosuch"]
"""
    found = problems(text)
    expected_paths = [
        "surprise:", "agent.timezone:", "agent.colour:", "storage.retention:", "log.level:",
        "log.format:", "resolver.refresh:", "probes.icmp.count:", "targets[1].host:",
        "targets[1].tcp_port:", "targets[2].id:", "targets[3].probes[1]:",
    ]
    for path in expected_paths:
        assert any(p.startswith(path) for p in found), (path, found)
    assert len(found) == len(expected_paths), found
    unknown = next(p for p in found if p.startswith("targets[3].probes[1]:"))
    assert "'nosuch'" in unknown and "icmp" in unknown and "tcp" in unknown
    dup = next(p for p in found if p.startswith("targets[2].id:"))
    assert "duplicate" in dup and "targets[0]" in dup
    assert "unknown key" in next(p for p in found if p.startswith("agent.colour:"))
    assert "Mars/Olympus_Mons" in next(p for p in found if p.startswith("agent.timezone:"))


@pytest.mark.parametrize(("snippet", "path", "words"), [
    ('[probes.icmp]\nevery = "1s"\ninterval = "1s"\ncount = 1\ntimeout = "0.5s"',
     "probes.icmp:", "interval"),
    ('[probes.icmp]\nevery = "5s"\ncount = 20\ninterval = "0.5s"', "probes.icmp:", "longer than every"),
    ('[probes.tcp]\ncount = "5"', "probes.tcp.count:", "valid integer"),
    ('[probes.tcp]\nport = 0', "probes.tcp.port:", "greater than"),
    ('[probes.icmp]\nsize = true', "probes.icmp.size:", "valid integer"),
    ('[probes.icmp]\nevery = "soon"', "probes.icmp.every:", "not a duration"),
    ('[probes.ping]\ncount = 10', "probes.ping:", "unknown probe"),
    ('[storage]\nurl = ""', "storage.url:", "empty"),
    ('[storage]\nurl = "::not a url::"', "storage.url:", "SQLAlchemy"),
])
def test_impossible_values(snippet: str, path: str, words: str) -> None:
    found = problems(AGENT + snippet + "\n" + TARGET)
    assert len(found) == 1 and found[0].startswith(path) and words in found[0], found


def test_override_errors_name_the_target() -> None:
    text = AGENT + TARGET + """
[targets.icmp]
count = 0
bogus = 1
[[targets]]
id = "slow"
host = "s.example.net"
probes = ["tcp"]
[targets.tcp]
every = "2s"
[targets.icmp]
count = 3
"""
    found = problems(text)
    assert any(p.startswith("targets[0].icmp.count:") for p in found), found
    assert any(p.startswith("targets[0].icmp.bogus: unknown key") for p in found), found
    # every=2s with the tcp defaults (5 connects 1s apart + 3s timeout) cannot fit
    assert any(p.startswith("targets[1].tcp:") and "longer than every" in p for p in found), found
    assert any(p.startswith("targets[1].icmp:") and "does not run" in p for p in found), found
    assert len(found) == 4, found


def test_override_errors_still_reported_when_defaults_are_invalid() -> None:
    found = problems(AGENT + "[probes.icmp]\ncount = 0\n" + TARGET + "[targets.icmp]\nsize = 1\n")
    assert sorted(p.split(":")[0] for p in found) == ["probes.icmp.count", "targets[0].icmp.size"]


def test_target_shape_errors() -> None:
    assert problems(AGENT) == ["targets: no targets; add at least one [[targets]] table"]
    assert problems("targets = []\n" + AGENT) == ["targets: no targets; add at least one [[targets]] table"]
    assert problems(AGENT + "[targets]\nid = 'x'")[0].startswith("targets: must be an array of tables")
    found = problems(AGENT + '[[targets]]\nid = "bad id"\nhost = "a b"\nprobes = []\nmtr = {cycles = 1}\n')
    paths = sorted(p.split(":")[0] for p in found)
    assert paths == ["targets[0].host", "targets[0].id", "targets[0].mtr", "targets[0].probes"], found
    found = problems(AGENT + '[[targets]]\nid = "x"\nhost = "h"\nprobes = ["icmp", "icmp"]\n')
    assert found == ["targets[0].probes: a probe is listed twice"]
    found = problems(AGENT + '[[targets]]\nid = "x"\nhost = "198.18.0.1"\nprobes = ["icmp"]\n'
                             'family = "ipv6"\n')
    assert len(found) == 1 and found[0].startswith("targets[0].family:") and "IPv4" in found[0]
    found = problems(AGENT + '[[targets]]\nid = "x"\nhost = "h"\nprobes = ["icmp"]\nsse_url = "ftp://h/"\n')
    assert len(found) == 1 and found[0].startswith("targets[0].sse_url:")
    found = problems(AGENT + '[[targets]]\nid = "x"\nprobes = ["icmp"]\nenabled = "yes"\n')
    assert sorted(p.split(":")[0] for p in found) == ["targets[0].enabled", "targets[0].host"]


def test_agent_section_required_and_complete() -> None:
    assert problems(TARGET) == ["agent: missing section [agent]"]
    found = problems('[agent]\nid = "x"\n' + TARGET)
    missing = ("region", "isp", "timezone")
    assert sorted(found) == sorted(f"agent.{k}: required key is missing" for k in missing)
    assert problems('agent = "x"\n' + TARGET) == ["agent: must be a table ([agent])"]


def test_toml_syntax_error_names_line_and_column() -> None:
    found = problems(AGENT + TARGET + 'broken = "unterminated\n')
    assert len(found) == 1
    line = (AGENT + TARGET).count("\n") + 1
    assert found[0].startswith(f"line {line}, column "), found
    assert "invalid TOML" in found[0]


def test_load_config_reads_files_and_reports_missing(tmp_path: Path) -> None:
    good = tmp_path / "agent.toml"
    good.write_text(AGENT + TARGET, encoding="utf-8")
    assert load_config(good).agent.id == "sh-ct-1"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.toml")
    assert info.value.source.endswith("absent.toml") and info.value.problems == ["file not found"]
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError):
        load_config(binary)
    with pytest.raises(ConfigError):
        load_config(tmp_path)  # a directory


def test_error_message_never_shows_a_storage_password() -> None:
    found = problems(AGENT + '[storage]\nurl = "postgresql://u:hunter2@db:notaport/x"\n' + TARGET)
    assert len(found) == 1 and found[0].startswith("storage.url:"), found
    assert "hunter2" not in found[0] and "u:***@db" in found[0]


def test_sse_needs_a_url() -> None:
    found = problems(AGENT + '[[targets]]\nid = "x"\nhost = "h.example.net"\nprobes = ["sse"]\n')
    assert len(found) == 1 and "sse_url: required when probes include sse" in found[0], found
    found = problems(AGENT + '[[targets]]\nid = "x"\nhost = "h"\nprobes = ["sse"]\nsse_url = "ftp://h/x"\n')
    assert found and "not an http:// or https:// URL" in found[0], found
