"""Ranking within a region: peak RTT P95 with loss as a penalty.

score_ms = peak rtt_p95_ms + LOSS_PENALTY_MS_PER_PCT × peak loss_pct, lower is better. 100 ms per 1 %
puts docs/numbers.md tiers on the RTT scale: a premium line's < 0.1 % costs < 10 ms, BGP's 0.1–0.5 % costs
10–50 ms, a congested 163's ≥ 1 % at least 100 ms — each loss on a stream is a retransmission
timeout (≥ 200 ms) that users see as a stall. Ties: lower peak loss, then lower peak P50, then ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rows import PeakRow

LOSS_PENALTY_MS_PER_PCT = 100.0
RULE = "score_ms = peak rtt_p95_ms + 100 ms per 1 % peak loss; rank 1 = lowest score within the region"


def score(row: PeakRow) -> float | None:
    p95 = row.peak.rtt_p95_ms
    if p95 is None:
        return None
    return p95 + LOSS_PENALTY_MS_PER_PCT * (row.peak.loss_pct or 0.0)


def _order(scored: tuple[float, PeakRow]) -> tuple[float, float, float, str, str]:
    s, r = scored
    return s, r.peak.loss_pct or 0.0, r.peak.rtt_p50_ms or 0.0, r.agent, r.target


def ranked(rows: Sequence[PeakRow]) -> list[tuple[PeakRow, float | None, int | None]]:
    """Each row with its score and rank, ordered by region, rank (unranked last), agent, target; the
    rows themselves unchanged, for a caller that copies them once with more to set (report/peak.py)."""
    by_region: dict[str, list[tuple[float | None, PeakRow]]] = {}
    for r in rows:
        by_region.setdefault(r.region or "", []).append((score(r), r))
    out: list[tuple[PeakRow, float | None, int | None]] = []
    for region in sorted(by_region):
        order = sorted(((s, r) for s, r in by_region[region] if s is not None), key=_order)
        out += [(r, s, i) for i, (s, r) in enumerate(order, 1)]
        out += sorted(((r, None, None) for s, r in by_region[region] if s is None),
                      key=lambda x: (x[0].agent, x[0].target))
    return out


def rank_rows(rows: Sequence[PeakRow]) -> list[PeakRow]:
    """Rows with score and rank set, in ranked()'s order."""
    return [replace(r, score_ms=s, rank=k) for r, s, k in ranked(rows)]
