"""`netprobe demo [--out DIR] [--hour-seconds S]` (root)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option("--out", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="where the databases, the HTML report and the agent log go (default ./netprobe-demo)")
@click.option("--hour-seconds", type=click.FloatRange(2.0, 60.0), default=5.0, show_default=True, metavar="S",
              help="real seconds per simulated hour (a day takes 24×)")
def demo(out: Path | None, hour_seconds: float) -> None:
    """Build the lab, run the agent through one compressed day (peak profile 20:00-23:00), then print
    the evening-peak report, the budget for a 1 s TTFT and the alerts that fired (root)."""
    from netprobe.demo.run import default_out, run
    from netprobe.textout import Out

    run(out.resolve() if out is not None else default_out(), hour_seconds, Out())
