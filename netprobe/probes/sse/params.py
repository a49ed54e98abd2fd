"""Bounds for every request parameter, and strict integer parsing that names what was wrong."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_INT = re.compile(r"-?[0-9]{1,19}")
_MAX_ECHO = 40  # never reflect a long junk value back in an error message


@dataclass(frozen=True)
class Limits:
    """Inclusive bounds; a value outside them is a 400, never clamped silently."""

    max_count: int = 1_000_000          # /sse events per stream
    min_interval_ms: int = 1            # between events / tokens
    max_interval_ms: int = 60_000
    max_size: int = 1 << 20             # /sse data bytes per event
    max_wait_ms: int = 300_000          # think_ms and pause_ms
    max_ping_ms: int = 60_000           # comment interval (0 = no comments)
    max_tokens: int = 100_000           # chat content tokens and reasoning tokens, each
    max_body_bytes: int = 1 << 20       # chat request body


class ParamError(ValueError):
    """A request parameter is missing, malformed or out of range; str() is the one-line message."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + "…"


def int_param(source: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """`source[name]` as an int in low..high; query strings must be plain decimal, JSON a true integer."""
    if name not in source or source[name] is None:
        return default
    raw = source[name]
    value: int | None = None
    if isinstance(raw, str):
        value = int(raw) if _INT.fullmatch(raw) else None
    elif isinstance(raw, int) and not isinstance(raw, bool):  # JSON true is not 1 here
        value = raw
    if value is None or not low <= value <= high:
        raise ParamError(name, f"must be an integer in {low}..{high}, got {_shown(raw)}")
    return value
