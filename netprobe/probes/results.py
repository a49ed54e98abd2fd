"""What every probe's result shares (each probe module defines its own result type), and the envelope
that carries one. A network failure is a status, not an exception."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from netprobe.stats import loss_pct
from netprobe.times import iso, utc_now

# ok: the target answered (possibly with some loss); down: the probe ran and the target failed
# (100 % loss, every connect refused); error: the probe could not run (name does not resolve, ...).
Status = Literal["ok", "down", "error"]


def new_result_id() -> str:
    """Client-generated unique id (time-ordered UUIDv7-like) that makes ingest idempotent."""
    ms = int(utc_now().timestamp() * 1000)
    rand = uuid.uuid4().int & ((1 << 74) - 1)
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


@dataclass(slots=True)
class ProbeResult:
    """Fields common to every probe; subclasses add their own and extend to_dict()."""

    probe: str
    host: str
    started_at: datetime
    status: Status
    address: str | None = None
    duration_ms: float = 0.0
    error_kind: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "host": self.host,
            "address": self.address,
            "started_at": iso(self.started_at),
            "duration_ms": self.duration_ms,
            "status": self.status,
            "error_kind": self.error_kind,
            "error": self.error,
        }

    # -- the JSON the envelope validator expects (netprobe.store.wire derives it from the fields) ----
    @classmethod
    def json_layout(cls) -> Mapping[str, object]:
        """Fields whose to_dict() JSON is not the attribute as it is: key -> that JSON's type, None
        for an attribute to_dict() does not write."""
        return {}

    @classmethod
    def json_problems(cls, result: Mapping[str, Any]) -> list[str]:
        """What the types cannot say about a well-typed to_dict(): "field: problem" each."""
        return count_problems(result)


def count_problems(result: Mapping[str, Any], *, answers_are_received: bool = True) -> list[str]:
    """A round's counts against each other: received ≤ sent, one sample per request (when samples were
    kept; `answers_are_received`: the answered ones are what was received), loss as stats.loss_pct."""
    problems: list[str] = []
    sent, received = result.get("sent", 0), result.get("received", 0)
    if received > sent:
        problems.append(f"received: {received} exceeds sent ({sent})")
    samples = result.get("samples_ms") or []
    if samples:
        if len(samples) != sent:
            problems.append(f"samples_ms: {len(samples)} samples for {sent} requests sent (one per request)")
        answered = sum(s is not None for s in samples)
        if answers_are_received and answered != received:
            problems.append(f"samples_ms: {answered} answered samples, but received is {received}")
    loss = result.get("loss_pct")
    if loss is not None and "sent" in result:
        # nothing sent: 0 % as defined, or 100 % as importers say of a round that could not send
        want = (loss_pct(sent, received),) if sent else (0.0, 100.0)
        if not any(abs(loss - w) <= 1e-9 * max(1.0, w) for w in want):
            problems.append(f"loss_pct: {loss} is not 100·(sent−received)/sent = {want[0]:g} "
                            f"(sent {sent}, received {received})")
    return problems


class RttSummaryJson(TypedDict):
    min: float
    avg: float
    max: float


def envelope(result: ProbeResult, agent: dict[str, Any], target: dict[str, Any],
             result_id: str | None = None, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result envelope of DESIGN §7: what is stored, uploaded and imported. `body`: the result's
    to_dict() when the caller already has it."""
    return {
        "id": result_id or new_result_id(),
        "probe": result.probe,
        "started_at": iso(result.started_at),
        "agent": agent,
        "target": target,
        "result": body if body is not None else result.to_dict(),
    }
