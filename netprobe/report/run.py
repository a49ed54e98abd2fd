"""`netprobe report peak`'s body (the click command is report/cli.py), and its SLO for the dashboard."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.report.peak import PeakReport
    from netprobe.report.slo import SloRequest
    from netprobe.report.windows import HourWindow

# The store stack is imported inside the functions: `netprobe --help` should not pay for it.

FORMATS = ("table", "json", "md", "html")


def peak(db: str | None = None, days: int = 7, agent: str | None = None, region: str | None = None,
         window: str = "20-23", offpeak: str = "3-6", fmt: str = "table", out: Path | None = None,
         slo_ttft_ms: float = 1000.0) -> None:
    """The report, computed and printed (or written to `out`)."""
    from netprobe.report.windows import HourWindow

    if fmt not in FORMATS:
        raise UsageError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    if not 0 < slo_ttft_ms < float("inf"):
        raise UsageError(f"--slo-ttft-ms: must be a positive number of ms, got {slo_ttft_ms:g}")
    win, off = HourWindow.parse(window, "--window"), HourWindow.parse(offpeak, "--offpeak")
    # the table and Markdown show no 24-hour profile: the RTT probe is then read in the windows' hours only
    report = asyncio.run(_compute(db, days, win, off, agent, region, slo_request(slo_ttft_ms, fmt == "html"),
                                  profiles=fmt in ("json", "html")))
    _emit(report, fmt, out)


def slo_request(ttft_ms: float, drawn: bool) -> SloRequest:
    """The report's SLO: a new TLS 1.3 connection, one call; `drawn`: per hour and the e2e curve too."""
    from netprobe.budget.attainment import SloModel
    from netprobe.report.slo import SloRequest

    return SloRequest(SloModel(ttft_ms), hours=drawn, curve=drawn)


async def _compute(db: str | None, days: int, window: HourWindow, offpeak: HourWindow, agent: str | None,
                   region: str | None, slo: SloRequest | None = None, profiles: bool = True) -> PeakReport:
    from netprobe.report.peak import compute
    from netprobe.store.source import open_source

    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        return await compute(store, days, window, offpeak, agent=agent, region=region, slo=slo,
                             profiles=profiles)
    finally:
        await store.close()


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


__all__ = ["FORMATS", "peak", "slo_request"]
