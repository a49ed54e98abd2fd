"""`netprobe lab …`: emulated routes for demos and tests (root)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

from netprobe.errors import LabError, SetupError
from netprobe.lab import api
from netprobe.lab.render import lab_table

app = typer.Typer(no_args_is_help=True)
# Piped output (logs, CI) gets a wide table instead of rich's 80-column default.
console = Console(emoji=False, width=None if sys.stdout.isatty() else 200)
PROFILE = typer.Option("base", "--profile", help="base figures, or the routes' peak ones (routes.peak)")


@app.command("up")
def up_cmd(spec: Path = typer.Argument(..., help="lab spec (TOML), e.g. agents/lab.toml"),
           replace: bool = typer.Option(False, "--replace", help="tear down a running lab first"),
           profile: str = PROFILE) -> None:
    """Build namespaces, links and the impairment relay; print the map of targets."""
    state = api.up(spec, replace=replace, profile=profile)
    console.print(lab_table(state))


@app.command("down")
def down_cmd() -> None:
    """Remove the lab (idempotent)."""
    api.down()
    console.print("lab down")


@app.command("set")
def set_cmd(spec: Path = typer.Argument(..., help="same routes, new delay/jitter/loss/hops"),
            profile: str = PROFILE) -> None:
    """Change impairments of the running lab without dropping anything (or switch profile)."""
    state = api.set_impairments(spec, profile=profile)
    console.print(lab_table(state))


@app.command("status")
def status_cmd(json_out: bool = typer.Option(False, "--json", help="print state as JSON")) -> None:
    """Show the running lab, exit 1 if none is up or its relay died."""
    state = api.current()
    if state is None:
        if json_out:
            print("{}")
        else:
            console.print("no lab is up")
        raise typer.Exit(1)
    if json_out:
        print(state.model_dump_json(indent=1))
    else:
        console.print(lab_table(state))
        alive = state.relay_alive()
        console.print(f"relay pid {state.relay_pid}: " + ("[green]running[/]" if alive else "[red]dead[/]"))
    if not state.relay_alive():
        raise typer.Exit(1)


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_cmd(command: list[str] = typer.Argument(..., help="command to run in the agent namespace")) -> None:
    """Run a command in the agent namespace: `netprobe lab exec -- ping -c3 hk-cn2.lab`."""
    state = api.current()
    if state is None:
        raise LabError("no lab is up; run `netprobe lab up SPEC` first")
    if not api.has_lab_privileges():
        raise SetupError("netprobe lab exec needs root (it runs `ip netns exec`); run it with sudo")
    try:
        rc = subprocess.call(["ip", "netns", "exec", state.agent_ns, *command])
    except KeyboardInterrupt:
        rc = 130
    raise typer.Exit(rc)
