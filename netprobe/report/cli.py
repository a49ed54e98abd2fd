"""`netprobe report peak --db URL [--days N] [--agent ID] [--region R] [--window 20-23] [--offpeak 3-6]
[--format table|json|md|html] [--out FILE] [--slo-ttft-ms N]`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from netprobe.errors import UsageError
from netprobe.textout import Group

if TYPE_CHECKING:
    from netprobe.report.peak import PeakReport

# The store stack is imported inside the command: `netprobe --help` should not pay for it.

FORMATS = ("table", "json", "md", "html")

app = Group("report", help="Reports from the hourly rollups (evening peak).", no_args_is_help=True)


@app.command("peak")
@click.option("--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's "
              "SQLite file under its state directory)")
@click.option("--days", metavar="N", type=int, default=7, show_default=True,
              help="local calendar days, today included")
@click.option("--agent", metavar="ID", help="only this agent")
@click.option("--region", metavar="R", help="only agents of this region")
@click.option("--window", metavar="START-END", default="20-23", show_default=True,
              help="peak window, local hours, half-open (22-2 crosses midnight)")
@click.option("--offpeak", metavar="START-END", default="3-6", show_default=True,
              help="off-peak window to compare with")
@click.option("--format", "fmt", metavar="table|json|md|html", default="table", show_default=True)
@click.option("--out", metavar="FILE", type=click.Path(path_type=Path), help="write here instead of stdout")
@click.option("--slo-ttft-ms", metavar="N", type=float, default=1000.0, show_default=True,
              help="attainment: the share of requests (new TLS 1.3 connection, server as openai-mode streams "
              "measured it, else none) with the first token within N ms")
def peak(db: str | None, days: int, agent: str | None, region: str | None, window: str, offpeak: str,
         fmt: str, out: Path | None, slo_ttft_ms: float) -> None:
    """Evening peak vs off-peak per agent × target, in each agent's own time zone."""
    from netprobe.report.peak import compute
    from netprobe.report.slo import slo_request
    from netprobe.report.windows import HourWindow
    from netprobe.store.source import open_source

    if fmt not in FORMATS:
        raise UsageError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    if not 0 < slo_ttft_ms < float("inf"):
        raise UsageError(f"--slo-ttft-ms: must be a positive number of ms, got {slo_ttft_ms:g}")
    win, off = HourWindow.parse(window, "--window"), HourWindow.parse(offpeak, "--offpeak")

    async def computed() -> PeakReport:
        store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
        try:
            # the table and Markdown show no 24-hour profile: the RTT probe is then read in the windows' hours
            return await compute(store, days, win, off, agent=agent, region=region,
                                 slo=slo_request(slo_ttft_ms, fmt == "html"),
                                 profiles=fmt in ("json", "html"))
        finally:
            await store.close()

    _emit(asyncio.run(computed()), fmt, out)


def _emit(report: PeakReport, fmt: str, out: Path | None) -> None:
    with _open(out) if out is not None else contextlib.nullcontext(sys.stdout) as fh:
        if fmt == "table":
            from netprobe.report.render_table import print_table
            from netprobe.textout import Out

            print_table(report, Out() if out is None else Out(file=fh, width=240, color=False))
        elif fmt == "html":
            from netprobe.report.render_html import html_chunks

            fh.writelines(html_chunks(report))      # written as drawn: a fleet's page is 15 MB
        elif fmt == "json":
            import orjson  # a fleet's report is megabytes

            fh.write(orjson.dumps(report.to_dict()).decode() + "\n")
        else:
            from netprobe.report.render_md import markdown

            fh.write(markdown(report))
    if not report.rows and fmt in ("md", "html"):    # the table says so itself
        print("no hourly rollups in the chosen days: the report is empty", file=sys.stderr)
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def _open(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out: {path}: {exc.strerror or exc}") from None
