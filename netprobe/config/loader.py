"""Reading a configuration file: TOML text, sections through their models, one "path: message" per
problem. Shared by the agent's and the collector's configs and by the sections they both have."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from netprobe.errors import ConfigError

_M = TypeVar("_M", bound=BaseModel)


def is_collector_file(file: Path) -> bool:
    """A file with a [collector] table and no [agent] one; anything unparsable goes the agent's way,
    which reports it."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return "collector" in data and "agent" not in data


def read_config_text(path: Path) -> str:
    """A config file's text; an unreadable file is a ConfigError naming it (agent and collector alike)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(["file not found"], source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"not UTF-8 text (byte {exc.start})"], source=str(path)) from None
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror or exc}"], source=str(path)) from None


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a dict; a syntax error is a ConfigError giving its line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_tomlproblem_text(str(exc), text)], source=source) from None


def validate_sections(data: Mapping[str, Any], config: type[BaseModel],
                      problems: list[str]) -> dict[str, Any]:
    """Each [section] of a whole config (its fields that are models) through its model, absent optional
    ones as their defaults; the other keys (arrays of tables, [probes]) are the caller's to check.
    Problems named by path, a key that is no field of `config` among them."""
    allowed = tuple(config.model_fields)
    for key in data:
        if key not in allowed:
            problems.append(f"{key}: unknown section or key; allowed: {', '.join(allowed)}")
    out: dict[str, Any] = {}
    for name, field in config.model_fields.items():
        model = field.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        raw = data.get(name, None if field.is_required() else {})
        if raw is None:
            problems.append(f"{name}: missing section [{name}]")
        elif not isinstance(raw, dict):
            problems.append(f"{name}: must be a table ([{name}])")
        else:
            out[name] = validate_model(model, raw, name, problems)
    return out


def validate_model(model: type[_M], raw: dict[str, Any], where: str, problems: list[str],
                   extra_allowed: tuple[str, ...] = ()) -> _M | None:
    try:
        # strict also for the probes' own settings models: TOML values are typed, no coercion.
        return model.model_validate(raw, strict=True)
    except ValidationError as exc:
        for err in exc.errors():
            # Unknown probe names inside `probes` are reported per item by the caller, with the list.
            problems.append(problem_text(where, err, model, extra_allowed))
        return None


def problem_text(where: str, err: Any, model: type[BaseModel], extra_allowed: tuple[str, ...]) -> str:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    path = where
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    kind = err["type"]
    if kind == "extra_forbidden":
        holder = _model_at(model, loc)
        order = getattr(holder, "key_order", None)   # TargetConfig: the probes' keys after `probes`
        keys = order() if order is not None else list(holder.model_fields)
        allowed = [*keys, *(extra_allowed if holder is model else ())]
        return f"{path}: unknown key; allowed: {', '.join(allowed)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "string_too_short" and err.get("ctx", {}).get("min_length") == 1:
        return f"{path}: must not be empty"
    msg = str(err["msg"])
    msg = msg.removeprefix("Value error, ")
    if kind not in ("value_error", "assertion_error") and not isinstance(err.get("input"), dict | list):
        msg += f" (got {_shown(err.get('input'))})"
    return f"{path}: {msg}"


def _model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel]:
    """The nested model holding the key at the end of `loc` ([[classification.rules]] in a section)."""
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = _model_in(field.annotation) if field is not None else None
        if inner is not None:
            model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tomlproblem_text(message: str, text: str) -> str:
    # tomllib: "Expected '=' after a key in a key/value pair (at line 3, column 5)", or
    # "... (at end of document)" when the parser ran off the end.
    m = re.search(r"\(at line (\d+), column (\d+)\)$", message)
    if m:
        return f"line {m.group(1)}, column {m.group(2)}: invalid TOML: {message[: m.start()].strip()}"
    m = re.search(r"\(at end of document\)$", message)
    if m:
        lines = text.split("\n")
        where = f"line {len(lines)}, column {len(lines[-1]) + 1} (end of file)"
        return f"{where}: invalid TOML: {message[: m.start()].strip()}"
    return f"invalid TOML: {message}"
