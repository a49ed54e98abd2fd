"""The diagnosis for people: three numbered sections with short tables, the budget, the verdict.
Sections 1 and 2 print as soon as they are measured; the sweep prints with the verdict, since its
"fits" column needs the budget."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from netprobe.probes.render import ms, pct

from .run import Diagnosis, Step
from .steps import NetworkFloor, SingleRequest, Sweep


def _table(title: str, head: list[str]) -> Table:
    t = Table(title=title, title_justify="left")
    for name in head:
        t.add_column(name, justify="left" if name in ("line", "status", "errors", "fits") else "right")
    return t


def _opt_pct(v: float | None) -> str:
    return "—" if v is None else pct(v)


def print_network(con: Console, net: NetworkFloor) -> None:
    con.print(f"[bold]1. Network floor[/] — {escape(net.describe())}")
    if net.floor_ms is not None:
        t = _table("network (ms)", ["floor (RTT p95)", "RTT p50", "loss%", "jitter", "line", "path loss%"])
        t.add_row(ms(net.floor_ms), ms(net.rtt_p50_ms), _opt_pct(net.loss_pct), ms(net.jitter_ms),
                  escape(net.line or "—"), _opt_pct(net.path_loss_pct))
        con.print(t)
    if net.error:
        con.print(f"[red]no floor:[/] {escape(net.error)}")
    for note in net.notes:
        con.print(f"[dim]{escape(note)}[/]")


def print_single(con: Console, s: SingleRequest) -> None:
    pace = "TPOT" if s.mode == "openai" else "pacing"
    con.print(f"\n[bold]2. Single request[/] — one {s.mode} stream")
    g = s.gaps_ms or {}
    t = _table("single request (ms)", ["ttfb", "first event (TTFT)", "server share", pace, "gap p50",
                                       "gap p95", "gap max", "stalls", "events", "status"])
    status = "[green]ok[/]" if s.ok else f"[red]{escape(s.error_kind or s.status)}[/]"
    t.add_row(ms(s.ttfb_ms), ms(s.first_event_ms), ms(s.server_ms), ms(s.tpot_ms), ms(g.get("p50")),
              ms(g.get("p95")), ms(g.get("max")), f"{s.stalls} ({ms(s.stall_ms_total)})", str(s.events),
              status)
    con.print(t)
    if not s.ok and s.error:
        con.print(f"[red]{escape(s.error)}[/]")


def print_step(con: Console, step: Step) -> None:
    if isinstance(step, NetworkFloor):
        print_network(con, step)
    elif isinstance(step, SingleRequest):
        print_single(con, step)


def print_sweep(con: Console, d: Diagnosis) -> None:
    sweep: Sweep = d.sweep
    skipped = f" — skipped: {escape(sweep.skipped)}" if sweep.skipped else ""
    con.print(f"\n[bold]3. Concurrency sweep[/]{skipped}")
    if not sweep.levels:
        return
    checks = {c.concurrency: c for c in d.verdict.levels}
    t = _table("sweep (ms)", ["concurrency", "TTFT p50", "TTFT p95", "server est.", "TPOT p50", "TPOT p95",
                              "errors", "fits"])
    for lv in sweep.levels:
        c = checks.get(lv.concurrency)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
        fits = "—" if c is None else ("[green]yes[/]" if not c.over else f"[red]no ({c.why})[/]")
        t.add_row(str(lv.concurrency), ms(lv.ttft_p50_ms), ms(lv.ttft_p95_ms),
                  ms(c.server_est_ms if c else None), ms(lv.tpot_p50_ms), ms(lv.tpot_p95_ms),
                  f"{lv.errors}" + (f" ({escape(kinds)})" if kinds else ""), fits)
    con.print(t)


def print_conclusion(con: Console, d: Diagnosis) -> None:
    print_sweep(con, d)
    b, p, v = d.verdict.budget, d.params, d.verdict
    if b is not None:
        conn = "keep-alive" if p.keepalive else f"new TCP + TLS {p.tls}"
        calls = f" × {b.calls} calls" if b.calls > 1 else ""
        con.print(f"\n[bold]Budget[/] — TTFT {p.ttft_ms:g} ms − network {b.network_ms:.1f} ms "
                  f"({b.network_floor_ms:.2f} ms × {b.round_trips} round trips{calls}; {conn}) "
                  f"− jitter margin {b.jitter_margin_ms:.1f} ms ({b.jitter_source}) = "
                  f"GPU budget {b.gpu_budget_ms:.1f} ms")
    if v.within_budget:
        con.print(f"\n[bold green]Verdict:[/] {escape(v.message)}")
    else:
        con.print(f"\n[bold red]Verdict ({v.segment}):[/] {escape(v.message)}")
        if v.advice:
            con.print(f"  → {escape(v.advice)}")
