"""Validation of result envelopes (DESIGN §7) before they reach the database."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from netprobe.errors import UsageError
from netprobe.store.schema import ID


class EnvelopeError(UsageError):
    """A malformed envelope; the message names its position and the field."""


_Id = Field(min_length=1, max_length=ID)


class _Agent(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = _Id
    region: str | None = None
    isp: str | None = None
    timezone: str | None = None


class _Target(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = _Id
    host: str | None = None
    datacenter: str | None = None
    line: str | None = None


class _Result(BaseModel):
    """Only the fields the store reads; everything else is kept verbatim in the envelope (the raw
    dict), so the model need not copy it: extra fields are ignored, not refused."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    status: Literal["ok", "down", "error"]
    sent: int = Field(default=0, ge=0)
    received: int = Field(default=0, ge=0)
    duplicates: int = Field(default=0, ge=0)
    loss_pct: float | None = Field(default=None, ge=0, le=100)
    jitter_ms: float | None = Field(default=None, ge=0)
    samples_ms: list[float | None] = Field(default_factory=list)


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore")    # kept in the raw dict, as _Result's
    id: str = _Id
    probe: str = Field(min_length=1, max_length=32)
    started_at: AwareDatetime
    agent: _Agent
    target: _Target
    result: _Result


@dataclass(frozen=True, slots=True)
class Envelope:
    """A validated envelope: the fields the store indexes, plus the original dict."""

    id: str
    probe: str
    started_at: datetime
    agent: dict[str, Any]
    target: dict[str, Any]
    status: str
    sent: int
    received: int
    duplicates: int
    loss_pct: float | None
    jitter_ms: float | None
    samples_ms: tuple[float, ...]        # received replies only
    raw: dict[str, Any]
    text: str | None = None              # the JSON text `raw` was parsed from, when known


def parse_envelope(data: Any, where: str = "envelope", text: str | None = None) -> Envelope:
    fast = _fast_envelope(data, text)
    if fast is not None:
        return _checked(fast, where)
    if not isinstance(data, Mapping):
        raise EnvelopeError(f"{where}: expected a JSON object, got {type(data).__name__}")
    try:
        env = _Envelope.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            path = ".".join(str(p) for p in err["loc"]) or "(envelope)"
            problems.append(f"{path}: {err['msg']}")
        raise EnvelopeError(f"{where}: " + "; ".join(problems)) from None
    res = env.result
    return _checked(Envelope(
        id=env.id, probe=env.probe, started_at=env.started_at.astimezone(UTC),
        agent=env.agent.model_dump(), target=env.target.model_dump(), status=res.status,
        sent=res.sent, received=res.received, duplicates=res.duplicates, loss_pct=res.loss_pct,
        jitter_ms=res.jitter_ms, samples_ms=tuple([v for v in res.samples_ms if v is not None]),
        raw=dict(data), text=text,
    ), where)


def _checked(env: Envelope, where: str) -> Envelope:
    """What the model cannot say: counts that contradict each other, negative round trips."""
    if env.received > env.sent:
        raise EnvelopeError(f"{where}: result.received ({env.received}) exceeds result.sent ({env.sent})")
    if env.samples_ms and min(env.samples_ms) < 0:      # finite floats: allow_inf_nan=False
        raise EnvelopeError(f"{where}: result.samples_ms: negative round-trip time")
    return env


# -- the fast path --------------------------------------------------------------------------------
# The common envelope, exactly as an agent writes it, validated by hand: the pydantic models cost more
# than the rest of a write. Anything unusual (another type, a missing field, a nested extra, an odd
# timestamp, any doubt) returns None and goes through the models, so what is accepted, the values
# produced and every error message stay the models' own (tests/test_envelopes_fast.py compares them).

# RFC 3339 as both pydantic and datetime.fromisoformat read it alike (at most microseconds)
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})")
_STATUSES = frozenset(("ok", "down", "error"))
_SCALARS = (str, int, float, bool, type(None))
_AGENT_FIELDS = tuple(_Agent.model_fields)
_TARGET_FIELDS = tuple(_Target.model_fields)


class _Unusual(Exception):
    """Leave this envelope to the models."""


def _ident(value: Any, longest: int) -> str:
    if type(value) is not str or not 0 < len(value) <= longest:
        raise _Unusual
    return value


def _count(result: dict[str, Any], name: str) -> int:
    value = result.get(name, 0)
    if type(value) is not int or value < 0:
        raise _Unusual
    return value


def _real(value: Any) -> float:
    """A finite float (pydantic turns an int into a float too), or _Unusual."""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise _Unusual
        return value            # type: ignore[no-any-return]
    if kind is int:
        return float(value)     # OverflowError for a huge one: left to the models
    raise _Unusual


def _ref(data: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """An agent or target as its model dumps it: declared fields first (None when absent), then the
    extras in their order; only flat extras (a nested one would be copied by the model)."""
    if type(data) is not dict:
        raise _Unusual
    out: dict[str, Any] = {"id": _ident(data.get("id"), ID)}
    for name in fields[1:]:
        value = data.get(name)
        if value is not None and type(value) is not str:
            raise _Unusual
        out[name] = value
    for name, value in data.items():
        if name not in out:
            if type(value) not in _SCALARS:
                raise _Unusual
            out[name] = value
    return out


def _fast_envelope(data: Any, text: str | None) -> Envelope | None:
    if type(data) is not dict:
        return None
    try:
        result = data["result"]
        if type(result) is not dict:
            return None
        status = result["status"]
        if type(status) is not str or status not in _STATUSES:
            return None
        stamp = data["started_at"]
        if type(stamp) is not str or _STAMP.fullmatch(stamp) is None:
            return None
        started_at = datetime.fromisoformat(stamp).astimezone(UTC)
        loss = result.get("loss_pct")
        if loss is not None:
            loss = _real(loss)
            if not 0 <= loss <= 100:
                return None
        jitter = result.get("jitter_ms")
        if jitter is not None:
            jitter = _real(jitter)
            if jitter < 0:
                return None
        samples = result.get("samples_ms", [])
        if type(samples) is not list:
            return None
        got = [v for v in samples if v is not None]
        if set(map(type, got)) - {float}:
            got = [_real(v) for v in got]
        elif not math.isfinite(sum(got)):     # all finite floats, or some inf: then the models say so
            return None
        return Envelope(
            id=_ident(data["id"], ID), probe=_ident(data["probe"], 32), started_at=started_at,
            agent=_ref(data["agent"], _AGENT_FIELDS), target=_ref(data["target"], _TARGET_FIELDS),
            status=status, sent=_count(result, "sent"), received=_count(result, "received"),
            duplicates=_count(result, "duplicates"), loss_pct=loss, jitter_ms=jitter,
            samples_ms=tuple(got), raw=dict(data), text=text)
    except (_Unusual, KeyError, ValueError, OverflowError):
        return None


def parse_envelopes(items: Sequence[Any], texts: Sequence[str] | None = None) -> list[Envelope]:
    """Validate all or nothing; an error names the envelope's index in the batch. `texts`: each
    item's JSON text, kept with it. An item that is already an Envelope (validated by the caller, as
    `db import` does line by line) is taken as it is."""
    if texts is not None and len(texts) != len(items):
        raise ValueError(f"{len(texts)} texts for {len(items)} envelopes")
    return [item if type(item) is Envelope
            else parse_envelope(item, f"envelope {i}", texts[i] if texts is not None else None)
            for i, item in enumerate(items)]
