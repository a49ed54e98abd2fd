"""A round's figures from what it exchanged (docs/probes.md), computed here and nowhere else.

- rtt per reply: (t4 − t1) − (t3 − t2): the reflector's own time taken out.
- loss: fwd = requests the reflector never saw, ret = replies to seen requests that never came; both
  as % of requests sent, so fwd + ret is the round's loss exactly.
- delay variation per direction: (t2 − t1) and (t4 − t3) minus their minimum over the round; any clock
  offset between the ends is the same in every sample and cancels.
- absolute one-way delays (median) only when the clocks are declared synchronised.
- reordered/duplicates: forward as the reflector counted them; return as the agent saw replies
  arrive (a reply sent before one already received; a reply received twice).
"""

from __future__ import annotations

from dataclasses import dataclass

from netprobe.probes.owd.client import Exchange
from netprobe.stats import RttStats, loss_pct, percentile, rtt_stats

NS_PER_MS = 1_000_000.0


@dataclass(frozen=True, slots=True)
class DelayVar:
    p50: float
    p95: float
    max: float

    def to_dict(self) -> dict[str, float]:
        return {"p50": round(self.p50, 3), "p95": round(self.p95, 3), "max": round(self.max, 3)}


@dataclass(frozen=True, slots=True)
class OwdFigures:
    sent: int
    received: int
    loss_pct: float
    fwd_loss_pct: float
    ret_loss_pct: float
    rtt: RttStats | None
    fwd_delay_var: DelayVar | None
    ret_delay_var: DelayVar | None
    fwd_ms: float | None
    ret_ms: float | None
    reordered_fwd: int
    reordered_ret: int
    duplicates_fwd: int
    duplicates_ret: int
    samples_ms: tuple[float | None, ...]     # rtt by request, None for lost


def figures(x: Exchange, clock_sync: bool = False) -> OwdFigures:
    first: dict[int, tuple[int, int, int, int]] = {}
    dup_ret = reord_ret = 0
    top_t3 = -1
    for r in x.replies:
        if r.seq in first:
            dup_ret += 1
            continue
        first[r.seq] = (r.t1, r.t2, r.t3, r.t4)
        if r.t3 < top_t3:
            reord_ret += 1
        top_t3 = max(top_t3, r.t3)
    received = len(first)
    seen = min(x.sent, max(x.seen_by_reflector, received))
    rtts = [((t4 - t1) - (t3 - t2)) / NS_PER_MS for t1, t2, t3, t4 in first.values()]
    fwd = [(t2 - t1) / NS_PER_MS for t1, t2, _, _ in first.values()]
    ret = [(t4 - t3) / NS_PER_MS for _, _, t3, t4 in first.values()]
    by_seq = {seq: ((t4 - t1) - (t3 - t2)) / NS_PER_MS for seq, (t1, t2, t3, t4) in first.items()}
    return OwdFigures(
        sent=x.sent, received=received, loss_pct=loss_pct(x.sent, received),
        fwd_loss_pct=_pct(x.sent - seen, x.sent), ret_loss_pct=_pct(seen - received, x.sent),
        rtt=rtt_stats(rtts), fwd_delay_var=_variation(fwd), ret_delay_var=_variation(ret),
        fwd_ms=percentile(sorted(fwd), 50) if clock_sync and fwd else None,
        ret_ms=percentile(sorted(ret), 50) if clock_sync and ret else None,
        reordered_fwd=x.fwd_reordered, reordered_ret=reord_ret,
        duplicates_fwd=x.fwd_duplicates, duplicates_ret=dup_ret,
        samples_ms=tuple(by_seq.get(seq) for seq in range(x.sent)))


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def _variation(raw: list[float]) -> DelayVar | None:
    if not raw:
        return None
    floor = min(raw)
    v = sorted(d - floor for d in raw)
    return DelayVar(percentile(v, 50), percentile(v, 95), v[-1])


__all__ = ["DelayVar", "OwdFigures", "figures"]
