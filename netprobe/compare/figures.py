"""Per endpoint and level, the figures of docs/numbers.md from the requests' records.

Latency figures come from the successful requests only (vllm bench serve, GuideLLM); goodput counts
a failed or incomplete request as missing the SLO (GuideLLM's rule) and, with a TPOT target too,
a request must meet both (vllm's goodput).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netprobe.compare.request import RequestRecord
from netprobe.compare.run import Level, LevelRun
from netprobe.stats import percentile

Pcts = dict[str, float]


def pcts(values: Sequence[float]) -> Pcts | None:
    if not values:
        return None
    s = sorted(values)
    return {"p50": percentile(s, 50), "p95": percentile(s, 95), "p99": percentile(s, 99)}


def tpot_ms(r: RequestRecord) -> float | None:
    """(E2E − TTFT)/(output tokens − 1); None for a single token."""
    if r.ttft_ms is None or r.e2e_ms is None or r.output_tokens < 2:
        return None
    return (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None

    def met(self, r: RequestRecord) -> bool:
        if not r.ok or r.ttft_ms is None:
            return False
        if self.ttft_ms is not None and r.ttft_ms > self.ttft_ms:
            return False
        tpot = tpot_ms(r)
        return self.tpot_ms is None or tpot is None or tpot <= self.tpot_ms


@dataclass(frozen=True, slots=True)
class LevelFigures:
    level: Level
    requests: int
    completed: int
    ttft_ms: Pcts | None
    tpot_ms: Pcts | None
    itl_ms: Pcts | None
    e2e_ms: Pcts | None
    request_tokens_per_s: Pcts | None    # one request's output tokens / its E2E
    output_tokens_per_s: float           # every completed request's output tokens / the level's time
    requests_per_s: float
    output_tokens: int
    tokens_from_usage: int               # completed requests whose count is the server's usage report
    duration_s: float
    slo_met_pct: float | None            # None without an SLO
    goodput: float | None                # requests/s meeting the SLO
    errors: dict[str, int]
    error_examples: dict[str, str]       # per kind, the first request's message
    server_ttft_ms: Pcts | None = None   # TTFT less the route's network floor (--db)

    @property
    def failed(self) -> int:
        return self.requests - self.completed

    def to_dict(self) -> dict[str, Any]:
        lv = self.level
        key = {"concurrency": lv.concurrency} if lv.rate is None else {"rate": lv.rate}
        return {**key, "requests": self.requests, "completed": self.completed, "ttft_ms": self.ttft_ms,
                "tpot_ms": self.tpot_ms, "itl_ms": self.itl_ms, "e2e_ms": self.e2e_ms,
                "request_tokens_per_s": self.request_tokens_per_s,
                "output_tokens_per_s": self.output_tokens_per_s, "requests_per_s": self.requests_per_s,
                "output_tokens": self.output_tokens, "tokens_from_usage": self.tokens_from_usage,
                "duration_s": self.duration_s, "slo_met_pct": self.slo_met_pct, "goodput": self.goodput,
                "errors": dict(self.errors), "error_examples": dict(self.error_examples),
                "failed": self.failed, "server_ttft_ms": self.server_ttft_ms}


def level_figures(run: LevelRun, slo: Slo, floor_ms: float | None = None) -> LevelFigures:
    ok = [r for r in run.records if r.ok]
    ttft = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    speeds = [r.output_tokens / (r.e2e_ms / 1000) for r in ok if r.e2e_ms]
    tokens = sum(r.output_tokens for r in ok)
    dur = run.duration_s if run.duration_s > 0 else math.inf
    has_slo = slo.ttft_ms is not None or slo.tpot_ms is not None
    met = sum(slo.met(r) for r in run.records)
    n = len(run.records)
    server = pcts([max(0.0, t - floor_ms) for t in ttft]) if floor_ms is not None else None
    return LevelFigures(
        level=run.level, requests=n, completed=len(ok), ttft_ms=pcts(ttft),
        tpot_ms=pcts([v for v in map(tpot_ms, ok) if v is not None]),
        itl_ms=pcts([g for r in ok for g in r.itl_ms]), e2e_ms=pcts([r.e2e_ms for r in ok if r.e2e_ms]),
        request_tokens_per_s=pcts(speeds), output_tokens_per_s=tokens / dur, requests_per_s=len(ok) / dur,
        output_tokens=tokens, tokens_from_usage=sum(r.from_usage for r in ok), duration_s=run.duration_s,
        slo_met_pct=100.0 * met / n if has_slo and n else None,
        goodput=met / dur if has_slo else None,
        errors=dict(Counter(r.error_kind or "error" for r in run.records if not r.ok)),
        error_examples=_examples(run.records),
        server_ttft_ms=server)


def _examples(records: Sequence[RequestRecord]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in records:
        if not r.ok:
            out.setdefault(r.error_kind or "error", r.error or "")
    return out
