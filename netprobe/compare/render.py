"""The comparison for people: a table (one row per endpoint × level) and the seed's Markdown
framework table (TTFT and tokens/s against the first endpoint). Rounded for display only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.textout import Out, TextTable

if TYPE_CHECKING:
    from netprobe.compare.figures import LevelFigures, Pcts
    from netprobe.compare.report import CompareReport


def num(v: float | None, digits: int = 0) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def pick(p: Pcts | None, key: str, digits: int = 0) -> str:
    return num(p[key] if p else None, digits)


def level_label(lv: LevelFigures) -> str:
    return f"c={lv.level.concurrency}" if lv.level.rate is None else f"{lv.level.rate:g}/s"


def errors_text(lv: LevelFigures) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(lv.errors.items())) or "–"


def versus(value: float | None, base: float | None) -> str:
    """'1.8× / +80 %' against the baseline; '–' when either is missing or the baseline is 0."""
    if value is None or base is None or base == 0:
        return "–"
    change = (value / base - 1) * 100
    sign = "+" if change >= 0.5 else "−" if change <= -0.5 else "±"
    return f"{value / base:.2g}× / {sign}{abs(change):.0f} %"


def _goodput(lv: LevelFigures) -> str:
    if lv.goodput is None:
        return "–"
    return f"{lv.goodput:.2f}/s ({lv.slo_met_pct:.0f} %)"


def print_compare(report: CompareReport, con: Out | None = None) -> None:
    floors = any(e.floor is not None for e in report.endpoints)
    targets = (("TTFT", report.slo_ttft_ms), ("TPOT", report.slo_tpot_ms))
    slo = " · ".join(f"{k} ≤ {v:g} ms" for k, v in targets if v is not None)
    title = (f"{report.model} · {report.prompt} · {report.requests} requests per level"
             + (f" (+{report.warmup} warm-up)" if report.warmup else "") + (f" · SLO {slo}" if slo else ""))
    table = TextTable(title=title, caption="ms unless marked; latency figures over completed requests; "
                      "TTFT from the request's send to its first token")
    heads = ["endpoint", "load", "ok", "TTFT p50", "p95", "p99", *(["server p50", "p95"] if floors else []),
             "TPOT p50", "p95", "ITL p99", "E2E p50", "p95", "tok/s", "tok/s/req", "req/s", "goodput",
             "errors"]
    for h in heads:
        table.add_column(h, justify="left" if h in ("endpoint", "load", "errors") else "right")
    for e in report.endpoints:
        for lv in e.levels:
            server = [pick(lv.server_ttft_ms, "p50"), pick(lv.server_ttft_ms, "p95")] if floors else []
            table.add_row(e.url, level_label(lv), f"{lv.completed}/{lv.requests}", pick(lv.ttft_ms, "p50"),
                          pick(lv.ttft_ms, "p95"), pick(lv.ttft_ms, "p99"), *server,
                          pick(lv.tpot_ms, "p50", 1), pick(lv.tpot_ms, "p95", 1), pick(lv.itl_ms, "p99", 1),
                          pick(lv.e2e_ms, "p50"), pick(lv.e2e_ms, "p95"), num(lv.output_tokens_per_s, 1),
                          pick(lv.request_tokens_per_s, "p50", 1), num(lv.requests_per_s, 2), _goodput(lv),
                          errors_text(lv), style="red" if lv.completed == 0 else None)
        table.add_section()
    con = con or Out()
    con.table(table)
    for e in report.endpoints:
        if e.floor is not None:
            f = e.floor
            con.print(f"{e.url}: network floor {f.rtt_p50_ms:.0f} ms (evening-peak {f.window} RTT P50 of "
                      f"target {f.target}, agent {f.agent}, {f.rounds} rounds) taken off TTFT: server = "
                      "queue + prefill + first token")
        elif e.floor_note:
            con.print(f"{e.url}: no network floor: {e.floor_note}")
        for lv in e.levels:
            for kind, text in sorted(lv.error_examples.items()):
                con.print(f"{e.url} {level_label(lv)}: {kind}: {text}", "red")


def markdown(report: CompareReport) -> str:
    """Per level, every endpoint's TTFT P50 and output tokens/s, and each against the first endpoint."""
    lines = ["| endpoint | load | TTFT P50 (ms) | TTFT vs first | TTFT P95 (ms) | output tokens/s | "
             "tokens/s vs first | TPOT P50 (ms) | errors |", "|---|---|--:|--:|--:|--:|--:|--:|---|"]
    base = report.endpoints[0]
    for i, base_lv in enumerate(base.levels):
        b_ttft = base_lv.ttft_ms["p50"] if base_lv.ttft_ms else None
        for e in report.endpoints:
            lv = e.levels[i]
            ttft = lv.ttft_ms["p50"] if lv.ttft_ms else None
            first = e is base
            lines.append(
                f"| {e.url} | {level_label(lv)} | {num(ttft)} | "
                f"{'baseline' if first else versus(ttft, b_ttft)} "
                f"| {pick(lv.ttft_ms, 'p95')} | {num(lv.output_tokens_per_s, 1)} | "
                f"{'baseline' if first else versus(lv.output_tokens_per_s, base_lv.output_tokens_per_s)} | "
                f"{pick(lv.tpot_ms, 'p50', 1)} | {errors_text(lv)} |")
    return "\n".join(lines) + "\n"
