"""Ranking within a region: peak RTT P95 with loss as a penalty.

score_ms = peak rtt_p95_ms + LOSS_PENALTY_MS_PER_PCT × peak loss_pct, lower is better. 100 ms per 1 %
puts DESIGN §1's tiers on the RTT scale: a premium line's < 0.1 % costs < 10 ms, BGP's 0.1–0.5 % costs
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


def rank_rows(rows: Sequence[PeakRow]) -> list[PeakRow]:
    """Rows with score and rank set, ordered by region, rank (unranked last), agent, target."""
    scored = [replace(r, score_ms=score(r), rank=None) for r in rows]
    by_region: dict[str, list[PeakRow]] = {}
    for r in scored:
        by_region.setdefault(r.region or "", []).append(r)
    out: list[PeakRow] = []
    for region in sorted(by_region):
        ranked = sorted((r for r in by_region[region] if r.score_ms is not None),
                        key=lambda r: (r.score_ms, r.peak.loss_pct or 0.0, r.peak.rtt_p50_ms or 0.0,
                                       r.agent, r.target))
        out += [replace(r, rank=i) for i, r in enumerate(ranked, 1)]
        out += sorted((r for r in by_region[region] if r.score_ms is None), key=lambda r: (r.agent, r.target))
    return out
