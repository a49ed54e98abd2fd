"""A fleet's HTML page drawn in two processes (report/aside.py): the page is the same text as drawn in
one, also when the child fails or the page is abandoned half-written; with a real fork, on a real store."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from netprobe.report import render_html, svg
from netprobe.report.peak import PeakReport
from netprobe.report.render_html import html, html_chunks
from tests.support.report import dataset, slo_report, write_all


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> PeakReport:
    url = f"sqlite:///{tmp_path_factory.mktemp('aside') / 'a.db'}"
    asyncio.run(write_all(url, dataset(days=8, targets=("hk-cn2", "hk-bgp", "us-163"), extras=False, seed=9)))
    got = asyncio.run(slo_report(url))
    assert len(got.rows) == 6 and all(r.slo is not None and r.slo.curve for r in got.rows)
    return got


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The children forked (real forks), with the page drawn aside from its first row on."""
    made: list[int] = []
    fork = os.fork

    def counted() -> int:
        pid = fork()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counted)
    monkeypatch.setattr(render_html, "ASIDE_ROWS", 1)
    return made


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_page_drawn_aside_is_the_page(report: PeakReport, forks: list[int]) -> None:
    whole = html(report)
    assert "".join(html_chunks(report, aside=True)) == whole
    assert len(forks) == 1 and _gone(forks[0])
    assert "SLO attainment by hour" in whole and "Lines compared" in whole and "Loss % by local hour" in whole


def test_small_page_is_drawn_here(report: PeakReport, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("a page of 6 rows forked")

    monkeypatch.setattr(os, "fork", no_fork)
    assert "".join(html_chunks(report, aside=True)) == html(report)


def test_a_failed_child_is_drawn_here(report: PeakReport, forks: list[int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    here = os.getpid()
    draw: Callable[..., str] = svg.attainment_hours

    def only_here(*args: object) -> str:
        if os.getpid() != here:
            raise RuntimeError("the child fails")
        return draw(*args)

    monkeypatch.setattr(svg, "attainment_hours", only_here)
    assert "".join(html_chunks(report, aside=True)) == html(report)
    assert len(forks) == 1 and _gone(forks[0])


def test_an_abandoned_page_leaves_no_child(report: PeakReport, forks: list[int], tmp_path: Path) -> None:
    chunks = html_chunks(report, aside=True)
    (tmp_path / "head.html").write_text(next(chunks) + next(chunks), encoding="utf-8")
    assert len(forks) == 1
    chunks.close()
    assert _gone(forks[0])
