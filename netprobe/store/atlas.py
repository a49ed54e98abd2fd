"""RIPE Atlas ping and traceroute results as netprobe envelopes, so operators can start from public Atlas
probes inside their users' ISPs before deploying agents. The Atlas probe is the agent (`atlas-<prb_id>`).

Atlas result JSON: `type` ping|traceroute, `prb_id`, `msm_id`, `dst_addr`, `dst_name`, `timestamp`
(Unix s), `from`; ping `result[]` of `{"rtt": ms}`, `{"x": "*"}` (lost) or `{"dup": 1, "rtt": ms}`;
traceroute `result[]` of `{"hop": n, "result": [{"from", "rtt"} | {"x": "*"}]}`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from netprobe.results import IcmpResult, MtrResult, ProbeResult, envelope
from netprobe.stats import jitter, loss_pct, rtt_stats

_NAMESPACE = uuid.UUID("6f1f5d1e-7c3a-4c55-9a53-6b1d2f0c9a10")


def is_atlas(obj: Mapping[str, Any]) -> bool:
    return "prb_id" in obj and obj.get("type") in ("ping", "traceroute") and "result" in obj


def to_envelope(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One Atlas result as an envelope; ValueError naming the field when it does not fit the format."""
    try:
        prb, ts, dst = int(obj["prb_id"]), float(obj["timestamp"]), str(obj["dst_addr"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("an Atlas result needs a numeric prb_id and timestamp and a dst_addr") from None
    started = datetime.fromtimestamp(ts, UTC)
    name = str(obj.get("dst_name") or dst)
    result: ProbeResult = (_ping(obj, name, dst, started) if obj["type"] == "ping"
                           else _traceroute(obj, name, dst, started))
    agent = {"id": f"atlas-{prb}", "region": None, "isp": None, "timezone": "UTC", "source": "ripe-atlas",
             "address": obj.get("from")}
    target = {"id": name, "host": name, "datacenter": None, "line": None}
    # the same Atlas result always gets the same id, so importing it twice stores it once
    rid = str(uuid.uuid5(_NAMESPACE, f"{obj.get('msm_id')}/{prb}/{int(ts)}/{obj['type']}/{dst}"))
    return envelope(result, agent, target, result_id=rid)


def _ping(obj: Mapping[str, Any], name: str, dst: str, started: datetime) -> IcmpResult:
    samples: list[float | None] = []
    dups = 0
    for r in _list(obj["result"], "result"):
        if isinstance(r, Mapping) and r.get("dup"):
            dups += 1
        elif isinstance(r, Mapping) and isinstance(r.get("rtt"), int | float):
            samples.append(float(r["rtt"]))
        elif isinstance(r, Mapping) and "x" in r:
            samples.append(None)
    got = [s for s in samples if s is not None]
    return IcmpResult(probe="icmp", host=name, address=dst, started_at=started,
                      status="ok" if got else "down", sent=len(samples), received=len(got), duplicates=dups,
                      loss_pct=loss_pct(len(samples), len(got)) if samples else 100.0, rtt_ms=rtt_stats(got),
                      jitter_ms=jitter(samples), samples_ms=samples)


def _traceroute(obj: Mapping[str, Any], name: str, dst: str, started: datetime) -> MtrResult:
    from netprobe.lines import LineClassifier
    from netprobe.mtr.hops import Hop, flag_rate_limited, label_path

    hops: list[Hop] = []
    for h in _list(obj["result"], "result"):
        if not isinstance(h, Mapping) or not isinstance(h.get("hop"), int):
            continue
        addresses: list[str] = []
        samples: list[float | None] = []
        for r in _list(h.get("result") or [], f"hop {h['hop']} result"):
            if not isinstance(r, Mapping) or r.get("err"):
                continue
            if isinstance(r.get("rtt"), int | float):
                samples.append(float(r["rtt"]))
                if r.get("from") and r["from"] not in addresses:
                    addresses.append(str(r["from"]))
            elif "x" in r:
                samples.append(None)
        hops.append(Hop(h["hop"], addresses, samples))
    hops.sort(key=lambda hop: hop.count)
    reached = bool(hops) and dst in hops[-1].addresses
    flag_rate_limited(hops)
    route = label_path(hops, LineClassifier.default(), None)
    dest = hops[-1] if reached else None
    samples = list(dest.samples_ms) if dest else []
    got = [s for s in samples if s is not None]
    path_loss = dest.loss_pct if dest else 100.0
    return MtrResult(probe="mtr", host=name, address=dst, started_at=started, status="ok" if got else "down",
                     mode=str(obj.get("proto", "icmp")).lower(),
                     cycles=max((h.sent for h in hops), default=0),
                     max_hops=len(hops), reached=reached, source=f"atlas-{obj['prb_id']}", hops=hops,
                     route={**route.to_dict(), "path_loss_pct": path_loss, "declared_line": None,
                            "mismatch": False},
                     sent=len(samples) if dest else 1, received=len(got), loss_pct=path_loss,
                     rtt_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples)


def _list(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"Atlas {field} must be a list")
    return value
