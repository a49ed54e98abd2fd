"""The `netprobe` command. Each group lives with the code it drives; this file only wires them."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from netprobe.errors import ConfigError, NetprobeError

if TYPE_CHECKING:
    import typer

HELP = "Route-quality monitor for LLM inference served across borders."

# name → (module, attribute, help; None for a single command rather than a group)
_COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "probe": ("netprobe.probes.cli", "app", "Run one probe now and print what it measured."),
    "agent": ("netprobe.agent.cli", "app", "Run the scheduled agent."),
    "collector": ("netprobe.collector.cli", "app", "Run the central collector; manage agent tokens."),
    "config": ("netprobe.config.cli", "app", "Validate configuration files."),
    "db": ("netprobe.store.cli", "app", "Database maintenance."),
    "lab": ("netprobe.lab.cli", "app", "Emulated routes for demos and tests (root)."),
    "alerts": ("netprobe.alerts.cli", "app", "Alert notifiers: send a test message through each."),
    "report": ("netprobe.report.cli", "app", "Reports from the hourly rollups (evening peak)."),
    "budget": ("netprobe.budget.cli", "app", "What a TTFT target leaves the GPU; GPU memory sizing."),
    "demo": ("netprobe.demo.cli", "demo", None),
    "diagnose": ("netprobe.diagnose.cli", "diagnose", None),
    "compare": ("netprobe.compare.cli", "compare", None),
    "target": ("netprobe.farend.cli", "app", "The datacenter end: SSE emitter and owd reflector."),
}


def _root() -> None:
    pass


def build_app(only: str | None = None) -> typer.Typer:
    """The whole command tree, or just the group `only` names: `netprobe agent run` then does not
    import (and keep in memory for the daemon's lifetime) the lab, reports, collector, …"""
    import typer

    app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help=HELP)
    app.callback()(_root)  # a group even with one command in it: `netprobe target …` keeps its word
    for name, (module, attr, help_text) in _COMMANDS.items():
        if only is not None and name != only:
            continue
        obj = getattr(importlib.import_module(module), attr)
        if help_text is None:
            app.command(name)(obj)
        else:
            app.add_typer(obj, name=name, help=help_text)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # `from netprobe.cli import app`: the whole tree, built once
        globals()["app"] = full = build_app()
        return full
    raise AttributeError(f"module 'netprobe.cli' has no attribute {name!r}")


def _error(text: str, markup: bool = True) -> None:
    from rich.console import Console  # only on the way out with an error

    Console(emoji=False, stderr=True, soft_wrap=True).print(text, highlight=False, markup=markup)


def _agent_run(args: list[str]) -> None:
    """`netprobe agent run --config FILE [--duration S] [--summary]` without typer and click, which the
    daemon would keep in memory for its lifetime (~3 MB); returns (to the typer tree) for anything else."""
    from netprobe.agent.run import plain_args, run_agent

    parsed = plain_args(args)
    if parsed is not None:
        sys.exit(run_agent(*parsed))


def _plain(word: str, args: list[str]) -> None:
    """A plain `report peak …` or `budget …` (netprobe.plain_args) without typer and click: their
    import and command tree were a tenth of a fleet report's < 1 s; returns (to the typer tree) for
    anything else."""
    if word == "report" and args[:1] == ["peak"]:
        from netprobe.report import run as report

        got = report.plain_peak(args[1:])
        if got is not None:
            report.peak(**got)
            sys.exit(0)
    if word == "budget":
        from netprobe.budget import run as budget

        got = budget.plain_budget(args)
        if got is not None:
            budget.budget(**got)
            sys.exit(0)


def main() -> None:
    # The first word names the group; help, an unknown word or nothing at all get the whole tree.
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    # NumPy's OpenBLAS starts a thread per core at import: 70 ms of CPU per command, for arrays too
    # small to share (a report's products are matrix × vector). One thread, unless the user says.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        if "--help" not in sys.argv[2:]:
            _check_extra(word)
        if word == "agent" and sys.argv[2:3] == ["run"]:
            _agent_run(sys.argv[3:])
        if word in ("report", "budget"):
            _plain(word, sys.argv[2:])
        build_app(word if word in _COMMANDS else None)()
    except ConfigError as exc:
        where = f"{exc.source}: " if exc.source else ""
        n = len(exc.problems)
        _error(f"[bold red]error:[/] {where}{n} configuration problem{'s' * (n != 1)}")
        for problem in exc.problems:
            _error(f"  {problem}", markup=False)
        sys.exit(exc.exit_code)
    except NetprobeError as exc:
        _error(f"[bold red]error:[/] {exc}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except ModuleNotFoundError as exc:
        from netprobe.extras import extra_for

        extra = extra_for(exc)
        if extra is None:
            raise
        _needs(extra)


def _check_extra(word: str) -> None:
    from netprobe.extras import missing_for_command

    extra = missing_for_command(word)
    if extra is not None:
        _needs(extra)


def _needs(extra: str) -> None:
    from netprobe.extras import install_hint

    command = " ".join(a for a in sys.argv[1:3] if not a.startswith("-"))
    _error(f"error: netprobe {command} needs the '{extra}' extra: {install_hint(extra)}", markup=False)
    sys.exit(2)


if __name__ == "__main__":
    main()
