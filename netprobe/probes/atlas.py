"""RIPE Atlas ping and traceroute results as netprobe envelopes, so operators can start from public Atlas
probes inside their users' ISPs before deploying agents. The Atlas probe is the agent (`atlas-<prb_id>`).

Every result format RIPE documents (firmware 1, 4400, 4460, 4540, 4570, 4610, 4750, 5000+) is read:

- ping: `sent`, `rcvd`, `dup`, `min`/`avg`/`max` (−1 when nothing came back); from 4460 on also `result[]`
  of `{"rtt"}` (a reply), `{"dup": 1, "rtt"}` (a duplicate, not a request), `{"x": "*"}` (timeout) and
  `{"error"}` (the request could not be sent). Firmware 1 (and 0) results are summary-only: no `result`,
  sometimes numbers as strings. 4400 names the destination `addr`/`name` and the family `pf`/`mode`.
- traceroute: `result[]` of `{"hop": n, "result": [...]}` (or `{"hop": n, "error"}`), each reply
  `{"from", "rtt", "err"?, "dup"?, "late"?, ...}`, `{"x": "*"}` or `{"error"}`; `proto` ICMP, UDP or TCP.
  `late` is a reply to an earlier probe that had already timed out (no rtt): not a probe of its own.
  `err` is an ICMP error the hop answered with (`N` network, `H` host, `A` administratively prohibited,
  `P` protocol, `p` port unreachable, `h` beyond scope (IPv6), or the ICMP code as a number).
  Firmware 1 stored the traceroute command's text output in `result`; it is read line by line.

Read the way mtr reads its own probes: every probe sent counts in its hop's `Snt` whatever came back; a
reply carrying an ICMP error is that hop answering, with its RTT (counted in `Avg`, not lost), and is
flagged in the hop's `icmp_errors` ({code: replies}); duplicates count neither as sent nor as replies.
"""

from __future__ import annotations

import functools
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from netprobe.probes.icmp.runtime import IcmpResult
from netprobe.probes.mtr.runtime import MtrResult
from netprobe.probes.results import Status, envelope
from netprobe.stats import jitter, loss_pct, rtt_stats

if TYPE_CHECKING:
    from netprobe.net.lines import LineClassifier
    from netprobe.probes.mtr.hops import Hop

_NAMESPACE = uuid.UUID("6f1f5d1e-7c3a-4c55-9a53-6b1d2f0c9a10")
_ATLAS_KEYS = frozenset(("prb_id", "msm_id", "fw"))
_ENVELOPE_KEYS = frozenset(("id", "probe", "started_at", "agent", "target"))
_TYPES = ("ping", "traceroute")
_MODES = ("icmp", "udp", "tcp")


def is_atlas(obj: Mapping[str, Any]) -> bool:
    """Whether `db import` reads this object here rather than as a result envelope: it carries an Atlas
    result's keys, or none of an envelope's (then to_envelope says the line is neither)."""
    keys = obj.keys()
    return bool(_ATLAS_KEYS & keys) or not (_ENVELOPE_KEYS & keys)


