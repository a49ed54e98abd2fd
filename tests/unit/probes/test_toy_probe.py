"""A probe is one plugin: a toy probe defined here, registered in REGISTRY and nowhere else, runs
through config → agent (real scheduler, real SQLite store) → hourly rollups → `report peak` JSON and
the dashboard's target page (its smoke graph and its own figure table)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import Field

from netprobe.agent.daemon import Agent
from netprobe.cli import app
from netprobe.config.agent import load_config
from netprobe.dashboard.target import target_page
from netprobe.probes import REGISTRY
from netprobe.probes.base import (
    AlertMetric,
    PageFigure,
    PageTable,
    ProbeContext,
    ProbeSpec,
    ProbeTarget,
    ReportRole,
    RollupFigure,
    TargetOption,
)
from netprobe.probes.results import ProbeResult
from netprobe.probes.settings import RoundSettings
from netprobe.stats import jitter, loss_pct
from netprobe.store import open_store
from netprobe.times import timer_slack, utc_now
from tests.support.target_page import table

# -- the toy probe: what a new probe module holds ------------------------------------------------------


class ToySettings(RoundSettings):
    count: int = Field(default=4, ge=1, le=100, description="pretend requests per round")
    base_ms: float = Field(default=10.0, gt=0, description="the pretend RTT")


@dataclass(slots=True)
class ToyResult(ProbeResult):
    port: int = 0
    sent: int = 0
    received: int = 0
    loss_pct: float = 0.0
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)
    widgets: float = 0.0                     # a figure of its own, summed into its rollup's extras

    def to_dict(self) -> dict[str, Any]:
        # exactly its fields: the store's envelope validator is derived from them (netprobe.store.wire)
        d = ProbeResult.to_dict(self)
        d.update(port=self.port, sent=self.sent, received=self.received, loss_pct=self.loss_pct,
                 jitter_ms=self.jitter_ms, samples_ms=list(self.samples_ms), widgets=self.widgets)
        return d


async def run(target: ProbeTarget, settings: ToySettings, ctx: ProbeContext) -> ToyResult:
    # no network: one lost request in every round, the others base_ms, base_ms + 1, …
    samples: list[float | None] = [None, *(settings.base_ms + i for i in range(settings.count - 1))]
    got = [s for s in samples if s is not None]
    return ToyResult(probe="toy", host=target.host, started_at=utc_now(), status="ok", port=target.port or 0,
                     sent=len(samples), received=len(got), loss_pct=loss_pct(len(samples), len(got)),
                     jitter_ms=jitter(samples), samples_ms=samples,
                     widgets=float(target.port or 0) * float(str(target.option("toy_scale"))))


def extras(result: ProbeResult) -> list[tuple[str, float]]:
    return [("widgets", result.widgets)] if isinstance(result, ToyResult) else []


SPEC = ProbeSpec(
    name="toy", settings_model=ToySettings, run=run, result_type=ToyResult,
    target_options=(TargetOption(key="toy_port", annotation=int, fills="port",
                                 field=Field(default=7, ge=1, le=65535, description="the toy's port")),
                    # an option that fills no ProbeTarget slot: the probe reads it by key
                    TargetOption(key="toy_scale", annotation=float,
                                 field=Field(default=1.0, gt=0, description="widgets per port"))),
    rollup_extras=extras, rollup_figures=(RollupFigure("toy_widgets", "widgets"),),
    report=ReportRole(rtt_rank=5, figures=(("toy_widgets", "toy_widgets"), ("toy_p95_ms", "rtt_p95_ms")),
                      on_row=("toy_widgets",)),
    alert_metrics=(AlertMetric("loss_pct", rank=5),),
    page=PageTable("Toy", "Toy widgets", (PageFigure("widgets per round", "toy_widgets", "rate"),
                                          PageFigure("toy P50, ms", "rtt_p50_ms"),
                                          PageFigure("rounds (failed)", "rounds", "rounds"))))

# -- the test ------------------------------------------------------------------------------------------

CONFIG = """
[agent]
id = "toy-agent"
region = "test"
isp = "lo"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[probes.toy]
every = "0.5s"
count = 4
interval = "0.05s"
timeout = "0.1s"
base_ms = 20.0

