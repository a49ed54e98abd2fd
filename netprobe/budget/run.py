"""`netprobe budget`'s body (the click group's callback is budget/cli.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.budget.attainment import Server
    from netprobe.report.rows import PeakRow
    from netprobe.report.slo import SloRequest

def budget(ttft_ms: float | None = None, db: str | None = None, tpot_ms: float | None = None,
           tls: str = "1.3", keepalive: bool = False, calls: int = 1, days: int = 7, window: str = "20-23",
           region: str | None = None, json_out: bool = False, slo_ttft_ms: float | None = None,
           slo_tpot_ms: float | None = None, server_ttft_ms: str | None = None, attainment: float = 95.0
           ) -> None:
    """The budget, computed and printed: a table, or with `json_out` one JSON object."""
    if slo_ttft_ms is not None and not 0 < slo_ttft_ms < float("inf"):
        raise UsageError(f"--slo-ttft-ms: must be a positive number of ms, got {slo_ttft_ms:g}")
    target = ttft_ms if ttft_ms is not None else slo_ttft_ms
    if target is None:
        raise UsageError("--ttft-ms: required (the time-to-first-token target, ms), or --slo-ttft-ms")
    from netprobe.budget.compute import budget_params, budget_rows, candidate

    params = budget_params(target, slo_tpot_ms if slo_tpot_ms is not None else tpot_ms, tls, keepalive, calls)
    slo = _slo(slo_ttft_ms, slo_tpot_ms, server_ttft_ms, attainment, params.round_trips, not keepalive, calls)
    peak = asyncio.run(_peak(db, days, window, region, slo))
    rows = budget_rows([c for c in map(candidate, peak) if c is not None], params)
    if json_out:
        print(json.dumps({"ttft_ms": target, "tpot_ms": params.tpot_ms, "tls": tls, "keepalive": keepalive,
                          "calls": calls, "window": window, "days": days,
                          **({"slo_ttft_ms": slo_ttft_ms, "attainment_target_pct": attainment,
                              "server_ttft_ms": server_ttft_ms} if slo is not None else {}),
                          "rows": [r.to_dict() for r in rows]}))
        return
    from netprobe.budget.table import print_budget, print_slo

    if slo is not None:
        print_slo(rows, slo)
    print_budget(rows, params, worst_case=slo is not None)


def _slo(ttft_ms: float | None, tpot_ms: float | None, server: str | None, pct: float, round_trips: int,
         handshake: bool, calls: int) -> SloRequest | None:
    from netprobe.budget.attainment import SloModel
    from netprobe.report.slo import SloRequest

    if ttft_ms is None:
        for name, value in (("--slo-tpot-ms", tpot_ms), ("--server-ttft-ms", server)):
            if value is not None:
                raise UsageError(f"{name}: needs --slo-ttft-ms")
        return None
    if not 0 < pct < 100:
        raise UsageError(f"--attainment: a percentage between 0 and 100 (exclusive), got {pct:g}")
    model = SloModel(ttft_ms, round_trips=round_trips, handshake=handshake, calls=calls, pct=pct)
    return SloRequest(model, server=_server(server) if server is not None else None, outcome=True, hours=True)


def _server(text: str) -> Server:
    """--server-ttft-ms: P50[,P95] in ms, or a file of samples."""
    from netprobe.budget.attainment import Dist
    from netprobe.stats import lognormal_option

    path = Path(text)
    if not path.exists():
        return lognormal_option(text, "--server-ttft-ms")
    try:
        lines = path.read_text().split()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--server-ttft-ms: cannot read {text}: {exc}") from None
    try:
        samples = [float(v) for v in lines]
    except ValueError as exc:
        raise UsageError(f"--server-ttft-ms: {text}: not a number per line ({exc})") from None
    if not samples or any(not 0 <= v < float("inf") for v in samples):
        raise UsageError(f"--server-ttft-ms: {text}: needs at least one sample, each a finite ms ≥ 0")
    return Dist.of(samples)


async def _peak(db: str | None, days: int, window: str, region: str | None, slo: SloRequest | None
                ) -> list[PeakRow]:
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.source import open_source

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        # the budget reads the peak window alone, unless attainment wants off-peak and every hour too
        return await peak_rows(store, days, win, region=region, peak_only=slo is None, slo=slo)
    finally:
        await store.close()


__all__ = ["budget"]
