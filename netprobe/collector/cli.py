"""`netprobe collector run | add-agent | revoke-agent | list-agents | add-viewer | revoke-viewer |
list-viewers --config FILE`."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from netprobe.textout import Group, Out, TextTable

if TYPE_CHECKING:
    from netprobe.collector.tokens import Tokens, Viewers
    from netprobe.config.collector import CollectorConfig
    from netprobe.store import Store


app = Group("collector", help="Run the central collector; manage agent tokens.")
T = TypeVar("T")

config_option = click.option("--config", "-c", "config", type=click.Path(path_type=Path), required=True,
                             metavar="FILE", help="collector configuration (TOML)")
viewer_arg = click.argument("name", metavar="NAME")
agent_arg = click.argument("agent_id", metavar="AGENT_ID")
json_option = click.option("--json", "as_json", is_flag=True, default=False, help="one JSON object on stdout")


def _config(path: Path) -> CollectorConfig:
    from netprobe.config.collector import load_collector_config  # lazily: pydantic models

    return load_collector_config(path)


def _with_tokens(path: Path, work: Callable[[Tokens], Awaitable[T]]) -> T:
    """Run `work` against the configured database's agent tokens (migrated first), then close it."""
    from netprobe.collector.tokens import Tokens

    return _with_store(path, lambda store: work(Tokens(store)))


def _with_viewers(path: Path, work: Callable[[Viewers], Awaitable[T]]) -> T:
    """Run `work` against the configured database's dashboard viewers (migrated first), then close it."""
    from netprobe.collector.tokens import Viewers

    return _with_store(path, lambda store: work(Viewers(store)))


def _with_store(path: Path, work: Callable[[Store], Awaitable[T]]) -> T:
    url = _config(path).storage.url   # a configuration error is reported before anything opens

    async def go() -> T:
        from netprobe.store import open_store

        store = await open_store(url)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(go())


@app.command("run")
@config_option
def run(config: Path) -> None:
    """Serve POST /api/v1/results, /healthz and /metrics (SIGTERM: finish requests, flush, exit 0)."""
    from netprobe.collector.server import run as serve
    from netprobe.logs import setup_logging

    cfg = _config(config)
    setup_logging(cfg.log.level, cfg.log.format)
    # A batch parses into tens of thousands of short-lived objects: run the cyclic GC less often,
    # and never again over the libraries loaded by now (several % of ingest CPU otherwise).
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    raise click.exceptions.Exit(asyncio.run(serve(cfg)))


@app.command("add-agent")
@agent_arg
@config_option
def add_agent(agent_id: str, config: Path) -> None:
    """Issue AGENT_ID a bearer token and print it as the last line of stdout (shown only once).

    An agent that already has one gets a new token: the old one stops working at once.

    AGENT_ID: the agent's id (agent.id in its config)."""
    from netprobe.config.base import check_id_arg

    check_id_arg(agent_id, "AGENT_ID")
    token, rotated = _with_tokens(config, lambda t: t.issue(agent_id))
    err = Out(err=True)
    if rotated:
        err.print(f"agent {agent_id}: token rotated; the previous token no longer works")
    else:
        err.print(f"agent {agent_id}: token issued")
    err.print("Store it now (e.g. the agent's [uplink] token_file); it cannot be shown again.")
    click.echo(token)


@app.command("revoke-agent")
@agent_arg
@config_option
def revoke_agent(agent_id: str, config: Path) -> None:
    """Revoke AGENT_ID's token: its requests are refused (401) from now on. add-agent issues a new one.

    AGENT_ID: the agent's id (agent.id in its config)."""
    record, was_live = _with_tokens(config, lambda t: t.revoke(agent_id))
    when = record.to_dict()["revoked_at"]
    click.echo(f"agent {agent_id}: token revoked" if was_live else
               f"agent {agent_id}: token already revoked (since {when})")


@app.command("list-agents")
@config_option
@json_option
def list_agents(config: Path, as_json: bool) -> None:
    """Agents that have a token: created, revoked, last used (never the token or its hash)."""
    records = [r.to_dict() for r in _with_tokens(config, lambda t: t.list())]
    if as_json:
        click.echo(json.dumps({"agents": records}))
        return
    if not records:
        Out().print("no agents have a token; add one with `netprobe collector add-agent`")
        return
    table = _table("agent", "created", "revoked", "last used")
    for r in records:
        table.add_row(r["id"], r["created_at"], r["revoked_at"] or "-", r["last_used_at"] or "never")
    Out().table(table)


@app.command("add-viewer")
@viewer_arg
@config_option
def add_viewer(name: str, config: Path) -> None:
    """Let NAME read the dashboard: prints its secret (the HTTP Basic password) as the last line of
    stdout, shown only once. A viewer that already has one gets a new secret: the old one stops working.

    NAME: the viewer's name (the HTTP Basic user)."""
    from netprobe.config.base import check_id_arg

    check_id_arg(name, "NAME")
    secret, rotated = _with_viewers(config, lambda v: v.issue(name))
    err = Out(err=True)
    err.print(f"viewer {name}: secret rotated; the previous one no longer works" if rotated
              else f"viewer {name}: added")
    if not _config(config).dashboard.enabled:
        err.print("note: the dashboard is off; set [dashboard] enabled = true in the collector's config")
    err.print(f"Log in to the dashboard as {name!r} with this secret; it cannot be shown again.")
    click.echo(secret)


@app.command("revoke-viewer")
@viewer_arg
@config_option
def revoke_viewer(name: str, config: Path) -> None:
    """Revoke NAME: the dashboard refuses it (401) from now on. add-viewer issues a new secret.

    NAME: the viewer's name (the HTTP Basic user)."""
    record, was_live = _with_viewers(config, lambda v: v.revoke(name))
    when = record.to_dict()["revoked_at"]
    click.echo(f"viewer {name}: revoked" if was_live else f"viewer {name}: already revoked (since {when})")


@app.command("list-viewers")
@config_option
@json_option
def list_viewers(config: Path, as_json: bool) -> None:
    """Dashboard viewers: created, revoked (never the secret or its hash)."""
    records = [r.to_dict() for r in _with_viewers(config, lambda v: v.list())]
    if as_json:
        click.echo(json.dumps({"viewers": records}))
        return
    if not records:
        Out().print("no viewers; add one with `netprobe collector add-viewer`")
        return
    table = _table("viewer", "created", "revoked")
    for r in records:
        table.add_row(r["name"], r["created_at"], r["revoked_at"] or "-")
    Out().table(table)


def _table(*heads: str) -> TextTable:
    table = TextTable(box=None)
    for head in heads:
        table.add_column(head)
    return table