[[targets]]
id = "toy-target"
host = "toy.invalid"
datacenter = "lab"
probes = ["toy"]
toy_port = 42
toy_scale = 0.5
"""


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(REGISTRY, "toy", SPEC)   # the one registry line
    yield


def test_toy_probe_runs_config_to_report(toy: None, tmp_path: Path) -> None:
    db, cfg = tmp_path / "toy.db", tmp_path / "agent.toml"
    cfg.write_text(CONFIG.format(db=db))
    config = load_config(cfg)
    (target,) = config.targets
    assert target.option("toy_port") == 42 and target.to_probe_target().port == 42
    assert {k: target.to_probe_target().options[k] for k in ("toy_port", "toy_scale")} == {
        "toy_port": 42, "toy_scale": 0.5}
    assert isinstance(config.probe_settings(target, "toy"), ToySettings)

    started = time.monotonic()
    slack = timer_slack()
    assert asyncio.run(Agent(cfg, config, duration=2.5).run()) == 0
    assert timer_slack() == slack   # the agent's timer slack is given back: children started later inherit it
    assert time.monotonic() - started < 30

    hour = utc_now().hour    # the agent's zone is UTC: a window around now holds every round
    window = f"{(hour - 1) % 24}-{(hour + 1) % 24}"
    report = CliRunner().invoke(app, ["report", "peak", "--db", f"sqlite:///{db}", "--days", "1",
                                      "--window", window, "--format", "json"])
    assert report.exit_code == 0, report.output
    rows = json.loads(report.output)["rows"]
    (row,) = [r for r in rows if r["target"] == "toy-target"]
    assert row["agent"] == "toy-agent" and row["rtt_probe"] == "toy"
    peak = row["peak"]
    assert peak["rounds"] >= 2
    assert peak["loss_pct"] == pytest.approx(25.0)               # one request of four lost, every round
    assert 20.0 * 0.98 <= peak["rtt_p50_ms"] <= 23.0 * 1.02      # samples 20, 21, 22 ms (sketch ±1 %)
    assert peak["toy_widgets"] == pytest.approx(21.0)            # its rollup figure: toy_port × toy_scale
    assert peak["toy_p95_ms"] is not None and 20.0 * 0.98 <= peak["toy_p95_ms"] <= 22.0 * 1.02
    assert row["toy_widgets"] == pytest.approx(21.0)             # repeated on the row, as its spec asks

    # the dashboard's target page: the toy is the pair's RTT source and has its own table
    got = asyncio.run(_page(db, "toy-agent", "toy-target"))
    assert got is not None
    fragment = got[1]
    assert "TCP, SSE and Toy, the last 1 local day" in fragment
    assert "TCP connect: not measured in these days" in fragment
    assert "toy over the span: median" in fragment
    toy_table = table(fragment, "toy")
    # all hours of the local day (the agent's zone is UTC): every round, unless it ran across midnight
    assert toy_table["widgets per round"][0] == "21.00"
    assert 20.0 * 0.98 <= float(toy_table["toy P50, ms"][0]) <= 23.0 * 1.02
    rounds = re.fullmatch(r"(\d+) \((\d+)\)", toy_table["rounds (failed)"][0])
    assert rounds is not None and 1 <= int(rounds[1]) <= peak["rounds"] and rounds[2] == "0"


async def _page(db: Path, agent: str, target: str) -> tuple[str, str] | None:
    store = await open_store(f"sqlite:///{db}")
    try:
        return await target_page(store, agent, target, 1, "/")
    finally:
        await store.close()


def test_toy_probe_settings_and_options_are_validated_by_config(toy: None, tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(CONFIG.format(db=tmp_path / "x.db").replace("toy_port = 42", "toy_port = 0")
                   .replace("base_ms = 20.0", "base_ms = -1.0"))
    proc = CliRunner().invoke(app, ["config", "check", str(cfg)])
    assert proc.exit_code == 2
    assert "probes.toy.base_ms" in proc.output and "targets[0].toy_port" in proc.output
