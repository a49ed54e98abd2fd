"""`netprobe probe <name>`: one command per registered probe, each brought by the probe's spec
(netprobe/probes/<name>_cli.py), so adding a probe adds its command here without an edit."""

from __future__ import annotations

import typer

from netprobe.probes import REGISTRY

app = typer.Typer(no_args_is_help=True, help="Run one probe now and print what it measured.")

for _spec in REGISTRY.values():
    if _spec.cli is not None:
        _cli = _spec.cli()
        app.command(_spec.name, epilog=_cli.epilog)(_cli.command)
