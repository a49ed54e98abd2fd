"""`netprobe probe <name>`: one command per registered probe, each brought by the probe's spec
(netprobe/probes/<name>/command.py), so adding a probe adds its command here without an edit."""

from __future__ import annotations

import click

from netprobe.probes import REGISTRY
from netprobe.textout import Group

# a textout.Group lists the probes in the registry's order (click would sort them)
app = Group("probe", no_args_is_help=True, help="Run one probe now and print what it measured.")

for _spec in REGISTRY.values():
    if _spec.cli is not None:
        _cli = _spec.cli()
        _help = _cli.command.__doc__ or ""
        # the whole first paragraph in the list of probes, not click's first 45 characters
        _short = " ".join(_help.strip().split("\n\n")[0].split())
        app.add_command(click.command(_spec.name, epilog=_cli.epilog, short_help=_short)(_cli.command))
