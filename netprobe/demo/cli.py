"""`netprobe demo [--out DIR] [--hour-seconds S]` (root)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo(
    out: Annotated[Path | None, typer.Option("--out", metavar="DIR",
                                             help="where the databases, the HTML report and the agent log "
                                                  "go (default ./netprobe-demo)")] = None,
    hour_seconds: Annotated[float, typer.Option(
        "--hour-seconds", metavar="S", min=2.0, max=60.0,
        help="real seconds per simulated hour (a day takes 24×)")] = 5.0,
) -> None:
    """Build the lab, run the agent through one compressed day (peak profile 20:00-23:00), then print
    the evening-peak report, the budget for a 1 s TTFT and the alerts that fired (root)."""
    from netprobe.demo.run import default_out, run
    from netprobe.probes.render import console

    run(out.resolve() if out is not None else default_out(), hour_seconds, console())
