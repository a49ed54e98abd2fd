"""Durations as the config writes them: "500ms", "60s", "5m", "1h" or a number of seconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: str | float | int) -> float:
    """Seconds from a duration; raises ValueError with a readable message."""
    if isinstance(value, bool):
        raise ValueError("a duration must be a string like '60s' or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _RE.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a duration (use e.g. '500ms', '60s', '5m', '1h')")
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def _pydantic_duration(value: object) -> float:
    if not isinstance(value, str | int | float):
        raise ValueError("a duration must be a string like '60s' or a number of seconds")
    return parse_duration(value)


# Config fields typed `Duration` accept "500ms" / "60s" / 5 and hold seconds as a float.
Duration = Annotated[float, BeforeValidator(_pydantic_duration)]