def to_envelope(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One Atlas result as an envelope; ValueError naming the field when it does not fit the format."""
    if not _ATLAS_KEYS & obj.keys():
        raise ValueError("neither a result envelope (no id, probe, started_at, agent or target) nor a RIPE "
                         "Atlas result (no prb_id, msm_id or fw)")
    kind = _kind(obj)
    try:
        prb, ts = int(obj["prb_id"]), float(obj["timestamp"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("an Atlas result needs a numeric prb_id and timestamp") from None
    if not math.isfinite(ts):
        raise ValueError("an Atlas result needs a numeric prb_id and timestamp")
    started = datetime.fromtimestamp(ts, UTC)
    dst = _text(obj, "dst_addr", "addr", "address")
    name = _text(obj, "dst_name", "name") or dst
    if kind == "traceroute" and isinstance(obj.get("result"), str):
        text_dst, text_name = _text_destination(obj["result"])
        dst, name = dst or text_dst, name or text_name or text_dst
    if not name:
        raise ValueError("an Atlas result needs a dst_addr or dst_name")
    result = _ping(obj, name, dst, started) if kind == "ping" else _traceroute(obj, name, dst, started)
    body = result.to_dict()
    if kind == "ping" and not isinstance(obj.get("result"), list):
        # summary-only: Atlas's own min/avg/max, with no samples to take percentiles from
        body["rtt_ms"] = _summary_rtt(obj, result.received)
    body["atlas"] = {"fw": _int(obj, "fw"), "msm_id": _int(obj, "msm_id"), "type": kind}
    agent = {"id": f"atlas-{prb}", "region": None, "isp": None, "timezone": "UTC", "source": "ripe-atlas",
             "address": obj.get("from") or None}
    target = {"id": name, "host": name, "datacenter": None, "line": None}
    # the same Atlas result always gets the same id, so importing it twice stores it once
    rid = str(uuid.uuid5(_NAMESPACE, f"{obj.get('msm_id')}/{prb}/{int(ts)}/{kind}/{dst or name}"))
    return envelope(result, agent, target, result_id=rid, body=body)


def _kind(obj: Mapping[str, Any]) -> str:
    """ping or traceroute; results before firmware 4460 carry no `type` and are told by their fields."""
    kind = obj.get("type")
    if kind is None:
        msm = str(obj.get("msm_name") or "").lower()
        mode = str(obj.get("mode") or "").lower()
        res = obj.get("result")
        if msm in _TYPES:
            kind = msm
        elif any(k in obj for k in ("rcvd", "sent", "avg")) or (mode.startswith("icmp") and not res):
            kind = "ping"
        elif isinstance(res, str) or (isinstance(res, list) and any(isinstance(h, Mapping) and "hop" in h
                                                                     for h in res)):
            kind = "traceroute"
        else:
            raise ValueError("an Atlas result without a type that is neither a ping (sent, rcvd) nor a "
                             "traceroute (result[].hop)")
    if not isinstance(kind, str):
        raise ValueError("Atlas type must be a string")
    kind = kind.lower()
    if kind not in _TYPES:
        raise ValueError(f"a RIPE Atlas {kind} result: only ping and traceroute results are imported")
    return kind


# -- ping ---------------------------------------------------------------------------------------------

def _ping(obj: Mapping[str, Any], name: str, dst: str | None, started: datetime) -> IcmpResult:
    samples: list[float | None] = []
    dups = 0
    errors: list[str] = []
    raw = obj.get("result")
    if raw is not None and not isinstance(raw, list):
        raise ValueError("Atlas ping result must be a list")
    for i, r in enumerate(raw or []):
        if not isinstance(r, Mapping):
            raise ValueError(f"Atlas ping result[{i}] must be an object")
        if r.get("dup"):
            dups += 1           # an extra reply (or a late one: Atlas reports those as dups too)
        elif "rtt" in r:
            samples.append(_rtt(r["rtt"], f"ping result[{i}].rtt"))
        elif "x" in r:
            samples.append(None)
        elif "error" in r:
            errors.append(str(r["error"]))
            if dst is not None:   # a request that could not be sent still counts; no address, none sent
                samples.append(None)
    got = [s for s in samples if s is not None]
    summary = raw is None
    sent = _int(obj, "sent")
    received = _int(obj, "rcvd")
    if sent is None or (not summary and sent < len(samples)):
        sent = len(samples)
    if received is None or not summary:
        received = len(got)
    received = min(received, sent)
    dup = _int(obj, "dup")
    status: Status = "ok" if received else ("down" if sent else "error")
    error = "; ".join(dict.fromkeys(errors)) or (None if sent else "no request was sent")
    return IcmpResult(probe="icmp", host=name, address=dst, started_at=started, status=status,
                      error_kind=("send" if errors else None) if status != "ok" else None,
                      error=error if status != "ok" else None,
                      sent=sent, received=received, duplicates=dup if summary and dup is not None else dups,
                      loss_pct=loss_pct(sent, received) if sent else 100.0, rtt_ms=rtt_stats(got),
                      jitter_ms=jitter(samples), samples_ms=samples)


def _summary_rtt(obj: Mapping[str, Any], received: int) -> dict[str, float] | None:
    try:
        figures = {k: float(obj[k]) for k in ("min", "avg", "max")}
    except (KeyError, TypeError, ValueError):
        return None
    if not received or not all(math.isfinite(v) and v >= 0 for v in figures.values()):
        return None             # Atlas writes -1 when nothing came back
    return figures


# -- traceroute ---------------------------------------------------------------------------------------

@functools.cache
def _classifier() -> LineClassifier:
    """The default prefix table, built once: an import converts thousands of traces."""
    from netprobe.net.lines import LineClassifier

    return LineClassifier.default()


def _traceroute(obj: Mapping[str, Any], name: str, dst: str | None, started: datetime) -> MtrResult:
    from netprobe.probes.mtr.hops import flag_rate_limited, label_path

    raw = obj.get("result")
    errors: list[str] = []
    if isinstance(raw, str):
        hops = _text_hops(raw)
    elif isinstance(raw, list):
        hops = _json_hops(raw, errors)
    else:
        raise ValueError("Atlas traceroute result must be a list of hops")
    hops.sort(key=lambda hop: hop.count)
    reached = bool(hops) and dst is not None and dst in hops[-1].addresses
    flag_rate_limited(hops)
    route = label_path(hops, _classifier(), None)
    dest = hops[-1] if reached else None
    samples = list(dest.samples_ms) if dest else []
    got = [s for s in samples if s is not None]
    cycles = max((h.sent for h in hops), default=0)
    path_loss = dest.loss_pct if dest else 100.0
    status: Status = "ok" if got else ("error" if errors and not any(h.answered for h in hops) else "down")
    error_kind = error = None
    if status != "ok":
        error_kind = "send" if status == "error" else "no_reply"
        error = "; ".join(dict.fromkeys(errors)) or "the destination did not answer"
    size = _int(obj, "size")
    port = _int(obj, "dst_port") or _int(obj, "port")
    return MtrResult(probe="mtr", host=name, address=dst, started_at=started, status=status,
                     error_kind=error_kind, error=error, mode=_mode(obj), port=port, cycles=cycles,
                     max_hops=max((h.count for h in hops), default=0), reached=reached,
                     source=f"atlas-{obj['prb_id']}", packet_size=size if size is not None else 64, hops=hops,
                     route=replace(route, path_loss_pct=path_loss, declared_line=None, mismatch=False),
                     sent=dest.sent if dest else cycles, received=len(got), loss_pct=path_loss,
                     rtt_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples)


def _json_hops(raw: list[Any], errors: list[str]) -> list[Hop]:
    from netprobe.probes.mtr.hops import Hop

    hops: list[Hop] = []
    for h in raw:
        if not isinstance(h, Mapping) or not isinstance(h.get("hop"), int) or isinstance(h["hop"], bool):
            raise ValueError("Atlas traceroute result[] entries need an integer hop")
        where = f"hop {h['hop']}"
        if h.get("error"):
            errors.append(f"{where}: {h['error']}")
        replies = h.get("result") or []
        if not isinstance(replies, list):
            raise ValueError(f"Atlas {where} result must be a list")
        addresses: list[str] = []
        samples: list[float | None] = []
        codes: dict[str, int] = {}
        for i, r in enumerate(replies):
            if not isinstance(r, Mapping):
                raise ValueError(f"Atlas {where} result[{i}] must be an object")
            if "late" in r or r.get("dup"):
                continue        # answers a probe already counted (timed out, or answered once)
            if "error" in r:
                errors.append(f"{where}: {r['error']}")
            origin = r.get("from")
            if isinstance(origin, str) and origin and "x" not in r and origin not in addresses:
                addresses.append(origin)
            if "rtt" in r:
                samples.append(_rtt(r["rtt"], f"{where} result[{i}].rtt"))
                if "err" in r:
                    code = str(r["err"])
                    codes[code] = codes.get(code, 0) + 1
            else:
                samples.append(None)    # "x": "*", an error sending it, or a reply without its rtt
        hops.append(Hop(h["hop"], addresses, samples, icmp_errors=codes))
    return hops


# Firmware 1: the text of `traceroute`: " 3  10.0.0.1  5.123 ms  10.0.0.2  5.301 ms *" per hop line.
_HOP_LINE = re.compile(r"\s*(\d+)\s+(.*)")
_TO_LINE = re.compile(r"traceroute6? to (\S+)(?: \(([^)]+)\))?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _text_destination(text: str) -> tuple[str | None, str | None]:
    m = _TO_LINE.search(text)
    if m is None:
        return None, None
    return m.group(2) or m.group(1), m.group(1)


def _text_hops(text: str) -> list[Hop]:
    from netprobe.probes.mtr.hops import Hop

    hops: list[Hop] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _HOP_LINE.fullmatch(line)
        if m is None:
            if line.strip() and not _TO_LINE.match(line.strip()):
                raise ValueError(f"Atlas traceroute text line {n} is not a hop line: {line.strip()[:60]!r}")
            continue
        addresses: list[str] = []
        samples: list[float | None] = []
        codes: dict[str, int] = {}
        responder: str | None = None
        tokens = m.group(2).split()
        for i, tok in enumerate(tokens):
            if tok == "*":
                samples.append(None)
            elif tok == "ms":
                continue
            elif _NUMBER.fullmatch(tok) and i + 1 < len(tokens) and tokens[i + 1] == "ms":
                samples.append(float(tok))
                if responder is not None and responder not in addresses:
                    addresses.append(responder)
            elif tok.startswith("!"):
                code = tok[1:] or "!"
                codes[code] = codes.get(code, 0) + 1
            elif tok.startswith("(") and tok.endswith(")"):
                if responder in addresses:
                    addresses.remove(responder)
                responder = tok[1:-1]
            else:
                responder = tok
        hops.append(Hop(int(m.group(1)), addresses, samples, icmp_errors=codes))
    return hops


# -- fields -------------------------------------------------------------------------------------------

def _mode(obj: Mapping[str, Any]) -> str:
    """icmp, udp or tcp from `proto` (4460 on) or `mode` ("UDP4", "ICMP6" in 4400)."""
    proto = str(obj.get("proto") or obj.get("mode") or "icmp").lower().rstrip("46")
    if proto not in _MODES:
        raise ValueError(f"Atlas proto {proto!r} is not ICMP, UDP or TCP")
    return proto


def _text(obj: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _int(obj: Mapping[str, Any], key: str) -> int | None:
    """An integer field; firmware 0/1 results sometimes carry numbers as strings."""
    value = obj.get(key)
    if isinstance(value, bool):
        return None
    try:
        return int(value) if isinstance(value, int | str) else None
    except ValueError:
        return None


def _rtt(value: Any, field: str) -> float:
    try:
        rtt = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"Atlas {field} must be a number") from None
    if not math.isfinite(rtt) or rtt < 0:
        raise ValueError(f"Atlas {field} must be a non-negative number")
    return rtt

