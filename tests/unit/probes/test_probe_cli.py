"""`netprobe probe icmp|tcp` end to end, as a user runs it (subprocess), on loopback only."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from netprobe.errors import UsageError
from netprobe.net.targets_file import check_host, check_host_port, read_targets
from netprobe.probes.cli_common import build_settings, check_family, collect
from netprobe.probes.icmp.runtime import IcmpSettings
from netprobe.probes.tcp.runtime import TcpSettings


def netprobe(*args: str, stdin: str | None = None, netns: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netprobe.cli", *args]
    if netns:
        cmd = ["unshare", "--net", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def as_json(out: subprocess.CompletedProcess[str]) -> Any:
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout  # exactly one JSON object
    return json.loads(lines[0])





FAST = ("--count", "2", "--interval", "20ms", "--timeout", "1s")

# --- tcp ---------------------------------------------------------------------------------------------


def test_tcp_one_target_prints_the_object_itself(listener: int) -> None:
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", *FAST, "--json")
    assert out.returncode == 0, out.stderr
    d = as_json(out)
    assert d["probe"] == "tcp" and d["status"] == "ok" and d["port"] == listener
    assert d["sent"] == 2 and d["received"] == 2 and d["connect_ms"]["p50"] > 0
    assert d["failures"] == {} and d["dns_ms"] is None


def test_tcp_several_targets_and_a_failure_exit_1(listener: int, listener6: int, closed_port: int) -> None:
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", f"[::1]:{listener6}", f"127.0.0.1:{closed_port}",
                   *FAST, "--json")
    assert out.returncode == 1
    results = as_json(out)["results"]
    assert [r["status"] for r in results] == ["ok", "ok", "down"]
    assert results[1]["address"] == "::1"
    assert results[2]["error_kind"] == "refused" and results[2]["failures"] == {"refused": 2}


def test_tcp_table_for_people(listener: int) -> None:
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", *FAST)
    assert out.returncode == 0, out.stderr
    assert "127.0.0.1" in out.stdout and "p95" in out.stdout and str(listener) in out.stdout


def test_tcp_port_out_of_range_is_a_usage_error() -> None:
    out = netprobe("probe", "tcp", "127.0.0.1:70000", "--json")
    assert out.returncode == 2 and out.stdout == ""
    assert "port 70000 in '127.0.0.1:70000' is out of range (1-65535)" in out.stderr


@pytest.mark.parametrize(("target", "needle"), [
    ("127.0.0.1:0", "out of range"),
    ("127.0.0.1", "missing port"),
    ("127.0.0.1:", "missing port"),
    ("127.0.0.1:http", "not a number"),
    ("::1:80", "[ADDR]:PORT"),
    ("[::1]", "missing port"),
    ("[nope]:80", "not a valid IPv6 address"),
    ("bad_host-.example:80", "not a valid host name"),
])
def test_bad_host_port(target: str, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        check_host_port(target)


def test_good_host_port() -> None:
    assert check_host_port("[::1]:443") == ("::1", 443)
    assert check_host_port("hk1.example.net:8443") == ("hk1.example.net", 8443)
    assert check_host_port(" 198.18.0.1:1 ") == ("198.18.0.1", 1)


@pytest.mark.parametrize("host", ["a..b", "x-.example", "host:80", "300.1.1.1", "10.1", "a b", "[::1",
                                  "x" * 64 + ".example", ""])
def test_bad_hosts(host: str) -> None:
    with pytest.raises(ValueError):
        check_host(host)


@pytest.mark.parametrize(("host", "expect"), [
    ("198.18.0.1", "198.18.0.1"), ("2001:2::1", "2001:2::1"), ("[2001:2::1]", "2001:2::1"),
    ("hk1.example.net", "hk1.example.net"), ("localhost", "localhost"), ("_sip.example.", "_sip.example."),
    ("bücher.example", "bücher.example"),
])
def test_good_hosts(host: str, expect: str) -> None:
    assert check_host(host) == expect


def test_read_targets_reports_every_bad_line(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_text("ok.example\n\n  # c\nbad..name\ntwo words\nok2.example # trailing comment\n")
    with pytest.raises(UsageError) as err:
        read_targets(str(f), check_host)
    assert str(err.value).splitlines() == [
        f"{f}:4: 'bad..name' is not a valid host name",
        f"{f}:5: one entry per line expected, got 'two words'",
    ]
    f.write_text("ok.example\n\n  # c\nok2.example # trailing comment\n")
    assert read_targets(str(f), check_host) == ["ok.example", "ok2.example"]


@pytest.mark.parametrize(("options", "needle"), [
    ({"count": 0}, "--count: Input should be greater than or equal to 1"),
    ({"interval": "soon"}, "--interval: 'soon' is not a duration"),
    ({"timeout": "-1"}, "--timeout: "),
    ({"interval": "0"}, "--interval: Input should be greater than 0"),
])
def test_bad_settings_read_like_config_errors(options: dict[str, Any], needle: str) -> None:
    with pytest.raises(UsageError, match=re.escape(needle)):
        build_settings(TcpSettings, options, {k: f"--{k}" for k in ("count", "interval", "timeout")})


def test_settings_every_fits_a_long_round() -> None:
    s = build_settings(TcpSettings, {"count": 500, "interval": "1s", "timeout": "3s"}, {})
    assert (s.count, s.interval, s.timeout) == (500, 1.0, 3.0) and s.every > s.round_seconds()
    assert build_settings(TcpSettings, {"interval": "500ms"}, {}).interval == 0.5


def test_bad_options_are_usage_errors(listener: int) -> None:
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", "--count", "0")
    assert out.returncode == 2 and "--count" in out.stderr
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", "-4", "-6")
    assert out.returncode == 2 and "-4 and -6" in out.stderr


def test_wrong_family_literal_is_a_usage_error(listener: int) -> None:
    out = netprobe("probe", "tcp", f"127.0.0.1:{listener}", "-6")
    assert out.returncode == 2 and "127.0.0.1 is IPv4 but -6 asks for IPv6" in out.stderr
    with pytest.raises(ValueError, match=re.escape("::1 is IPv6 but -4 asks for IPv4")):
        check_family("::1", socket.AF_INET)
    check_family("::1", socket.AF_INET6)
    check_family("example.net", socket.AF_INET6)  # names are checked when resolved


def test_tcp_targets_file_with_comments(tmp_path: Path, listener: int) -> None:
    f = tmp_path / "targets.txt"
    f.write_text(f"# loopback\n\n127.0.0.1:{listener}   # v4\n  localhost:{listener}\n")
    out = netprobe("probe", "tcp", "-f", str(f), "-4", *FAST, "--json")
    assert out.returncode == 0, out.stderr
    results = as_json(out)["results"]  # a file always gives the list form
    assert [r["host"] for r in results] == ["127.0.0.1", "localhost"]


def test_targets_file_garbage_lines_are_named(tmp_path: Path, listener: int) -> None:
    f = tmp_path / "targets.txt"
    f.write_text(f"127.0.0.1:{listener}\n# fine\nnot a host\n127.0.0.1:99999\n")
    out = netprobe("probe", "tcp", "-f", str(f))
    assert out.returncode == 2 and out.stdout == ""
    assert f"{f}:3: " in out.stderr and f"{f}:4: " in out.stderr and "99999" in out.stderr


def test_targets_from_stdin(listener: int) -> None:
    out = netprobe("probe", "tcp", "-f", "-", *FAST, "--json", stdin=f"127.0.0.1:{listener}\n")
    assert out.returncode == 0, out.stderr
    assert as_json(out)["results"][0]["status"] == "ok"


def test_missing_targets_file_and_no_targets() -> None:
    out = netprobe("probe", "tcp", "-f", "/nonexistent/targets.txt")
    assert out.returncode == 2 and "cannot read /nonexistent/targets.txt" in out.stderr
    with pytest.raises(UsageError, match="no targets"):
        collect([], None, check_host)


@pytest.mark.lab
def test_unresolvable_host_is_data_exit_1() -> None:
    """In an empty namespace the name cannot resolve (and no query leaves the machine)."""
    out = netprobe("probe", "tcp", "nonexistent.invalid:443", "--json", netns=True)
    assert out.returncode == 1, out.stderr
    d = as_json(out)
    assert d["status"] == "error" and d["error_kind"] == "dns" and "nonexistent.invalid" in d["error"]
    out = netprobe("probe", "icmp", "nonexistent.invalid", netns=True)
    assert out.returncode == 1 and "cannot resolve nonexistent.invalid" in out.stdout


# --- icmp --------------------------------------------------------------------------------------------

ICMP_FAST = ("--count", "3", "--interval", "50ms", "--timeout", "1s")


def test_icmp_several_hosts(tmp_path: Path) -> None:
    out = netprobe("probe", "icmp", "127.0.0.1", "::1", *ICMP_FAST, "--json")
    assert out.returncode == 0, out.stderr
    results = as_json(out)["results"]
    assert [r["host"] for r in results] == ["127.0.0.1", "::1"]
    for r in results:
        assert r["probe"] == "icmp" and r["status"] == "ok" and r["sent"] == 3 and r["received"] == 3
        assert r["loss_pct"] == 0.0 and r["rtt_ms"]["p50"] > 0 and len(r["samples_ms"]) == 3


def test_icmp_one_host_prints_the_object_itself() -> None:
    out = netprobe("probe", "icmp", "127.0.0.1", *ICMP_FAST, "--size", "100", "--json")
    assert out.returncode == 0, out.stderr
    d = as_json(out)
    assert d["host"] == "127.0.0.1" and d["status"] == "ok" and "results" not in d


def test_icmp_table_for_people() -> None:
    out = netprobe("probe", "icmp", "127.0.0.1", "localhost", *ICMP_FAST, "-4")
    assert out.returncode == 0, out.stderr
    for needle in ("127.0.0.1", "localhost", "loss%", "p95", "jitter"):
        assert needle in out.stdout


def test_icmp_file_with_a_garbage_line(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("127.0.0.1\n\n# comment\n::1\n300.1.2.3\n")
    out = netprobe("probe", "icmp", "-f", str(f))
    assert out.returncode == 2 and f"{f}:5: " in out.stderr and "300.1.2.3" in out.stderr


def test_icmp_invalid_host_is_a_usage_error() -> None:
    out = netprobe("probe", "icmp", "127.0.0.1", "a..b")
    assert out.returncode == 2 and out.stdout == "" and "'a..b' is not a valid host name" in out.stderr


def test_icmp_wrong_family() -> None:
    out = netprobe("probe", "icmp", "::1", "-4")
    assert out.returncode == 2 and "::1 is IPv6 but -4 asks for IPv4" in out.stderr


def test_icmp_bad_size() -> None:
    with pytest.raises(UsageError, match="--size: Input should be greater than or equal to 16"):
        build_settings(IcmpSettings, {"size": 1}, {"size": "--size"})
