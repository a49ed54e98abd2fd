"""The agent daemon's import set: a long-running process keeps every module it imported, so
`netprobe agent run` must not import what it never uses (bench/agent_footprint.py measures the RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from netprobe.store.migrate import head_revision
from netprobe.store.migrate import script_head as _script_head

# Never needed by an agent without [alerts], [influxdb] or [geoip] on a database at the head
# (ripe.atlas.sagan is not listed: its namespace-package .pth imports `ripe` at interpreter start).
NOT_IMPORTED = ("alembic", "mako", "pygments", "rich", "markdown_it", "geoip2", "maxminddb",
                "influxdb_client", "psycopg",
                "netprobe.lab", "netprobe.report", "netprobe.collector", "netprobe.alerts.engine",
                "netprobe.alerts.notify", "netprobe.store.cli", "netprobe.probes.cli",
                "netprobe.probes.cli_common", "netprobe.demo",
                "netprobe.agent.summary",
                # the root imports only the agent group's module: click (small) but not typer
                "typer",
                # SQLite through sqlite3 on worker threads (netprobe.store.engine.ThreadedEngine)
                "aiosqlite", "greenlet",
                # the exporter writes its text itself (prometheus_client is the tests' reference only)
                "prometheus_client",
                # the wire validator: the agent stores its own rounds, typed by construction
                "netprobe.store.wire",
                # the ORM and sqlalchemy.ext.asyncio (which imports it): netprobe.store.engine has its own
                # thin async engine over Core
                "sqlalchemy.orm", "sqlalchemy.ext.asyncio",
                # SQLAlchemy's PostgreSQL dialects: the agent here stores in SQLite
                "sqlalchemy.dialects.postgresql",
                # NumPy is the reports' (the fold the agent runs writes the arrays without it)
                "numpy", "netprobe.store.hour_arrays",
                # the uplink and the sse probe speak HTTP through netprobe.net.http1 (aiohttp's client,
                # yarl, multidict and attrs were about 9 MB)
                "aiohttp", "yarl", "multidict", "attr")

RUN = """
import atexit, json, sys
out, config = sys.argv[1:3]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["netprobe", "agent", "run", "--config", config, "--duration", "1"]
from netprobe.cli import main
main()
"""

AGENT = """
[agent]
id = "footprint"
region = "test"
isp = "lo"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[uplink]
url = "http://127.0.0.1:1"
token = "not-used"

[probes.tcp]
every = "1s"
count = 1
interval = "0.1s"
timeout = "0.2s"

[[targets]]
id = "closed"
host = "127.0.0.1"
datacenter = "lo"
probes = ["tcp", "sse"]
tcp_port = 1
sse_url = "http://127.0.0.1:1/sse"

[probes.sse]
every = "1s"
timeout = "0.5s"
"""


def test_script_head_is_alembics_head() -> None:
    assert _script_head() == head_revision()


def test_agent_run_does_not_import_what_it_never_uses(tmp_path: Path) -> None:
    db, cfg, out = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "modules.json"
    cfg.write_text(AGENT.format(db=db))
    cli = [sys.executable, "-m", "netprobe.cli"]
    subprocess.run([*cli, "db", "upgrade", "--db", f"sqlite:///{db}"], check=True, capture_output=True,
                   timeout=60)
    run = subprocess.run([sys.executable, "-c", RUN, str(out), str(cfg)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert "msg=round" in run.stderr  # it really probed and stored
    modules = json.loads(out.read_text())
    loaded = sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED))
    assert loaded == []


def test_bad_agent_run_arguments_exit_2_naming_the_option(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "netprobe.cli", "agent", "run"]
    bad = subprocess.run([*cli, "--config", str(tmp_path / "a.toml"), "--duration", "0.05"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--duration" in bad.stderr
    missing = subprocess.run([*cli, "--duration", "5"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--config" in missing.stderr
