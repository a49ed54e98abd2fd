"""A hostile client's envelopes: valid rounds of every probe, mutated many seeded ways (types swapped, a
JSON boolean for a count, null, negative, huge, NaN, strings with NUL, no time zone, samples that do not
match what was sent, ids such as ../../etc/passwd, unknown fields), sent to a real collector's
POST /api/v1/results and to `netprobe db import`. No answer is a 5xx, and every stored envelope is
well typed: checked here by hand, independently of the validator, and by the validator again."""

from __future__ import annotations

import copy
import json
import math
import random
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import available_timezones

import aiohttp
import pytest

from netprobe.collector.server import Collector
from netprobe.collector.tokens import Tokens
from netprobe.config.collector import parse_collector_config
from netprobe.probes import REGISTRY
from netprobe.store import open_store, parse_envelope
from tests.support.path_events import CN2, error_envelope, mtr_envelope
from tests.support.pg import scratch_database
from tests.support.report import dataset
from tests.support.store import icmp_envelope, owd_envelope

AGENT = "sh-ct-1"
NOW = datetime.now(UTC).replace(microsecond=0)
MUTANTS = 600
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_RESULT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")
_ZONES = available_timezones()


def originals() -> list[dict[str, Any]]:
    """Valid envelopes of every registered probe, from this agent, within the retention horizon."""
    envs = [icmp_envelope(NOW - timedelta(hours=1), [10.5, None, 12.25, 11.0]),
            mtr_envelope(NOW - timedelta(hours=1), CN2), error_envelope(NOW - timedelta(hours=1)),
            owd_envelope(NOW - timedelta(hours=1)),
            mtr_envelope(NOW - timedelta(hours=1), CN2, probe="rmtr")]
    seen: set[str] = set()
    for env in dataset(now=NOW, days=1):
        if env["probe"] not in seen:
            seen.add(env["probe"])
            envs.append(env)
    out = []
    for env in json.loads(json.dumps(envs)):
        env["agent"]["id"] = AGENT
        out.append(env)
    assert {e["probe"] for e in out} == set(REGISTRY)
    return out


# -- mutations ----------------------------------------------------------------------------------------

