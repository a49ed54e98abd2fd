"""The report's detected line: the newest stored mtr round with a route label, looked up per pair by
index (its newest rounds), on SQLite and on the real PostgreSQL server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from netprobe.store import Store, open_store
from netprobe.store.fleet import detected_lines
from tests.support.pg import scratch_database
from tests.support.report import NOW, mtr
from tests.support.store import path_events, typed

AGENT = "sh-ct-1"
SAMPLES: list[float | None] = [50.0, 51.0, 52.0]


def _round(minutes_ago: int, target: str, label: str, **changes: Any) -> dict[str, Any]:
    env = mtr(NOW - timedelta(minutes=minutes_ago), AGENT, target, SAMPLES, label, f"hash-{label}")
    result = env["result"]
    for key, value in changes.items():
        if key == "route":
            result["route"] = value
        else:
            result[key] = value
    return env


def _envelopes() -> list[dict[str, Any]]:
    envs = [
        # hk-cn2: the newest round is labelled
        _round(30, "hk-cn2", "bgp"), _round(10, "hk-cn2", "cn2-gia"),
        # hk-bgp: the newest three are unusable (not reached, in error, no hash): the one before counts
        _round(40, "hk-bgp", "163"), _round(30, "hk-bgp", "x", reached=False),
        _round(20, "hk-bgp", "y", status="error"), _round(10, "hk-bgp", "z", route={"label": "z"}),
        # us-cn2: labelled only after `now` (a report for an earlier time does not see it)
        _round(-30, "us-cn2", "cn2-gt"), _round(20, "us-cn2", "cn2-gia"),
        # tyo-cn2: no usable round among the newest 16: none
        _round(200, "tyo-cn2", "old"),
        *(_round(100 - i, "tyo-cn2", "n", reached=False) for i in range(16)),
    ]
    for env in envs:
        env["id"] = f"{env['target']['id']}-{env['started_at']}"
    return envs


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        s = await open_store(f"sqlite:///{tmp_path / 'lines.db'}")
        await s.write(typed(_envelopes()))
        yield s
        await s.close()
        return
    with scratch_database() as url:
        s = await open_store(url)
        await s.write(typed(_envelopes()))
        yield s
        await s.close()


async def test_newest_labelled_round_per_pair(store: Store) -> None:
    pairs = [(AGENT, t) for t in ("hk-cn2", "hk-bgp", "us-cn2", "tyo-cn2", "us-163")]
    got = await detected_lines(store, pairs, NOW)
    assert {k[1]: (v.label, v.source) for k, v in got.items()} == {
        "hk-cn2": ("cn2-gia", "mtr"), "hk-bgp": ("163", "mtr"), "us-cn2": ("cn2-gia", "mtr"),
        "tyo-cn2": ("old", "event")}      # no usable round among its newest 16: its last route event
    assert got[(AGENT, "hk-cn2")].seen_at == NOW - timedelta(minutes=10)
    later = await detected_lines(store, pairs, NOW + timedelta(hours=1))
    assert later[(AGENT, "us-cn2")].label == "cn2-gt"
    assert await detected_lines(store, [], NOW) == {}


def _return_round(minutes_ago: int, target: str, label: str) -> dict[str, Any]:
    """An rmtr round (the way back), otherwise as _round makes them."""
    env = _round(minutes_ago, target, label)
    env["probe"] = env["result"]["probe"] = "rmtr"
    env["id"] = f"rmtr-{env['id']}"
    return env


async def test_each_direction_has_its_own_detected_line(store: Store) -> None:
    """Newer return traces do not change the forward line; the return line is rmtr's own, from its
    rounds, else from its own route events."""
    await store.write(typed([_return_round(5, "hk-cn2", "163"), _return_round(50, "hk-bgp", "cmi"),
                             _return_round(3, "hk-bgp", "cn2-gt")]))
    pairs = [(AGENT, t) for t in ("hk-cn2", "hk-bgp", "us-cn2")]
    forward = await detected_lines(store, pairs, NOW)
    assert {k[1]: (v.label, v.source) for k, v in forward.items()} == {
        "hk-cn2": ("cn2-gia", "mtr"), "hk-bgp": ("163", "mtr"), "us-cn2": ("cn2-gia", "mtr")}
    back = await detected_lines(store, pairs, NOW, direction="return")
    assert {k[1]: (v.label, v.source) for k, v in back.items()} == {
        "hk-cn2": ("163", "rmtr"), "hk-bgp": ("cn2-gt", "rmtr")}
    changes = await path_events(store, target_id="hk-bgp", kind="path_change", direction="return")
    assert [(e.direction, e.old_hash, e.new_hash) for e in changes] == [("return", "hash-cmi", "hash-cn2-gt")]


async def test_report_rows_give_both_lines_and_whether_they_differ(store: Store) -> None:
    """report peak's JSON rows: line_fwd (mtr's), line_ret (rmtr's), asymmetric (None unless both)."""
    from netprobe.report.peak import peak_rows

    await store.write(typed([_return_round(5, "hk-cn2", "163"), _return_round(5, "hk-bgp", "163")]))
    rows = {r.target: r.to_dict() for r in await peak_rows(store, days=1, window="17-19", now=NOW)}
    got = {t: (r["line_fwd"], r["line_ret"], r["asymmetric"]) for t, r in rows.items()}
    assert got["hk-cn2"] == ("cn2-gia", "163", True)          # out on CN2 GIA, back on 163
    assert got["hk-bgp"] == ("163", "163", False)
    assert got["us-cn2"] == ("cn2-gia", None, None)            # no way back traced
    assert all(r["line_fwd"] == r["detected_line"] for r in rows.values())


async def test_report_pages_show_the_way_back(store: Store) -> None:
    """The table, Markdown and HTML gain a `back` column once a way back was traced (≠: not the line
    declared), and the line comparison names the way back where it is another line."""
    from netprobe.report.line_comparison import compare_lines
    from netprobe.report.peak import compute
    from netprobe.report.render_md import markdown

    before = markdown(await compute(store, days=1, window="17-19", now=NOW))
    assert "| back |" not in before                                      # nothing traced back yet
    await store.write(typed([_return_round(5, "hk-cn2", "163")]))
    report = await compute(store, days=1, window="17-19", now=NOW)
    md = markdown(report).splitlines()
    head = next(line for line in md if line.startswith("| region"))
    assert "| detected | back |" in head
    hk = next(line for line in md if "| hk-cn2 |" in line)
    assert "| cn2-gia | 163 ≠ |" in hk                                   # declared cn2-gia, back on 163
    labels = {(g.datacenter, g.line): g.label() for g in compare_lines(report.rows)}
    assert labels[("hk", "cn2-gia")] == "cn2-gia ↩ 163"
