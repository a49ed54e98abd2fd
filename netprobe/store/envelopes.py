"""Result envelopes (docs/api.md) as the store takes them: validated once, at the wire edge, by the strict
validator of netprobe.store.wire (derived from the probe's result type)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from netprobe.errors import UsageError
from netprobe.probes import REGISTRY
from netprobe.probes.results import ProbeResult, envelope


class EnvelopeError(UsageError):
    """A malformed envelope; the message names its position and the field."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """One round as the store, the uplink and the sinks take it: the fields the store indexes, its
    JSON (docs/api.md) as a dict, and its typed result. Built by envelope_of from a result this process
    measured, by parse_envelope from the wire (validated), or by stored_envelope from the store's JSON."""

    id: str
    probe: str
    started_at: datetime
    agent: dict[str, Any]                # declared fields first (None when absent), then any extras
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
    # the typed result: the one measured here, or read from the JSON when first asked for (`result`)
    _result: ProbeResult | None = field(default=None, repr=False, compare=False)

    @property
    def result(self) -> ProbeResult:
        """The round's result as its probe's record. Read from the JSON once, on first use: most
        envelopes a collector takes are only indexed and rolled up, from the fields above."""
        typed = self._result
        if typed is None:
            spec = REGISTRY.get(self.probe)
            typed = (spec.result_type if spec is not None else ProbeResult).from_json(self.raw["result"])
            object.__setattr__(self, "_result", typed)
        return typed


_AGENT_FIELDS = ("id", "region", "isp", "timezone")
_TARGET_FIELDS = ("id", "host", "datacenter", "line")


def _ref(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """An agent or target: its declared fields first (None when absent), then the extras in order."""
    out = {name: data.get(name) for name in fields}
    out.update(data)
    return out


def _real(value: float | None) -> float | None:
    return None if value is None else float(value)      # JSON's 5 for a float field is 5.0


def parse_envelope(data: Any, where: str = "envelope", text: str | None = None) -> Envelope:
    """`data` (parsed JSON) as an Envelope, or EnvelopeError naming `where` and every problem."""
    # the validator's pydantic models only where envelopes come in from outside: the agent
    # stores its own rounds (envelope_of) and never loads them
    from netprobe.store import wire

    probe = data.get("probe") if type(data) is dict else None
    spec = REGISTRY.get(probe) if type(probe) is str else None
    try:
        wire.check(data, spec.result_type if spec is not None else None)
    except wire.WireError as exc:
        raise EnvelopeError(f"{where}: {exc}") from None
    return stored_envelope(data, text)


def parse_envelopes(items: Sequence[Any], texts: Sequence[str] | None = None) -> list[Envelope]:
    """Validate all or nothing; an error names the envelope's index in the batch. `texts`: each
    item's JSON text, kept with it."""
    if texts is not None and len(texts) != len(items):
        raise ValueError(f"{len(texts)} texts for {len(items)} envelopes")
    return [parse_envelope(item, f"envelope {i}", texts[i] if texts is not None else None)
            for i, item in enumerate(items)]


def stored_envelope(data: dict[str, Any], text: str | None = None) -> Envelope:
    """An envelope's JSON that was validated when it came in (parse_envelope's, or as the store holds
    it) as an Envelope, not validated again; `text`: the JSON text it was parsed from."""
    result = data["result"]
    samples = result.get("samples_ms") or ()
    return Envelope(
        id=data["id"], probe=data["probe"],
        started_at=datetime.fromisoformat(data["started_at"]).astimezone(UTC),
        agent=_ref(data["agent"], _AGENT_FIELDS), target=_ref(data["target"], _TARGET_FIELDS),
        status=result["status"], sent=result.get("sent", 0), received=result.get("received", 0),
        duplicates=result.get("duplicates", 0), loss_pct=_real(result.get("loss_pct")),
        jitter_ms=_real(result.get("jitter_ms")),
        samples_ms=tuple([float(v) for v in samples if v is not None]), raw=dict(data), text=text)


def envelope_of(result: ProbeResult, agent: dict[str, Any], target: dict[str, Any], *,
                result_id: str | None = None, body: dict[str, Any] | None = None) -> Envelope:
    """This process's own round: its result's to_dict() (`body`, when the caller has it) in an
    envelope, not validated again — it is typed by construction; the wire edges check what others send.
    The indexed fields are the typed result's own. `agent` and `target` are taken as they are, not
    copied (the agent passes the same agent round after round; nothing changes them); written with
    their declared fields first (as Config.agent_envelope and ProbeTarget.as_envelope write them),
    they are the Envelope's too."""
    raw = envelope(result, agent, target, result_id=result_id, body=body)
    if not _declared_first(agent, _AGENT_FIELDS):
        agent = _ref(agent, _AGENT_FIELDS)
    if not _declared_first(target, _TARGET_FIELDS):
        target = _ref(target, _TARGET_FIELDS)
    # every probe's figures under the same names (a bare ProbeResult, a round that could not run,
    # has none), as stored_envelope reads them from the JSON
    samples: list[float | None] = getattr(result, "samples_ms", None) or []
    return Envelope(
        id=raw["id"], probe=result.probe, started_at=result.started_at.astimezone(UTC), agent=agent,
        target=target, status=result.status, sent=getattr(result, "sent", 0),
        received=getattr(result, "received", 0), duplicates=getattr(result, "duplicates", 0),
        loss_pct=getattr(result, "loss_pct", None), jitter_ms=getattr(result, "jitter_ms", None),
        samples_ms=tuple([v for v in samples if v is not None]), raw=raw, _result=result)


def _declared_first(ref: dict[str, Any], fields: tuple[str, ...]) -> bool:
    return tuple(islice(ref, len(fields))) == fields
