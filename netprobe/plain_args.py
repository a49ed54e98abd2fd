"""Options read without typer and click, for the commands that start often and do little else in their
first moments (`report peak`): importing typer (with click) and building its command tree is a
visible share of a fleet report's < 1 s goal (see bench/README.md, report_scale).

Only the plain case is read here: every word an option the command takes, each once, with a value
that converts. Anything else (--help, an unknown or repeated option, a missing or bad value, a value
that starts with "-") gives None, and the caller hands the words to the typer tree as before, so its
messages and its rules stay the only ones a user meets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

Kind = Literal["str", "int", "float", "flag"]


def plain_options(args: Sequence[str], spec: Mapping[str, tuple[str, Kind]]) -> dict[str, Any] | None:
    """`spec`: option as typed (--days) → (key, kind). The values given, by key (str, int and float
    converted as click's STRING, INT and FLOAT types do: str(), int(), float()); None unless plain."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=") if args[i].startswith("--") else (args[i], "", "")
        found = spec.get(name)
        if found is None:
            return None
        key, kind = found
        if key in out:
            return None
        if kind == "flag":
            if eq:
                return None
            out[key] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None
            i += 1
            value = args[i]
        if not value or value.startswith("-"):
            return None
        try:
            out[key] = int(value) if kind == "int" else float(value) if kind == "float" else value
        except ValueError:
            return None
        i += 1
    return out


__all__ = ["Kind", "plain_options"]
