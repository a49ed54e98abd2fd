"""What every configuration model shares (agent, collector, alerts, line rules): typed TOML with
unknown keys refused, TOML arrays accepted for tuple fields, the one rule for ids and names and the one
for http(s) URLs."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from netprobe.errors import UsageError

# The one rule for ids (agents, targets, results) and names; the envelope validator applies it too.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ID_RULE = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
_ID_RE = re.compile(ID_PATTERN)


class StrictModel(BaseModel):
    # strict: TOML is typed, so "20" for a count or 1 for a bool is a mistake worth reporting.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def as_tuple(value: object) -> object:
    # TOML arrays arrive as lists; strict validation of a tuple field would reject them.
    return tuple(value) if isinstance(value, list) else value


def check_id(value: str) -> str:
    if not _ID_RE.match(value):
        raise ValueError(f"{value!r} is not a valid id: {ID_RULE}")
    return value


def check_id_arg(value: str, label: str) -> str:
    """check_id for a command-line argument: a bad id is a UsageError (exit 2) naming `label`."""
    try:
        return check_id(value)
    except ValueError as exc:
        raise UsageError(f"{label}: {exc}") from None


Ident = Annotated[str, AfterValidator(check_id)]

_HTTP_URL_RE = re.compile(r"^https?://[^/\s]+")


def is_http_url(value: str) -> bool:
    return bool(_HTTP_URL_RE.match(value))


def check_http_url(value: str) -> str:
    if not is_http_url(value):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


HttpUrl = Annotated[str, AfterValidator(check_http_url)]
# The same, or "" for a key whose empty value means "off" ([influxdb] url, [uplink] url).
HttpUrlOrOff = Annotated[str, AfterValidator(lambda v: v and check_http_url(v))]


def check_unique(seen: dict[str, int], value: object, index: int, where: str, what: str, array: str,
                 problems: list[str]) -> None:
    """In an array of tables, a repeated `value` (an id, a name) is a problem naming its first use."""
    if not isinstance(value, str):
        return
    if value in seen:
        problems.append(f"{where}: duplicate {what} {value!r} (first used by {array}[{seen[value]}])")
    else:
        seen[value] = index
