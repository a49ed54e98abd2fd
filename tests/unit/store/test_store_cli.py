"""`netprobe db upgrade` and `netprobe db import`, run as a user would (subprocess)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from netprobe.cli import app
from netprobe.errors import UsageError
from netprobe.store import open_store
from netprobe.store.migrate import head_revision
from tests.support.store import count_results, icmp_envelope, window_stats

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
            stats = await window_stats(store, None, None, "icmp", T0, T0 + timedelta(hours=1))
            return await count_results(store), stats.rounds if stats else 0
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


def test_db_import_reports_bad_lines_by_number_skips_them_and_keeps_the_rest(tmp_path: Path) -> None:
    good = [json.dumps(icmp_envelope(T0 + timedelta(minutes=i), [5.0])) for i in range(4)]
    bad_field = icmp_envelope(T0, [5.0])
    bad_field["result"]["sent"] = "many"
    url = f"sqlite:///{tmp_path / 'b.db'}"
    src = tmp_path / "bad.jsonl"
    lines = [good[0], "{not json", good[1], json.dumps(bad_field), "", "[1, 2]", good[2],
             json.dumps({**json.loads(good[3]), "agent": {}})]
    _write_jsonl(src, lines)
    with src.open("ab") as fh:
        fh.write(b"\xff\xfe not utf-8\n")
    out = netprobe("db", "import", str(src), "--db", url)
    assert out.returncode == 1, out.stdout + out.stderr
    err = _flat(out.stderr)
    for message in (f"{src}:2: not JSON", f"{src}:4: result.sent", f"{src}:6: expected a JSON object",
                    f"{src}:8: agent.id", f"{src}:9: not UTF-8"):
        assert message in err, err
    assert "Traceback" not in err and "5 bad lines skipped" in out.stdout
    assert _count(url) == (3, 3)  # every good line, the bad ones around them notwithstanding
    missing = CliRunner().invoke(app, ["db", "import", str(tmp_path / "nope.jsonl"), "--db", url])
    assert isinstance(missing.exception, UsageError) and "nope.jsonl" in str(missing.exception)


ATLAS_PING = {"fw": 5080, "type": "ping", "prb_id": 6012, "msm_id": 1001, "timestamp": 1763668800,
              "from": "101.80.1.2", "dst_addr": "198.51.100.7", "dst_name": "hk1.example.net", "af": 4,
              "proto": "ICMP", "sent": 3, "rcvd": 2,
              "result": [{"rtt": 38.2}, {"x": "*"}, {"rtt": 40.1}, {"dup": 1, "rtt": 40.3}]}
ATLAS_TRACE = {"fw": 5080, "type": "traceroute", "prb_id": 6012, "msm_id": 1002, "timestamp": 1763668900,
               "from": "101.80.1.2", "dst_addr": "198.51.100.7", "dst_name": "hk1.example.net",
               "proto": "ICMP",
               "result": [
                   {"hop": 1, "result": [{"from": "101.80.1.1", "rtt": 1.1}] * 3},
                   {"hop": 2, "result": [{"from": "59.43.130.197", "rtt": 9.0}, {"x": "*"},
                                         {"from": "59.43.130.197", "rtt": 9.4}]},
                   {"hop": 3, "result": [{"x": "*"}] * 3},
                   {"hop": 4, "result": [{"from": "59.43.187.22", "rtt": 30.0}] * 3},
                   {"hop": 5, "result": [{"from": "198.51.100.7", "rtt": 38.0}] * 3}]}


def test_db_import_maps_ripe_atlas_ping_and_traceroute(tmp_path: Path) -> None:
    src = tmp_path / "atlas.jsonl"
    _write_jsonl(src, [json.dumps(ATLAS_PING), json.dumps(ATLAS_TRACE),
                       json.dumps({**ATLAS_PING, "timestamp": "soon"})])
    url = f"sqlite:///{tmp_path / 'a.db'}"
    out = netprobe("db", "import", str(src), "--db", url)
    assert out.returncode == 1 and f"{src}:3: an Atlas result needs" in _flat(out.stderr), out.stderr
    assert "imported 2 results" in out.stdout
    again = netprobe("db", "import", str(src), "--db", url)
    assert "imported 0 results" in again.stdout and "2 duplicates" in again.stdout  # stable ids

    async def rows() -> list[dict[str, object]]:
        store = await open_store(url)
        try:
            return [r.envelope.raw for r in await store.results("atlas-6012")]
        finally:
            await store.close()

    ping, trace = sorted(asyncio.run(rows()), key=lambda e: str(e["probe"]))
    p = ping["result"]
    assert ping["agent"]["id"] == "atlas-6012" and ping["target"]["id"] == "hk1.example.net"  # type: ignore[index]
    assert p["samples_ms"] == [38.2, None, 40.1] and p["duplicates"] == 1  # type: ignore[index]
    assert p["loss_pct"] == 100 / 3  # type: ignore[index]
    t = trace["result"]
    hubs = t["report"]["hubs"]  # type: ignore[index]
    assert [h["host"] for h in hubs] == ["101.80.1.1", "59.43.130.197", "???", "59.43.187.22", "198.51.100.7"]
    assert hubs[1]["Loss%"] == 100 / 3 and hubs[1]["rate_limited"] and hubs[2]["rate_limited"]
    assert t["reached"] and t["loss_pct"] == 0.0 and t["route"]["label"] == "cn2-gia"  # type: ignore[index]
