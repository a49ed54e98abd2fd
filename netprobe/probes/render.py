"""Rich tables for people. Figures are rounded here, for display only; JSON keeps full precision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from netprobe.probes.results import IcmpResult, MtrResult, ProbeResult, SseResult, TcpResult
from netprobe.stats import RttStats

if TYPE_CHECKING:
    from netprobe.probes.sse import SweepReport

STAT_COLUMNS = ("min", "avg", "p50", "p95", "max", "stdev")


def console() -> Console:
    """Stdout console; when piped, wide enough that tables are not squeezed into 80 columns."""
    c = Console(highlight=False)
    if not c.is_terminal:
        c = Console(highlight=False, width=max(c.width, 240))
    return c


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def pct(value: float) -> str:
    return f"{value:.1f}"


def stat_cells(stats: RttStats | None) -> list[str]:
    if stats is None:
        return ["—"] * len(STAT_COLUMNS)
    return [ms(getattr(stats, name)) for name in STAT_COLUMNS]


def _status_cell(r: ProbeResult) -> str:
    if r.status == "ok":
        return "[green]ok[/]"
    return f"[red]{r.error_kind or r.status}[/]"


def _table(title: str, head: Sequence[str]) -> Table:
    t = Table(title=title, title_justify="left")
    for name in head:
        t.add_column(name, justify="left" if name in ("host", "address", "status", "failures") else "right")
    return t


def icmp_table(results: Sequence[IcmpResult]) -> Table:
    t = _table("icmp (ms)", ["host", "address", "sent", "recv", "loss%", *STAT_COLUMNS, "jitter",
                             "status"])
    for r in results:
        t.add_row(escape(r.host), r.address or "—", str(r.sent), str(r.received), pct(r.loss_pct),
                  *stat_cells(r.rtt_ms), ms(r.jitter_ms), _status_cell(r))
    return t


def tcp_table(results: Sequence[TcpResult]) -> Table:
    t = _table("tcp connect (ms)", ["host", "address", "port", "dns", "sent", "ok", "fail%",
                                    *STAT_COLUMNS, "jitter", "failures", "status"])
    for r in results:
        failures = ", ".join(f"{kind} {n}" for kind, n in sorted(r.failures.items())) or "—"
        t.add_row(escape(r.host), r.address or "—", str(r.port), ms(r.dns_ms), str(r.sent), str(r.received),
                  pct(r.loss_pct), *stat_cells(r.connect_ms), ms(r.jitter_ms), failures, _status_cell(r))
    return t


def print_table(table: Table, results: Sequence[ProbeResult]) -> None:
    """The table, then one line per failed target with its full error message."""
    out = console()
    out.print(table)
    for r in results:
        if r.status != "ok" and r.error:
            out.print(f"[red]{escape(r.host)}:[/] {escape(r.error)}")


_MTR_FIGURES = ("Last", "Avg", "Best", "Wrst", "StDev", "Javg")


def mtr_table(r: MtrResult) -> Table:
    """mtr's own columns; rate-limited hops dimmed (their loss is the router's, not the path's)."""
    title = f"mtr {r.mode}{f' port {r.port}' if r.port else ''} to {escape(r.host)} ({r.address or '—'})"
    t = Table(title=title, title_justify="left", caption=_route_caption(r), caption_justify="left")
    for name in ("hop", "host", "ASN", "Loss%", "Snt", "Last", "Avg", "Best", "Wrst", "StDev", "Javg"):
        t.add_column(name, justify="left" if name in ("host", "ASN") else "right")
    for hop in r.hops:
        d = hop.to_dict()
        host = escape(" ".join(hop.addresses) or "???")
        if hop.icmp_errors:     # answered with an ICMP error (!H host unreachable…), as traceroute marks it
            host += "".join(f" !{code}" + (f"×{n}" if n > 1 else "") for code, n in hop.icmp_errors.items())
        asn = " ".join(x for x in (d["ASN"], escape(hop.org or ""), hop.country or "") if x)
        loss = pct(hop.loss_pct) + (" rl" if hop.rate_limited else "")
        cells = [str(hop.count), host, asn, loss, str(hop.sent),
                 *(ms(d[k]) if hop.answered else "—" for k in _MTR_FIGURES)]
        t.add_row(*cells, style="dim" if hop.rate_limited or not hop.answered else None)
    return t


def _route_caption(r: MtrResult) -> str:
    route = r.route
    if route is None:
        return ""
    text = f"line [bold]{route.label}[/]  path loss {pct(r.loss_pct)}%  hash {route.hash}"
    if route.mismatch:
        text += f"  [red]declared {escape(str(route.declared_line))}[/]"
    if any(h.rate_limited for h in r.hops):
        text += "  [dim](rl: loss at that hop only — ICMP rate limiting, not path loss)[/]"
    return text


def sse_table(results: Sequence[SseResult]) -> Table:
    t = _table("sse (ms)", ["url", "mode", "ttfb", "first event", "events", "gap p50", "gap p95", "gap max",
                            "stalls", "delay var p95", "tpot", "status"])
    for r in results:
        g = r.gaps_ms or {}
        t.add_row(escape(r.url), r.mode, ms(r.ttfb_ms), ms(r.first_event_ms), str(r.events), ms(g.get("p50")),
                  ms(g.get("p95")), ms(g.get("max")), f"{r.stalls} ({ms(r.stall_ms_total)})",
                  ms((r.delay_var_ms or {}).get("p95")), ms(r.tpot_ms), _status_cell(r))
    return t


def sse_sweep_table(report: SweepReport) -> Table:
    t = _table(f"sse concurrency sweep: {escape(report.url)} ({report.mode}, ms)",
               ["concurrency", "ttft p50", "ttft p95", "tpot p50", "tpot p95", "errors"])
    for lv in report.levels:
        ttft, tpot = lv.ttft_ms, lv.tpot_ms
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
        t.add_row(str(lv.concurrency), ms(ttft.p50 if ttft else None), ms(ttft.p95 if ttft else None),
                  ms(tpot.p50 if tpot else None), ms(tpot.p95 if tpot else None),
                  f"{lv.errors}" + (f" ({kinds})" if kinds else ""))
    return t
