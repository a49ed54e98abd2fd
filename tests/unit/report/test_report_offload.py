"""A fleet's SLO figures computed in a forked worker (report/offload.py): the same report as computed
inline, the jobs really run in another process (those it has not started when they are awaited run
here), and a job's error is the report's."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from netprobe.budget.attainment import SloModel
from netprobe.report import peak
from netprobe.report.offload import Offload
from netprobe.report.slo import SloFigures, SloJob, SloRequest, slo_figures
from netprobe.stats import LogNormal
from netprobe.store import open_store
from tests.support.report import NOW, dataset, write_all

PIDS = "NETPROBE_TEST_SLO_PIDS"
SLO = SloRequest(SloModel(250.0), server=LogNormal.through(40.0, 90.0), outcome=True, hours=True, curve=True)


def _recording(job: SloJob) -> dict[int, SloFigures]:
    with Path(os.environ[PIDS]).open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    return slo_figures(job)


def _failing(job: SloJob) -> dict[int, SloFigures]:
    raise ValueError(f"no figures for {len(job.rows)} series")


async def _report(url: str, offload: bool) -> dict[str, Any]:
    store = await open_store(url)
    try:
        return (await peak.compute(store, days=7, window="22-2", offpeak="3-6", now=NOW, slo=SLO,
                                   offload=offload)).to_dict()
    finally:
        await store.close()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = f"sqlite:///{tmp_path_factory.mktemp('offload') / 'fleet.db'}"
    asyncio.run(write_all(db, dataset(days=8, seed=5)))
    return db


def test_worker_figures_are_the_inline_ones(url: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    inline = asyncio.run(_report(url, offload=False))
    assert inline["rows"] and all(r["slo"]["hours"] and r["slo"]["e2e_ttft_ms"] for r in inline["rows"])
    pids = tmp_path / "pids"
    monkeypatch.setenv(PIDS, str(pids))
    monkeypatch.setattr(peak, "slo_figures", _recording)
    monkeypatch.setattr(peak, "OFFLOAD_SERIES", 1)      # a fleet from one series: the worker runs
    assert asyncio.run(_report(url, offload=True)) == inline
    ran = {int(p) for p in pids.read_text().split()}
    assert ran - {os.getpid()}          # the worker's (the parent may have taken the last jobs back)

    pids.unlink()
    assert asyncio.run(_report(url, offload=False)) == inline    # not allowed: here, whatever the size
    assert {int(p) for p in pids.read_text().split()} == {os.getpid()}


def test_a_small_report_stays_in_this_process(url: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv(PIDS, str(pids))
    monkeypatch.setattr(peak, "slo_figures", _recording)
    asyncio.run(_report(url, offload=True))     # a few series, under OFFLOAD_SERIES
    assert {int(p) for p in pids.read_text().split()} == {os.getpid()}


def test_a_worker_error_is_the_reports(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak, "slo_figures", _failing)
    monkeypatch.setattr(peak, "OFFLOAD_SERIES", 1)
    with pytest.raises(ValueError, match="no figures for"):
        asyncio.run(_report(url, offload=True))


def _slow(path: str) -> int:
    Path(path).write_text(str(os.getpid()))
    time.sleep(0.3)
    return os.getpid()


def _wait_started(path: Path) -> int:
    """The pid of the process that began the job writing `path`."""
    deadline = time.monotonic() + 30
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return int(path.read_text())


async def _started(path: Path) -> int:
    return await asyncio.to_thread(_wait_started, path)


async def _share(tmp_path: Path) -> list[int]:
    with Offload(True) as offload:
        jobs = [offload.run(_slow, str(tmp_path / f"started-{k}")) for k in range(6)]
        await _started(tmp_path / "started-0")           # the worker has begun the first
        return [await job.result() for job in reversed(jobs)]


def test_jobs_the_worker_has_not_started_run_here(tmp_path: Path) -> None:
    pids = asyncio.run(_share(tmp_path))
    assert pids[0] == os.getpid()                       # the last job: taken back
    assert pids[-1] != os.getpid()                      # the first: the worker's
    assert len(set(pids)) == 2


async def _killed(tmp_path: Path) -> list[int]:
    with Offload(True) as offload:
        jobs = [offload.run(_slow, str(tmp_path / f"started-{k}")) for k in range(4)]
        os.kill(await _started(tmp_path / "started-0"), signal.SIGKILL)
        return [await job.result() for job in jobs]


def test_a_dead_worker_loses_no_job(tmp_path: Path) -> None:
    assert asyncio.run(_killed(tmp_path)) == [os.getpid()] * 4
