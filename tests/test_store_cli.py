"""`netprobe db upgrade` and `netprobe db import`, run as a user would (subprocess)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_store_helpers import icmp_envelope
from typer.testing import CliRunner

from netprobe.cli import app
from netprobe.errors import UsageError
from netprobe.store import open_store
from netprobe.store.migrate import head_revision

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def netprobe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_db_upgrade_creates_and_reports_the_revision(tmp_path: Path) -> None:
    db = tmp_path / "state" / "netprobe.db"
    out = netprobe("db", "upgrade", "--db", f"sqlite:///{db}")
    assert out.returncode == 0, out.stderr
    assert f"at revision {head_revision()} (head)" in out.stdout
    assert db.is_file()
    again = netprobe("db", "upgrade", "--db", "sqlite:///rel.db", cwd=tmp_path)
    assert again.returncode == 0 and (tmp_path / "rel.db").is_file()


def test_db_upgrade_bad_url_or_unreachable_server_says_so_without_traceback() -> None:
    bad = netprobe("db", "upgrade", "--db", "mysql://root@localhost/x")
    assert bad.returncode == 2
    assert "unsupported database" in _flat(bad.stderr) and "Traceback" not in bad.stderr
    down = netprobe("db", "upgrade", "--db", "postgresql://netprobe:s3cret@127.0.0.1:1/x")
    assert down.returncode == 1
    assert "127.0.0.1" in down.stderr and "Traceback" not in down.stderr
    assert "s3cret" not in down.stderr


def _flat(text: str) -> str:
    """The error console wraps long lines; read the message as one line."""
    return text.replace("\n", "")


def _write_jsonl(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def _count(url: str) -> tuple[int, int]:
    """Raw rounds stored, and rounds in the hour rollups, read back through the store."""
    async def run() -> tuple[int, int]:
        store = await open_store(url)
        try:
            stats = await store.window_stats(None, None, "icmp", T0, T0 + timedelta(hours=1))
            return await store.count_results(), stats.rounds if stats else 0
        finally:
            await store.close()
    return asyncio.run(run())


def test_db_import_stores_each_envelope_once(tmp_path: Path) -> None:
    envs = [icmp_envelope(T0 + timedelta(minutes=i), [20.0, 21.5]) for i in range(30)]
    src = tmp_path / "results.jsonl"
    _write_jsonl(src, [json.dumps(e) for e in envs[:20]] + [""] + [json.dumps(e) for e in envs[10:]])
    url = f"sqlite:///{tmp_path / 'i.db'}"
    out = netprobe("db", "import", str(src), "--db", url)
    assert out.returncode == 0, out.stderr
    assert "imported 30 results" in out.stdout and "10 duplicates" in out.stdout
    again = CliRunner().invoke(app, ["db", "import", str(src), "--db", url])
    assert again.exit_code == 0 and "imported 0 results" in again.output
    assert _count(url) == (30, 30)


def test_db_import_names_the_bad_line_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    good = [json.dumps(icmp_envelope(T0 + timedelta(minutes=i), [5.0])) for i in range(3)]
    url = f"sqlite:///{tmp_path / 'b.db'}"
    src = tmp_path / "bad.jsonl"
    _write_jsonl(src, [good[0], good[1], "{not json", good[2]])
    out = netprobe("db", "import", str(src), "--db", url)
    assert out.returncode == 2, out.stdout + out.stderr
    err = _flat(out.stderr)
    assert f"{src}:3: not JSON" in err and "Traceback" not in err

    bad_field = icmp_envelope(T0, [5.0])
    bad_field["result"]["sent"] = "many"
    for lines, message in (
        ([good[0], json.dumps(bad_field)], f"{src}:2: result.sent"),
        ([good[0], "", "[1, 2]"], f"{src}:3: expected a JSON object"),
        ([good[0], json.dumps({**json.loads(good[1]), "agent": {}})], f"{src}:2: agent.id"),
    ):
        _write_jsonl(src, lines)
        result = CliRunner().invoke(app, ["db", "import", str(src), "--db", url])
        assert isinstance(result.exception, UsageError), result.output
        assert result.exception.exit_code == 2 and message in str(result.exception)
    missing = CliRunner().invoke(app, ["db", "import", str(tmp_path / "nope.jsonl"), "--db", url])
    assert isinstance(missing.exception, UsageError) and "nope.jsonl" in str(missing.exception)
    assert _count(url) == (0, 0)
