"""Report and budget rows made up directly (no store), and the rich Table code the terminal tables were
printed with before netprobe.textout: the reference tests/unit/test_textout.py and bench/table_render.py
compare with (rich is a dev dependency only)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from netprobe.budget.compute import BudgetParams, BudgetRow, budget_rows, candidate
from netprobe.budget.table import ms as _ms
from netprobe.report.columns import columns as report_columns
from netprobe.report.columns import empty_message, title
from netprobe.report.peak import PeakReport
from netprobe.report.ranking import rank_rows
from netprobe.report.rows import Degradation, PeakRow, WindowFigures, WorstHour
from netprobe.report.windows import HourWindow

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def figures(rng: random.Random, base: float | None, *, sse: bool) -> WindowFigures:
    if base is None:
        return WindowFigures(None, None, None, None, None, 0, 0, 0)
    p50 = base * rng.uniform(1.0, 1.3)
    return WindowFigures(
        rtt_p50_ms=p50, rtt_p95_ms=p50 * rng.uniform(1.05, 1.6), rtt_p99_ms=p50 * rng.uniform(1.6, 3.0),
        jitter_ms=rng.uniform(0.1, 25.0), loss_pct=rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(1, 30)]),
        rounds=rng.randint(1, 5400), hours=rng.randint(1, 270), samples=rng.randint(20, 108000),
        extra=dict(
            tcp_connect_p95_ms=p50 * 1.1 if rng.random() < 0.8 else None,
            sse_first_event_p95_ms=p50 * 4 if sse else None,
            stalls_per_min=rng.uniform(0, 3) if sse else None,
            sse_delay_var_p95_ms=rng.uniform(1, 40) if sse else None,
            sse_delay_var_p50_ms=rng.uniform(0.5, 5) if sse else None,
            sse_server_first_ms=rng.uniform(100, 900) if sse and rng.random() < 0.5 else None,
            sse_tpot_ms=rng.uniform(10, 80) if sse else None))


def row(rng: random.Random, agent: str, region: str | None, target: str, *, line: str | None = "cn2-gia",
        detected: str | None = "cn2-gia", datacenter: str | None = "tyo", measured: bool = True) -> PeakRow:
    base = rng.uniform(20, 220) if measured else None
    peak, off = figures(rng, base and base * 1.3, sse=rng.random() < 0.25), figures(rng, base, sse=False)
    p95, off95, loss, off_loss = peak.rtt_p95_ms, off.rtt_p95_ms, peak.loss_pct, off.loss_pct
    worst = None if loss is None else WorstHour(NOW - timedelta(hours=rng.randint(1, 2000)), loss * 2)
    degradation = Degradation(
        rtt_p50_delta_ms=None, rtt_p95_delta_ms=None if p95 is None or off95 is None else p95 - off95,
        rtt_p95_ratio=None if p95 is None or off95 is None else p95 / off95, jitter_delta_ms=None,
        loss_delta_pct=None if loss is None or off_loss is None else loss - off_loss)
    return PeakRow(agent=agent, region=region, timezone="Asia/Shanghai", target=target, datacenter=datacenter,
                   line=line, detected_line=detected, rtt_probe="icmp" if measured else None, peak=peak,
                   offpeak=off, worst_hour=worst, degradation=degradation, profile=())


def report(rows: list[PeakRow], **kw: object) -> PeakReport:
    return PeakReport(rows=rank_rows(rows), days=90, window=HourWindow(20, 23), offpeak=HourWindow(3, 6),
                      generated_at=NOW, **kw)  # type: ignore[arg-type]


LINES = ("cn2-gia", "cn2-gt", "163", "bgp", "cmi")


def fleet(agents: int = 10, targets: int = 100, seed: int = 1) -> PeakReport:
    """A fleet's report: agents × targets rows in a few regions, about one line in ten detected as
    another one."""
    rng = random.Random(seed)
    regions = ("cn-east", "cn-north", "cn-south", "eu-de", "us-west")
    rows = []
    for a in range(agents):
        region = regions[a % len(regions)]
        for t in range(targets):
            line = LINES[t % len(LINES)]
            rows.append(row(rng, f"{region}-agent-{a:02d}", region, f"dc{t % 5}-target-{t:03d}", line=line,
                            detected=rng.choice(LINES) if rng.random() < 0.1 else line,
                            datacenter=f"dc{t % 5}", measured=rng.random() > 0.02))
    return report(rows)


def budget(peak: PeakReport, params: BudgetParams) -> list[BudgetRow]:
    return budget_rows([c for c in map(candidate, peak.rows) if c is not None], params)


# -- the reference: the rich Table code of netprobe/report/render_table.py and print_budget before -------
def rich_report_table(report: PeakReport) -> Table:
    columns = [c for c in report_columns(report.rows) if c.terminal]
    t = Table(title=escape(title(report)), title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
              caption="≠: detected line differs from the declared one; figures of the peak window unless "
              "marked off", caption_justify="left")
    for col in columns:
        t.add_column(col.head, justify="right" if col.numeric else "left", no_wrap=True)
    region: str | None = None
    for i, r in enumerate(report.rows):
        if i and r.region != region:
            t.add_section()
        region = r.region
        style = "yellow" if r.line_mismatch else None
        t.add_row(*(escape(col.cell(r)) for col in columns), style=style)
    return t


def rich_print_table(report: PeakReport, console: Console) -> None:
    if report.note:
        console.print(report.note, highlight=False, markup=False)
    if not report.rows:
        console.print(empty_message(report), highlight=False, markup=False)
        return
    console.print(rich_report_table(report))
    for warning in report.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False)


def rich_budget_table(rows: list[BudgetRow], p: BudgetParams) -> Table:
    conn = "keep-alive (1 round trip)" if p.keepalive else \
        f"new TCP + TLS {p.tls} connection ({p.round_trips} round trips)"
    t = Table(title=f"TTFT {p.ttft_ms:g} ms · {conn} · {p.calls} call{'s' * (p.calls > 1)} in series",
              title_justify="left")
    text_columns = ("region", "target", "line", "verdict")
    for col in ("region", "rank", "target", "line", "floor p95", "network", "jitter",
                "GPU: queue+prefill+1st", "per token", "verdict"):
        t.add_column(col, justify="left" if col in text_columns else "right")
    for r in rows:
        gpu = _ms(r.gpu_budget_ms) + (f" (measured {_ms(r.gpu_measured_ms)})" if r.gpu_measured_ms else "")
        tpot = "–" if r.tpot_target_ms is None else \
            f"≤ {r.tpot_target_ms:g}: " + {True: "ok", False: "over", None: "no data"}[r.tpot_ok]
        verdict = "[green]feasible[/]" if r.feasible else f"[red]over: {r.why}[/]"
        t.add_row(r.region, str(r.rank), r.target, r.line, _ms(r.network_floor_ms), _ms(r.network_ms),
                  _ms(r.jitter_margin_ms), gpu, tpot, verdict)
    return t


def rich_print_budget(rows: list[BudgetRow], p: BudgetParams, console: Console) -> None:
    console.print(rich_budget_table(rows, p))
    if not rows:
        console.print("no peak-window RTT in the chosen days: nothing to budget")