def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _parent(env: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = env
    for p in path[:-1]:
        node = node[p]
    return node


_VALUES: list[Any] = ["12.5", "", True, False, None, [], {}, 1.5, 7, 0, -1, -0.5, 2**70, 10**400, 1e308,
                      math.nan, math.inf, "a\x00b", "../../etc/passwd", "2026-11-20T12:00:00", [None],
                      {"x": 1}, "Mars/Olympus", 4.0]


def mutate(rng: random.Random, env: dict[str, Any]) -> dict[str, Any]:
    env = copy.deepcopy(env)
    kind = rng.randrange(10)
    result = env["result"]
    if kind == 0 and isinstance(result.get("samples_ms"), list):        # samples not matching sent
        samples = result["samples_ms"]
        if samples and rng.random() < 0.5:
            samples.pop()
        else:
            samples.append(rng.choice([5.0, None]))
    elif kind == 1 and "received" in result:
        result["received"] = result.get("sent", 0) + rng.choice([1, 5])
    elif kind == 2:
        env[rng.choice(["agent", "target"])]["id" if rng.random() < 0.7 else "host"] = rng.choice(
            ["../../etc/passwd", "a b", "", "x" * 65, "é", "/etc", "a\x00"])
    elif kind == 3:
        stamp = env["started_at"]
        env["started_at"] = stamp.rstrip("Z") if rng.random() < 0.5 else stamp.replace("T", " ")
        if rng.random() < 0.5:
            result["started_at"] = env["started_at"]
    elif kind == 4:
        env["agent"]["timezone"] = rng.choice(["Mars/Olympus", "", "../../etc/localtime", "UTC\x00", 8])
    elif kind == 5:
        _parent(env, path := rng.choice(list(_paths(env))))[path[-1]] = "\x00"
    elif kind == 6:                                                       # an unknown field somewhere
        dicts = [(), *(p for p in _paths(env) if isinstance(_get(env, p), dict))]
        target = _get(env, rng.choice(dicts))
        target[rng.choice(["zz", "rtt", "extra", "Loss"])] = rng.choice(_VALUES)
    elif kind == 7:
        path = rng.choice(list(_paths(env)))
        parent = _parent(env, path)
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = None
    else:                                                                 # a value of another type or range
        for _ in range(rng.randrange(1, 4)):
            path = rng.choice(list(_paths(env)))
            _parent(env, path)[path[-1]] = rng.choice(_VALUES)
    return env


def _get(env: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        env = env[p]
    return env


def mutants() -> list[dict[str, Any]]:
    rng = random.Random(11)
    base = originals()
    out = []
    for i in range(MUTANTS):
        env = mutate(rng, base[i % len(base)])
        if isinstance(env.get("id"), str) and _ID.match(env["id"]):
            env["id"] = f"{env['id'][:40]}-m{i}"        # a duplicate id would hide what is stored
        out.append(env)
    return out


# -- what a well-typed stored envelope is, said without the validator --------------------------------------

def _nul_free(node: Any) -> bool:
    if isinstance(node, str):
        return "\x00" not in node
    if isinstance(node, dict):
        return all(_nul_free(k) and _nul_free(v) for k, v in node.items())
    if isinstance(node, list):
        return all(_nul_free(v) for v in node)
    return True


def _real(v: Any) -> bool:
    return (type(v) is int and 0 <= v < 2**1023) or (type(v) is float and math.isfinite(v) and v >= 0)


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def problems(env: dict[str, Any]) -> list[str]:
    try:
        return _problems(env)
    except (AttributeError, TypeError, KeyError) as exc:          # not even an envelope's shape
        return [f"shape: {exc!r}"]


def _problems(env: dict[str, Any]) -> list[str]:
    out = []
    if set(env) != {"id", "probe", "started_at", "agent", "target", "result"}:
        out.append(f"keys {sorted(env)}")
    if not _nul_free(env):
        out.append("NUL")
    for who in ("agent", "target"):
        if not isinstance(env[who].get("id"), str) or not _ID.match(env[who]["id"]):
            out.append(f"{who}.id {env[who].get('id')!r}")
    if not _RESULT_ID.match(env["id"]):
        out.append(f"id {env['id']!r}")
    if not isinstance(env["started_at"], str) or not _STAMP.match(env["started_at"]):
        out.append(f"started_at {env['started_at']!r}")
    zone = env["agent"].get("timezone")
    if zone is not None and zone not in _ZONES:
        out.append(f"timezone {zone!r}")
    r = env["result"]
    if r.get("status") not in ("ok", "down", "error"):
        out.append(f"status {r.get('status')!r}")
    for name in ("sent", "received", "duplicates", "late", "events", "stalls", "bytes", "cycles", "max_hops"):
        if name in r and not _count(r[name]):
            out.append(f"{name} {r[name]!r}")
    for name in ("loss_pct", "jitter_ms", "duration_ms", "dns_ms", "connect_ms", "ttfb_ms", "first_event_ms"):
        if r.get(name) is not None and not isinstance(r[name], dict) and not _real(r[name]):
            out.append(f"{name} {r[name]!r}")
    rtt = r.get("rtt_ms")
    if rtt is not None and not (isinstance(rtt, dict) and rtt and all(_real(v) for v in rtt.values())):
        out.append(f"rtt_ms {rtt!r}")
    samples = r.get("samples_ms", [])
    if not isinstance(samples, list) or not all(v is None or _real(v) for v in samples):
        out.append(f"samples_ms {samples!r}")
    elif _count(r.get("sent")) and _count(r.get("received")):
        if r["received"] > r["sent"]:
            out.append("received > sent")
        if samples and len(samples) != r["sent"]:
            out.append("samples_ms vs sent")
    if r.get("probe", env["probe"]) != env["probe"]:
        out.append("probe")
    for hub in r["report"]["hubs"] if env["probe"] == "mtr" and "report" in r else []:
        if not (_count(hub.get("Snt")) and _real(hub.get("Loss%")) and isinstance(hub.get("host"), str)):
            out.append(f"hub {hub!r}")
    return out


def test_the_originals_are_well_typed_and_the_mutants_mostly_not() -> None:
    assert all(problems(e) == [] for e in originals())
    bad = [m for m in mutants() if problems(m)]
    assert len(bad) > MUTANTS // 2


# -- the collector ------------------------------------------------------------------------------------

@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/fuzz.db"
    else:
        with scratch_database() as url:
            yield url


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[Collector, str]]:
    collector = Collector(parse_collector_config(
        f'[collector]\nlisten = "127.0.0.1:0"\ngrace = "3s"\n[storage]\nurl = "{db_url}"\n'))
    await collector.start()
    try:
        assert collector.store is not None
        token, _ = await Tokens(collector.store).issue(AGENT)
        yield collector, token
    finally:
        await collector.stop()


def _body(env: dict[str, Any]) -> bytes:
    return json.dumps([env]).encode()        # NaN and Infinity as Python writes them: bad JSON, a 400


async def test_mutated_envelopes_get_no_5xx_and_nothing_ill_typed_is_stored(
        served: tuple[Collector, str]) -> None:
    collector, token = served
    url = f"{collector.url}/api/v1/results"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    statuses: dict[int, int] = {}
    accepted: list[dict[str, Any]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for env in mutants():
            async with session.post(url, data=_body(env), headers=headers) as resp:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
                body = await resp.json()
                assert resp.status < 500, (resp.status, body, env)
                if resp.status == 200 and body["accepted"]:
                    accepted.append(env)
                elif resp.status == 400:
                    assert body["error"].startswith(("envelope 0: ", "malformed JSON")), body
        for env in originals():                  # the originals go in whole, as they are
            async with session.post(url, data=_body(env), headers=headers) as resp:
                assert resp.status == 200, await resp.text()
    assert statuses.get(400, 0) > MUTANTS // 2 and accepted, statuses
    assert all(problems(env) == [] for env in accepted), [(problems(e), e) for e in accepted if problems(e)]
    assert collector.store is not None
    stored = [r.envelope.raw for r in await collector.store.results()]
    assert len(stored) == len(accepted) + len(originals())
    for env in stored:
        assert problems(env) == [], (problems(env), env)
        parse_envelope(env)


# -- db import ----------------------------------------------------------------------------------------

def test_db_import_skips_every_ill_typed_line_and_stores_the_rest(db_url: str, tmp_path: Path) -> None:
    """One line per mutant among the originals, in one batch: each bad line is reported and skipped,
    and the rest are stored (a NUL once made PostgreSQL refuse the whole batch)."""
    src = tmp_path / "fuzz.jsonl"
    lines = [json.dumps(env) for env in originals()] + [json.dumps(env) for env in mutants()]
    src.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "db", "import", str(src), "--db", db_url],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    skipped = re.findall(rf"{re.escape(str(src))}:(\d+): .* \(line skipped\)", out.stderr)
    imported = int(re.search(r"imported (\d+) results", out.stdout).group(1))   # type: ignore[union-attr]
    assert imported + len(skipped) == len(lines), out.stdout
    assert all(int(n) > len(originals()) for n in skipped)          # the originals all went in

    async def stored() -> list[dict[str, Any]]:
        store = await open_store(db_url)
        try:
            return [r.envelope.raw for r in await store.results()]
        finally:
            await store.close()

    import asyncio

    rows = asyncio.run(stored())
    assert len(rows) == imported
    for env in rows:
        assert problems(env) == [], (problems(env), env)
        parse_envelope(env)


def test_a_nul_in_one_line_loses_no_other_line(db_url: str, tmp_path: Path) -> None:
    envs = originals()
    bad = copy.deepcopy(envs[0])
    bad["id"], bad["result"]["error"] = "nul-line", "bad\x00byte"
    src = tmp_path / "nul.jsonl"
    src.write_text("\n".join(json.dumps(e) for e in [*envs[:2], bad, *envs[2:]]) + "\n")
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "db", "import", str(src), "--db", db_url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{src}:3: " in out.stderr and "\\u0000" in out.stderr and "result.error" in out.stderr, out.stderr
    assert f"imported {len(envs)} results" in out.stdout and "1 bad lines skipped" in out.stdout, out.stdout
