"""Validation of result envelopes (DESIGN §7) before they reach the database."""

from __future__ import annotations

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
    if res.received > res.sent:
        raise EnvelopeError(f"{where}: result.received ({res.received}) exceeds result.sent ({res.sent})")
    samples = tuple([v for v in res.samples_ms if v is not None])
    if samples and min(samples) < 0:      # finite floats: allow_inf_nan=False
        raise EnvelopeError(f"{where}: result.samples_ms: negative round-trip time")
    return Envelope(
        id=env.id, probe=env.probe, started_at=env.started_at.astimezone(UTC),
        agent=env.agent.model_dump(), target=env.target.model_dump(), status=res.status,
        sent=res.sent, received=res.received, duplicates=res.duplicates, loss_pct=res.loss_pct,
        jitter_ms=res.jitter_ms, samples_ms=samples, raw=dict(data), text=text,
    )


def parse_envelopes(items: Sequence[Any], texts: Sequence[str] | None = None) -> list[Envelope]:
    """Validate all or nothing; an error names the envelope's index in the batch. `texts`: each
    item's JSON text, kept with it."""
    if texts is not None and len(texts) != len(items):
        raise ValueError(f"{len(texts)} texts for {len(items)} envelopes")
    return [parse_envelope(item, f"envelope {i}", texts[i] if texts is not None else None)
            for i, item in enumerate(items)]
