"""A fleet's HTML page drawn in two processes (report/aside.py): the page is the same text as drawn in
one — to a file, to a pipe, when the child fails, when nothing can be forked — and a page given up
half-written leaves no child behind; with real forks, on a real store."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from netprobe.report import render_html, svg
from netprobe.report.peak import PeakReport
from netprobe.report.render_html import html, write_html
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


def _written(report: PeakReport, path: Path, aside: bool = True) -> str:
    with path.open("w", encoding="utf-8") as fh:
        write_html(report, fh, aside=aside)
    return path.read_text(encoding="utf-8")


def test_page_drawn_aside_is_the_page(report: PeakReport, forks: list[int], tmp_path: Path) -> None:
    whole = html(report)
    assert _written(report, tmp_path / "p.html") == whole
    assert len(forks) == 1 and _gone(forks[0])
    assert "SLO attainment by hour" in whole and "Lines compared" in whole and "Loss % by local hour" in whole


def test_page_drawn_aside_down_a_pipe(report: PeakReport, forks: list[int], tmp_path: Path) -> None:
    copy = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"
    with (tmp_path / "out.html").open("wb") as into:
        reader = subprocess.Popen([sys.executable, "-c", copy], stdin=subprocess.PIPE, stdout=into)
        assert reader.stdin is not None
        with open(reader.stdin.fileno(), "w", encoding="utf-8", closefd=False) as pipe:
            write_html(report, pipe, aside=True)
        reader.stdin.close()
        assert reader.wait(timeout=60) == 0
    assert (tmp_path / "out.html").read_text(encoding="utf-8") == html(report)
    assert len(forks) == 1 and _gone(forks[0])


def test_small_page_or_no_file_is_drawn_here(report: PeakReport, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    def no_fork() -> int:
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    assert _written(report, tmp_path / "small.html") == html(report)      # 6 rows: below ASIDE_ROWS
    monkeypatch.setattr(render_html, "ASIDE_ROWS", 1)
    text = io.StringIO()                                                # no file descriptor under it
    write_html(report, text, aside=True)
    assert text.getvalue() == html(report)
    with (tmp_path / "latin.html").open("w", encoding="latin-1", errors="replace") as fh:
        write_html(report, fh, aside=True)                              # not UTF-8: drawn here too


def test_a_failed_child_is_drawn_here(report: PeakReport, forks: list[int],
                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    here = os.getpid()
    draw: Callable[..., str] = svg.attainment_hours

    def only_here(*args: object) -> str:
        if os.getpid() != here:
            raise RuntimeError("the child fails")
        return draw(*args)

    monkeypatch.setattr(svg, "attainment_hours", only_here)
    assert _written(report, tmp_path / "f.html") == html(report)
    assert len(forks) == 1 and _gone(forks[0])


def test_a_page_given_up_leaves_no_child(report: PeakReport, forks: list[int], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(svg, "profile_chart", full)          # this process's half fails
    with pytest.raises(OSError, match="No space"):
        _written(report, tmp_path / "g.html")
    assert len(forks) == 1 and _gone(forks[0])
    assert "SLO attainment by hour" not in (tmp_path / "g.html").read_text(encoding="utf-8")
