"""The envelope's JSON as the wire edges accept it (collector ingest, `db import`): one strict validator,
derived from the probes' result types, so a new probe's results are checked with no code here.

Each result dataclass's fields give its JSON keys and types (its to_dict() writes them as they are); a
result type lists the few whose JSON differs (`json_layout`, mtr's report) and what types cannot say
(`json_problems`: received ≤ sent, one sample per request, loss as defined). Strict means no coercion:
a string is not a number, a JSON boolean is not an integer, a float with a fraction is not a count.
Every string is refused with a NUL in it (PostgreSQL's jsonb cannot hold one), ids follow the config's
id rule, time zones must be in the zone database, and nothing unknown is let through.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    create_model,
)

from netprobe.config.base import ID_PATTERN, ID_RULE
from netprobe.probes.results import ProbeResult

# Bounds that keep every figure storable: a count is at most 2³¹−1, a string at most 64 KiB, a list at
# most 100,000 items. Reals need only be finite: sums that overflow take the store's slow path.
MAX_COUNT = 2**31 - 1
MAX_TEXT = 65_536
MAX_ITEMS = 100_000

_NO_NUL = r"^[^\x00]*$"
# A result's own id: the config's id rule, with ':' too (ids made of a time) and up to the column's length
RESULT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_STAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})$"
# pattern -> what a mismatch means, for the messages
_PATTERNS = {_NO_NUL: "contains \\u0000, which cannot be stored", ID_PATTERN: f"not a valid id: {ID_RULE}",
             RESULT_ID_PATTERN: "not a valid result id: use 1-128 letters, digits, '.', '_', ':' or '-', "
             "starting with a letter or digit",
             _STAMP: "not an RFC 3339 time with a time zone (2026-11-20T12:00:00Z, +08:00, ...)"}


def _real_stamp(value: str) -> str:
    datetime.fromisoformat(value)        # the pattern's shape, but also a real date and offset
    return value


@functools.lru_cache(maxsize=1024)
def _known_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (not in the zone database)") from None
    return name


Text = Annotated[str, Strict(), Field(max_length=MAX_TEXT, pattern=_NO_NUL)]
Id = Annotated[str, Strict(), Field(pattern=ID_PATTERN)]
ResultId = Annotated[str, Strict(), Field(pattern=RESULT_ID_PATTERN)]
Stamp = Annotated[str, Strict(), Field(pattern=_STAMP), AfterValidator(_real_stamp)]
Zone = Annotated[str, Strict(), Field(max_length=255, pattern=_NO_NUL), AfterValidator(_known_zone)]
Count = Annotated[int, Strict(), Field(ge=0, le=MAX_COUNT)]
Real = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Percent = Annotated[float, Strict(), Field(ge=0, le=100, allow_inf_nan=False)]
Port = Annotated[int, Strict(), Field(ge=0, le=65535)]
Asn = Annotated[int, Strict(), Field(ge=0, le=2**32 - 1)]
Flag = Annotated[bool, Strict()]
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def wire_type(tp: Any, name: str = "", owner: str = "") -> Any:
    """The strict JSON type of an annotation (`name`: the key, for percentages and ports)."""
    if tp is type(None) or tp is None:
        return None
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return Union[tuple(wire_type(a, name, owner) for a in get_args(tp))]  # noqa: UP007
    if origin is Literal:
        return tp
    if origin is list:
        (item,) = get_args(tp)
        return Annotated[list[wire_type(item, name, owner)], Strict(), Field(max_length=MAX_ITEMS)]  # type: ignore[misc]
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise TypeError(f"{owner}.{name}: JSON object keys are strings, not {key}")
        return Annotated[dict[Text, wire_type(value, name, owner)], Strict(),  # type: ignore[misc]
                         Field(max_length=MAX_ITEMS)]
    if tp is bool:
        return Flag
    if tp is int:
        return Port if name == "port" else Asn if name == "asns" else Count
    if tp is float:
        return Percent if name.endswith("_pct") or name.endswith("%") else Real
    if tp is str:
        return Text
    if tp is datetime:
        return Stamp
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_model(tp)
    if typing.is_typeddict(tp):
        return _typeddict_model(tp)
    raise TypeError(f"{owner}.{name}: no JSON type for {tp!r}; annotate result fields with JSON-able types")


def _resolved(cls: type, annotation: Any, name: str | None = None) -> Any:
    """A field's annotation; under `from __future__ import annotations` a string, evaluated in the
    namespace of the module of the class that declares the field `name` (a probe's result class lives
    in its probe's module, the common fields in netprobe.probes.results)."""
    if isinstance(annotation, str):
        owner = next((c for c in cls.__mro__ if name in vars(c).get("__annotations__", {})), cls)
        return eval(annotation, vars(sys.modules[owner.__module__]))
    return annotation


def _fields_model(name: str, fields: Mapping[str, tuple[Any, Any]]) -> type[BaseModel]:
    # keys such as mtr's "Loss%" are no identifiers: each field under a safe name, aliased to its key
    spec: dict[str, Any] = {}
    for i, (key, (tp, default)) in enumerate(fields.items()):
        spec[f"f{i}"] = (tp, Field(default, alias=key)) if default is not ... else (tp, Field(alias=key))
    return create_model(name, __config__=_STRICT, **spec)


@functools.cache
def _dataclass_model(cls: type) -> type[BaseModel]:
    """A nested record (RttStats): every field required, as to_dict() always writes them all."""
    fields = {f.name: (wire_type(_resolved(cls, f.type, f.name), f.name, cls.__name__), ...)
              for f in dataclasses.fields(cls) if f.init}
    return _fields_model(cls.__name__, fields)


@functools.cache
def _typeddict_model(td: Any) -> type[BaseModel]:
    hints = typing.get_type_hints(td, include_extras=True)
    fields: dict[str, tuple[Any, Any]] = {}
    for key, tp in hints.items():
        optional = get_origin(tp) is NotRequired or key in td.__optional_keys__
        if get_origin(tp) is NotRequired:
            (tp,) = get_args(tp)
        fields[key] = (wire_type(tp, key, td.__name__), None if optional else ...)
    return _fields_model(td.__name__, fields)


# not functools.cache: mypy takes a dataclass type for unhashable (its instances are)
_MODELS: dict[type[ProbeResult], type[BaseModel]] = {}


def result_model(cls: type[ProbeResult]) -> type[BaseModel]:
    """The strict model of `cls`'s to_dict(): its fields, with the changes its json_layout() lists. A
    field with a default may be absent (as older agents wrote fewer); the others are required."""
    if cls in _MODELS:
        return _MODELS[cls]
    layout = cls.json_layout()
    fields: dict[str, tuple[Any, Any]] = {}
    for f in dataclasses.fields(cls):
        if f.name in layout or not f.init:
            continue
        tp = wire_type(_resolved(cls, f.type, f.name), f.name, cls.__name__)
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = None
        else:
            default = ...
        fields[f.name] = (tp, default)
    for key, tp in layout.items():
        if tp is not None:
            fields[key] = (wire_type(tp, key, cls.__name__), None)
    fields["atlas"] = (AtlasSource | None, None)
    model = _MODELS[cls] = _fields_model(f"{cls.__name__}Json", fields)
    return model


class AtlasSource(BaseModel):
    """What `db import` of a RIPE Atlas result adds to its result: where it came from."""

    model_config = _STRICT
    fw: Count | None
    msm_id: Count | None
    type: Literal["ping", "traceroute"]


class AgentRef(BaseModel):
    # extras (an importer's `source`, `address`): flat strings, for the agents table's info column
    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[Id, Text | None] = Field(init=False)
    id: Id
    region: Text | None = None
    isp: Text | None = None
    timezone: Zone | None = None


class TargetRef(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[Id, Text | None] = Field(init=False)
    id: Id
    host: Text | None = None
    datacenter: Text | None = None
    line: Text | None = None


class _Head(BaseModel):
    """The envelope around the result; the result is validated by its probe's own model."""

    model_config = _STRICT
    id: ResultId
    probe: Id
    started_at: Stamp
    agent: AgentRef
    target: TargetRef
    result: dict[Text, Any]


_HEAD = TypeAdapter(_Head)


class WireError(ValueError):
    """An envelope that is not one; `problems`: each "path: what is wrong"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _problems(exc: ValidationError, prefix: str = "") -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        path = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "") or "(envelope)"
        msg = err["msg"]
        if err["type"] == "string_pattern_mismatch":
            pattern = (err.get("ctx") or {}).get("pattern")
            msg = _PATTERNS.get(str(pattern), msg)
        out.append(f"{path}: {msg}")
    return out


def check(data: Any, result_type: type[ProbeResult] | None) -> None:
    """Raise WireError unless `data` is a well-typed envelope whose result is `result_type`'s JSON
    (None: an unknown probe, refused)."""
    if type(data) is not dict:
        raise WireError([f"expected a JSON object, got {type(data).__name__}"])
    try:
        _HEAD.validate_python(data)
    except ValidationError as exc:
        raise WireError(_problems(exc)) from None
    if result_type is None:
        raise WireError([f"probe: unknown probe {data['probe']!r}"])
    result = data["result"]
    try:
        result_model(result_type).model_validate(result)
    except ValidationError as exc:
        raise WireError(_problems(exc, "result")) from None
    problems = [f"result.{p}" for p in result_type.json_problems(result)]
    if result.get("probe", data["probe"]) != data["probe"]:
        problems.append(f"result.probe: {result['probe']!r} is not the envelope's probe {data['probe']!r}")
    if "started_at" in result and result["started_at"] != data["started_at"] and \
            datetime.fromisoformat(result["started_at"]) != datetime.fromisoformat(data["started_at"]):
        problems.append("result.started_at: not the envelope's started_at")
    if problems:
        raise WireError(problems)
