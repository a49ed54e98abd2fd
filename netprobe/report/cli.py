"""`netprobe report peak --db URL [--days N] [--agent ID] [--region R] [--window 20-23] [--offpeak 3-6]
[--format table|json|md|html] [--out FILE]`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.report.peak import PeakReport
    from netprobe.report.slo import SloRequest
    from netprobe.report.windows import HourWindow

# The store stack is imported inside the command: `netprobe --help` should not pay for it.

app = typer.Typer(no_args_is_help=True, add_completion=False)
FORMATS = ("table", "json", "md", "html")


@app.callback()
def _group() -> None:
    """Reports computed from the hourly rollups."""


@app.command()
def peak(
    db: Annotated[str | None, typer.Option(
        "--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's "
        "SQLite file under its state directory)")] = None,
    days: Annotated[int, typer.Option("--days", metavar="N", help="local calendar days, today included")] = 7,
    agent: Annotated[str | None, typer.Option("--agent", metavar="ID", help="only this agent")] = None,
    region: Annotated[str | None, typer.Option("--region", metavar="R",
                                               help="only agents of this region")] = None,
    window: Annotated[str, typer.Option(
        "--window", metavar="START-END",
        help="peak window, local hours, half-open (22-2 crosses midnight)")] = "20-23",
    offpeak: Annotated[str, typer.Option("--offpeak", metavar="START-END",
                                         help="off-peak window to compare with")] = "3-6",
    fmt: Annotated[str, typer.Option("--format", metavar="table|json|md|html")] = "table",
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE",
                                             help="write here instead of stdout")] = None,
    slo_ttft_ms: Annotated[float, typer.Option(
        "--slo-ttft-ms", metavar="N", help="attainment: the share of requests (new TLS 1.3 connection, "
        "server as openai-mode streams measured it, else none) with the first token within N ms")] = 1000.0,
) -> None:
    """Evening peak vs off-peak per agent × target, in each agent's own time zone (DESIGN §5)."""
    from netprobe.report.windows import HourWindow

    if fmt not in FORMATS:
        raise UsageError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    if not 0 < slo_ttft_ms < float("inf"):
        raise UsageError(f"--slo-ttft-ms: must be a positive number of ms, got {slo_ttft_ms:g}")
    win, off = HourWindow.parse(window, "--window"), HourWindow.parse(offpeak, "--offpeak")
    report = asyncio.run(_compute(db, days, win, off, agent, region, slo_request(slo_ttft_ms, fmt == "html")))
    _emit(report, fmt, out)


def slo_request(ttft_ms: float, drawn: bool) -> SloRequest:
    """The report's SLO: a new TLS 1.3 connection, one call; `drawn`: per hour and the e2e curve too."""
    from netprobe.budget.attainment import SloModel
    from netprobe.report.slo import SloRequest

    return SloRequest(SloModel(ttft_ms), hours=drawn, curve=drawn)


async def _compute(db: str | None, days: int, window: HourWindow, offpeak: HourWindow, agent: str | None,
                   region: str | None, slo: SloRequest | None = None) -> PeakReport:
    from netprobe.report.peak import compute
    from netprobe.store.reads import open_source

    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        return await compute(store, days, window, offpeak, agent=agent, region=region, slo=slo)
    finally:
        await store.close()


def _emit(report: PeakReport, fmt: str, out: Path | None) -> None:
    if fmt == "table":
        from rich.console import Console

        from netprobe.probes.render import console
        from netprobe.report.render_table import print_table

        if out is None:
            print_table(report, console())
            return
        with _open(out) as fh:
            print_table(report, Console(emoji=False, file=fh, width=240, no_color=True, highlight=False))
        typer.echo(f"wrote {out}", err=True)
        return
    if fmt == "json":
        import orjson  # a fleet's report is megabytes: the json module took a fifth of its time

        text = orjson.dumps(report.to_dict()).decode() + "\n"
    elif fmt == "md":
        from netprobe.report.render_md import markdown

        text = markdown(report)
    else:
        from netprobe.report.render_html import html

        text = html(report)
    if out is None:
        sys.stdout.write(text)
    else:
        with _open(out) as fh:
            fh.write(text)
    if not report.rows and fmt != "json":
        typer.echo("no hourly rollups in the chosen days: the report is empty", err=True)
    if out is not None:
        typer.echo(f"wrote {out}", err=True)


def _open(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out: {path}: {exc.strerror or exc}") from None
