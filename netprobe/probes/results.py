"""What every probe's result shares (each probe module defines its own result type), and the envelope
that carries one. A network failure is a status, not an exception."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Self, TypedDict, TypeVar, Union, get_args, get_origin

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

    def fields_dict(self) -> dict[str, Any]:
        """to_dict() for a subclass that writes each of its fields in their order: a record as its
        to_dict(), a list or dict copied."""
        d = ProbeResult.to_dict(self)
        for name in _own_fields(type(self)):     # once per class: every round of the agent passes here
            value = getattr(self, name)
            d[name] = (dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list)
                       else value.to_dict() if hasattr(value, "to_dict") else value)
        return d

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

    # -- the record a result's JSON describes ----------------------------------------------------------
    @classmethod
    def from_json(cls, result: Mapping[str, Any]) -> Self:
        """The record of a well-typed to_dict() — as the wire validator accepts it, or as the store
        holds it — not validated again. Its fields are read as their types say (the counterpart of
        netprobe.store.wire, derived from the same fields): a key left out takes the field's default,
        as older agents wrote fewer; a key that is no field (an importer's `atlas`) stays in the JSON."""
        fields = _fields_of(cls, result)
        fields.update(cls.json_fields(result))
        return cls(**fields)

    @classmethod
    def json_fields(cls, result: Mapping[str, Any]) -> dict[str, Any]:
        """The fields json_layout() lists, read from the JSON their own way (from_json reads the rest)."""
        return {}


_COMMON = len(dataclasses.fields(ProbeResult))


_OWN_FIELDS: dict[type[ProbeResult], tuple[str, ...]] = {}


def _own_fields(cls: type[ProbeResult]) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = _OWN_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)[_COMMON:])
    return names


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


_ABSENT = object()
Decoder = Callable[[Any], Any]
T = TypeVar("T")


@functools.cache
def _decoders(cls: type) -> tuple[tuple[str, Decoder | None], ...]:
    """(field, how its JSON value becomes the field's value; None: as it is) for each field from_json
    reads: every init field of `cls` but those its json_layout() lists."""
    layout = cls.json_layout() if issubclass(cls, ProbeResult) else {}
    hints = typing.get_type_hints(cls)
    return tuple((f.name, decoder(hints[f.name], f"{cls.__name__}.{f.name}"))
                 for f in dataclasses.fields(cls) if f.init and f.name not in layout)


def decoder(tp: Any, where: str = "") -> Decoder | None:
    """How a JSON value (a well-typed one) becomes a value of `tp`; None when it is one already. Reals
    become floats (JSON's 5 for a float field), times datetimes in UTC, records their dataclass."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(tp) if a is not type(None)]      # None itself is never converted
        found = [d for a in members if (d := decoder(a, where)) is not None]
        if found and len(members) > 1:
            raise TypeError(f"{where}: cannot tell which of {tp} a JSON value is; list it in json_layout()")
        return found[0] if found else None
    if origin is list:
        (item,) = get_args(tp)
        each = decoder(item, where)
        return list if each is None else functools.partial(_list_of, each)
    if origin is dict:
        _, value_type = get_args(tp)
        each = decoder(value_type, where)
        return dict if each is None else functools.partial(_dict_of, each)
    if tp is float:
        return float
    if tp is datetime:
        return _utc
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return functools.partial(record_of, tp)
    if tp in (int, str, bool) or origin is Literal or typing.is_typeddict(tp):
        return None
    raise TypeError(f"{where}: no JSON reading of {tp!r}; list it in json_layout(), read it in json_fields()")


def _list_of(each: Decoder, values: list[Any]) -> list[Any]:
    return [v if v is None else each(v) for v in values]


def _dict_of(each: Decoder, values: dict[str, Any]) -> dict[str, Any]:
    return {k: v if v is None else each(v) for k, v in values.items()}


def _utc(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def _fields_of(cls: type, value: Mapping[str, Any]) -> dict[str, Any]:
    """The fields `value` gives (a key left out: the field's default)."""
    return {name: v if convert is None or v is None else convert(v)
            for name, convert in _decoders(cls) if (v := value.get(name, _ABSENT)) is not _ABSENT}


def record_of(cls: type[T], value: Mapping[str, Any]) -> T:
    """A dataclass from its JSON object (its fields read as from_json reads a result's)."""
    return cls(**_fields_of(cls, value))


class RttSummaryJson(TypedDict):
    min: float
    avg: float
    max: float


def envelope(result: ProbeResult, agent: dict[str, Any], target: dict[str, Any],
             result_id: str | None = None, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result envelope of docs/api.md: what is stored, uploaded and imported. `body`: the result's
    to_dict() when the caller already has it."""
    return {
        "id": result_id or new_result_id(),
        "probe": result.probe,
        "started_at": iso(result.started_at),
        "agent": agent,
        "target": target,
        "result": body if body is not None else result.to_dict(),
    }
