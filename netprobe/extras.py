"""The optional extras: `pip install netprobe` is the agent (probes, `netprobe target`, the lab);
`netprobe[influx]` adds the InfluxDB sink, `netprobe[server]` the collector, reports, budget,
dashboard and PostgreSQL. A module an extra provides is imported only where it is used, so a
missing one is named here, once, with the line that installs it."""

from __future__ import annotations

import importlib.util

# top-level module → the extra that installs it (pyproject.toml's optional-dependencies)
EXTRA_OF: dict[str, str] = {
    "numpy": "server",
    "psycopg": "server",
    "greenlet": "server",
    "influxdb_client": "influx",
}


def extra_for(exc: ModuleNotFoundError) -> str | None:
    """The extra that provides the module `exc` could not find; None when no extra does."""
    return EXTRA_OF.get((exc.name or "").partition(".")[0])


def install_hint(extra: str) -> str:
    return f"pip install 'netprobe[{extra}]'"


# the commands a plain agent host does not run
SERVER_COMMANDS = frozenset({"collector", "report", "budget", "demo"})


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:        # a finder that refuses the name outright
        return False


def missing_for_command(word: str) -> str | None:
    """The extra a top-level command needs and this install lacks; None when nothing is missing."""
    if word not in SERVER_COMMANDS:
        return None
    lacking = [m for m, extra in EXTRA_OF.items() if extra == "server" and not installed(m)]
    return "server" if lacking else None


def missing(module: str, field: str) -> str | None:
    """A configuration problem ("field: …") when `field` needs `module` and it is not installed."""
    if installed(module):
        return None
    return f"{field}: needs the '{EXTRA_OF[module]}' extra: {install_hint(EXTRA_OF[module])}"
