"""Without the [server] or [influx] extra: a command that needs one exits 2 with one line naming it,
and an agent file that turns on what an extra provides is a configuration error naming the field.
The extras' modules are hidden from a real `netprobe` process by an import hook, as on a host that
has only `pip install netprobe`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from netprobe.extras import EXTRA_OF

HIDE = """
import sys
from importlib.abc import MetaPathFinder
HIDDEN = {hidden!r}
class Hide(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hide())
sys.argv = ["netprobe", *{args!r}]
from netprobe.cli import main
main()
"""

AGENT = """
[agent]
id = "a1"
region = "r"
isp = "i"
timezone = "UTC"
state_dir = "{state}"
{extra}
[[targets]]
id = "t1"
host = "127.0.0.1"
probes = ["icmp"]
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = HIDE.format(hidden=sorted(EXTRA_OF), args=list(args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["report", "peak", "--db", "sqlite:///{db}"],
                                  ["budget", "--ttft-ms", "1000", "--db", "sqlite:///{db}"],
                                  ["report", "peak", "--db", "sqlite:///{db}", "--json", "--days", "3"]])
def test_server_command_names_the_extra(tmp_path: Path, args: list[str]) -> None:
    out = _run(*(a.format(db=tmp_path / "x.db") for a in args))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    words = " ".join(a for a in args[:2] if not a.startswith("-"))
    assert lines == [f"error: netprobe {words} needs the 'server' extra: "
                     "pip install 'netprobe[server]'"], out.stderr


def test_collector_run_names_the_extra(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\nurl = "sqlite:///{tmp_path}/c.db"\n')
    out = _run("collector", "run", "--config", str(cfg))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("error: netprobe collector run needs the 'server' extra: "
                                  "pip install 'netprobe[server]'")


@pytest.mark.parametrize(("extra", "field", "name"), [
    ('[influxdb]\nurl = "http://127.0.0.1:8086"\n', "influxdb.url", "influx"),
    ('[storage]\nurl = "postgresql+psycopg://u@127.0.0.1/x"\n', "storage.url", "server"),
    ('[storage]\nurl = "postgres://u@127.0.0.1/x"\n', "storage.url", "server"),   # the store takes it too
    ('[[alerts]]\nname = "slo"\nmetric = "attainment_pct"\nop = "<"\nthreshold = 95\nnotify = ["log"]\n'
     '[[notifiers]]\nname = "log"\nkind = "log"\n',
     "alerts[0].metric", "server"),
])
def test_agent_config_names_the_field_and_the_extra(
        tmp_path: Path, extra: str, field: str, name: str) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT.format(state=tmp_path, extra=extra))
    out = _run("config", "check", str(cfg))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{field}: needs the '{name}' extra: pip install 'netprobe[{name}]'" in out.stderr, out.stderr


def test_the_agent_itself_needs_no_extra(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT.format(state=tmp_path, extra=""))
    out = _run("config", "check", str(cfg))
    assert out.returncode == 0, out.stderr
    out = _run("agent", "run", "--config", str(cfg), "--duration", "1")
    assert out.returncode == 0, out.stderr
    assert "agent stopped" in out.stderr
