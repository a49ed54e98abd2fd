"""`netprobe target --listen HOST:PORT [--api-key-file FILE] [--udp HOST:PORT --tokens FILE]`, and
`netprobe target add-agent / revoke-agent AGENT_ID --tokens FILE` for the reflector's agents."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from netprobe.errors import UsageError
from netprobe.net.targets_file import check_listen

DEFAULT_LISTEN = "0.0.0.0:8473"  # 8471 is the collector's; 8473 is the emitter's everywhere


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT or [V6ADDR]:PORT to bind; port 0 asks the kernel for a free port (it is logged)."""
    try:
        return check_listen(text)
    except ValueError as exc:
        raise UsageError(f"--listen: {exc}") from None


def read_api_key(path: Path) -> str:
    try:
        key = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError(f"--api-key-file: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"--api-key-file: cannot read {path}: {exc.strerror or exc}") from None
    if not key or any(c.isspace() for c in key):
        raise UsageError(f"--api-key-file: {path} must hold one key (no spaces), found "
                         f"{'nothing' if not key else 'whitespace inside'}")
    return key


TokensOption = click.option("--tokens", type=click.Path(path_type=Path), required=True, metavar="FILE",
                            help="the reflector's tokens file (JSON)")
AgentArg = click.argument("agent_id", metavar="AGENT_ID")


@click.group("target", invoke_without_command=True,
             help="The datacenter end: SSE emitter and owd reflector.")
@click.option("--listen", "-l", default=DEFAULT_LISTEN, show_default=True, metavar="HOST:PORT",
              help="address to serve on; [ADDR]:PORT for IPv6, port 0 for any free port")
@click.option("--api-key-file", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="require 'Authorization: Bearer <key>' on /v1/chat/completions, the key read from FILE")
@click.option("--grace", type=click.FloatRange(0.0, 60.0), default=2.0, show_default=True,
              help="seconds streams in flight may run on after SIGTERM")
@click.option("--udp", default=None, metavar="HOST:PORT",
              help="also reflect owd packets on this UDP address (needs --tokens)")
@click.option("--tokens", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="the agents allowed to use the reflector (add-agent writes it)")
@click.option("--prefill-ms", default=None, metavar="P50[,P95]",
              help="openai mode: time to the first token once a slot is free, constant or log-normal "
                   "through P50 and P95 (a request's think_ms wins)")
@click.option("--token-ms", type=click.IntRange(1, 60_000), default=20, show_default=True, metavar="MS",
              help="openai mode: one token every MS (a request's interval_ms wins)")
@click.option("--slots", type=click.IntRange(min=1), default=None, metavar="N",
              help="openai mode: requests generating at once; the rest queue")
@click.option("--seed", type=int, default=None, metavar="N", help="seed of the prefill draws")
@click.pass_context
def target(ctx: click.Context, listen: str, api_key_file: Path | None, grace: float, udp: str | None,
           tokens: Path | None, prefill_ms: str | None, token_ms: int, slots: int | None,
           seed: int | None) -> None:
    """Serve the SSE emitter: GET /sse, POST /v1/chat/completions (OpenAI-style), GET /healthz; with
    --udp, the owd reflector too."""
    if ctx.invoked_subcommand is not None:
        return
    from netprobe.farend import tokens as token_file
    from netprobe.farend.server import serve  # lazily: aiohttp only for this command
    from netprobe.logs import setup_logging
    from netprobe.probes.sse.model import ServerModel
    from netprobe.stats import lognormal_option

    host, port = parse_listen(listen)
    api_key = read_api_key(api_key_file) if api_key_file is not None else None
    reflect = _udp(udp) if udp is not None else None
    if reflect is not None and tokens is None:
        raise UsageError("--udp: the reflector needs --tokens FILE (`netprobe target add-agent` writes it)")
    if tokens is not None:
        token_file.load(tokens)         # a bad file is a usage error now, not a failure after start-up
    prefill = lognormal_option(prefill_ms, "--prefill-ms") if prefill_ms is not None else None
    model = ServerModel(prefill=prefill, token_ms=token_ms, slots=slots, seed=seed)
    setup_logging("info")
    asyncio.run(serve(host, port, api_key=api_key, grace=grace, udp=reflect, tokens=tokens, model=model))


app = target


def _udp(text: str) -> tuple[str, int]:
    try:
        return parse_listen(text)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--listen", "--udp", 1)) from None


@app.command("add-agent")
@AgentArg
@TokensOption
def add_agent(agent_id: str, tokens: Path) -> None:
    """Issue AGENT_ID a reflector token and print it as the last line of stdout (shown only once).
    A running `netprobe target` takes it on SIGHUP.

    AGENT_ID: the agent's id (agent.id in its config)."""
    from netprobe.farend import tokens as token_file

    token, rotated = token_file.issue(tokens, agent_id)
    what = "rotated; the previous one no longer works" if rotated else "issued"
    click.echo(f"agent {agent_id}: reflector token {what} — store it now (the agent's [reflector] "
               "token_file); it cannot be shown again", err=True)
    click.echo(token)


@app.command("revoke-agent")
@AgentArg
@TokensOption
def revoke_agent(agent_id: str, tokens: Path) -> None:
    """Revoke AGENT_ID's reflector token (a running `netprobe target` drops it on SIGHUP).

    AGENT_ID: the agent's id (agent.id in its config)."""
    from netprobe.farend import tokens as token_file

    was_live = token_file.revoke(tokens, agent_id)
    click.echo(f"agent {agent_id}: reflector token {'revoked' if was_live else 'already revoked'}")
