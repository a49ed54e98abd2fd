"""The diagnosis for people: three numbered sections with short tables, the budget, the verdict.
Sections 1 and 2 print as soon as they are measured; the sweep prints with the verdict, since its
"fits" column needs the budget."""

from __future__ import annotations

from netprobe.probes.render import ms, pct
from netprobe.textout import Out, TextTable, style

from .run import Diagnosis, Step
from .steps import NetworkFloor, SingleRequest, Sweep


def _table(title: str, head: list[str]) -> TextTable:
    t = TextTable(title=title)
    for name in head:
        t.add_column(name, justify="left" if name in ("line", "status", "errors", "fits") else "right")
    return t


def _opt_pct(v: float | None) -> str:
    return "—" if v is None else pct(v)


def print_network(con: Out, net: NetworkFloor) -> None:
    con.print(style("1. Network floor", "bold") + f" — {net.describe()}")
    if net.floor_ms is not None:
        t = _table("network (ms)", ["floor (RTT p95)", "RTT p50", "loss%", "jitter", "line", "path loss%"])
        t.add_row(ms(net.floor_ms), ms(net.rtt_p50_ms), _opt_pct(net.loss_pct), ms(net.jitter_ms),
                  net.line or "—", _opt_pct(net.path_loss_pct))
        con.table(t)
    if net.error:
        con.print(style("no floor:", "red") + f" {net.error}")
    for note in net.notes:
        con.print(note, "dim")


def print_single(con: Out, s: SingleRequest) -> None:
    pace = "TPOT" if s.mode == "openai" else "pacing"
    con.print("\n" + style("2. Single request", "bold") + f" — one {s.mode} stream")
    g = s.gaps_ms or {}
    t = _table("single request (ms)", ["ttfb", "first event (TTFT)", "server share", pace, "gap p50",
                                       "gap p95", "gap max", "stalls", "events", "status"])
    t.add_row(ms(s.ttfb_ms), ms(s.first_event_ms), ms(s.server_ms), ms(s.tpot_ms), ms(g.get("p50")),
              ms(g.get("p95")), ms(g.get("max")), f"{s.stalls} ({ms(s.stall_ms_total)})", str(s.events),
              "ok" if s.ok else s.error_kind or s.status,
              cell_styles=(*(None,) * 9, "green" if s.ok else "red"))
    con.table(t)
    if not s.ok and s.error:
        con.print(s.error, "red")


def print_step(con: Out, step: Step) -> None:
    if isinstance(step, NetworkFloor):
        print_network(con, step)
    elif isinstance(step, SingleRequest):
        print_single(con, step)


def print_sweep(con: Out, d: Diagnosis) -> None:
    sweep: Sweep = d.sweep
    skipped = f" — skipped: {sweep.skipped}" if sweep.skipped else ""
    con.print("\n" + style("3. Concurrency sweep", "bold") + skipped)
    if not sweep.levels:
        return
    checks = {c.concurrency: c for c in d.verdict.levels}
    t = _table("sweep (ms)", ["concurrency", "TTFT p50", "TTFT p95", "server est.", "TPOT p50", "TPOT p95",
                              "errors", "fits"])
    for lv in sweep.levels:
        c = checks.get(lv.concurrency)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
        fits = "—" if c is None else "yes" if not c.over else f"no ({c.why})"
        t.add_row(str(lv.concurrency), ms(lv.ttft_p50_ms), ms(lv.ttft_p95_ms),
                  ms(c.server_est_ms if c else None), ms(lv.tpot_p50_ms), ms(lv.tpot_p95_ms),
                  f"{lv.errors}" + (f" ({kinds})" if kinds else ""), fits,
                  cell_styles=(*(None,) * 7, None if c is None else "green" if not c.over else "red"))
    con.table(t)


def print_conclusion(con: Out, d: Diagnosis) -> None:
    print_sweep(con, d)
    b, p, v = d.verdict.budget, d.params, d.verdict
    if b is not None:
        conn = "keep-alive" if p.keepalive else f"new TCP + TLS {p.tls}"
        calls = f" × {b.calls} calls" if b.calls > 1 else ""
        con.print("\n" + style("Budget", "bold") + f" — TTFT {p.ttft_ms:g} ms − network "
                  f"{b.network_ms:.1f} ms ({b.network_floor_ms:.2f} ms × {b.round_trips} round trips{calls}; "
                  f"{conn}) − jitter margin {b.jitter_margin_ms:.1f} ms ({b.jitter_source}) = "
                  f"GPU budget {b.gpu_budget_ms:.1f} ms")
    if v.within_budget:
        con.print("\n" + style("Verdict:", "bold green") + f" {v.message}")
    else:
        con.print("\n" + style(f"Verdict ({v.segment}):", "bold red") + f" {v.message}")
        if v.advice:
            con.print(f"  → {v.advice}")
