"""`netprobe lab …`: emulated routes for demos and tests (root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click

from netprobe.errors import LabError, SetupError
from netprobe.lab import api
from netprobe.lab.render import lab_table
from netprobe.textout import Group, Out, style

app = Group("lab", help="Emulated routes for demos and tests (root).")
# Piped output (logs, CI): titles and captions wrap at 200 columns rather than 80.
console = Out()
profile_option = click.option("--profile", default="base", show_default=True,
                              help="base figures, or the routes' peak ones (routes.peak)")


@app.command("up")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--replace", is_flag=True, default=False, help="tear down a running lab first")
@profile_option
def up_cmd(spec: Path, replace: bool, profile: str) -> None:
    """Build namespaces, links and the impairment relay; print the map of targets.

    SPEC: lab spec (TOML), e.g. agents/lab.toml."""
    state = api.up(spec, replace=replace, profile=profile)
    console.table(lab_table(state))


@app.command("down")
def down_cmd() -> None:
    """Remove the lab (idempotent)."""
    api.down()
    console.print("lab down")


@app.command("set")
@click.argument("spec", type=click.Path(path_type=Path))
@profile_option
def set_cmd(spec: Path, profile: str) -> None:
    """Change impairments of the running lab without dropping anything (or switch profile).

    SPEC: same routes, new delay/jitter/loss/hops."""
    state = api.set_impairments(spec, profile=profile)
    console.table(lab_table(state))


@app.command("status")
@click.option("--json", "json_out", is_flag=True, default=False, help="print state as JSON")
def status_cmd(json_out: bool) -> None:
    """Show the running lab, exit 1 if none is up or its relay died."""
    state = api.current()
    if state is None:
        if json_out:
            print("{}")
        else:
            console.print("no lab is up")
        raise click.exceptions.Exit(1)
    if json_out:
        print(state.model_dump_json(indent=1))
    else:
        console.table(lab_table(state))
        alive = state.relay_alive()
        console.print(f"relay pid {state.relay_pid}: " + (style("running", "green") if alive
                                                           else style("dead", "red")))
    if not state.relay_alive():
        raise click.exceptions.Exit(1)


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@click.argument("command", nargs=-1, required=True)
def exec_cmd(command: tuple[str, ...]) -> None:
    """Run a command in the agent namespace: `netprobe lab exec -- ping -c3 hk-cn2.lab`.

    COMMAND: command to run in the agent namespace."""
    state = api.current()
    if state is None:
        raise LabError("no lab is up; run `netprobe lab up SPEC` first")
    if not api.has_lab_privileges():
        raise SetupError("netprobe lab exec needs root (it runs `ip netns exec`); run it with sudo")
    try:
        rc = subprocess.call(["ip", "netns", "exec", state.agent_ns, *command])
    except KeyboardInterrupt:
        rc = 130
    raise click.exceptions.Exit(rc)
