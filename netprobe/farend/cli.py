"""`netprobe target --listen HOST:PORT [--api-key-file FILE]`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from netprobe.errors import UsageError
from netprobe.net.targets_file import check_host_port

DEFAULT_LISTEN = "0.0.0.0:8473"  # 8471 is the collector's; 8473 is the emitter's everywhere


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT or [V6ADDR]:PORT to bind; port 0 asks the kernel for a free port (it is logged)."""
    head, sep, port = text.strip().rpartition(":")
    try:
        if sep and port == "0" and (head.endswith("]") or ":" not in head):
            return check_host_port(f"{head}:1")[0], 0
        return check_host_port(text)
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


def target(
    listen: str = typer.Option(DEFAULT_LISTEN, "--listen", "-l", metavar="HOST:PORT",
                               help="address to serve on; [ADDR]:PORT for IPv6, port 0 for any free port"),
    api_key_file: Path | None = typer.Option(None, "--api-key-file", metavar="FILE",
                                             help="require 'Authorization: Bearer <key>' on "
                                                  "/v1/chat/completions, the key read from FILE"),
    grace: float = typer.Option(2.0, "--grace", min=0.0, max=60.0,
                                help="seconds streams in flight may run on after SIGTERM"),
) -> None:
    """Serve the SSE emitter: GET /sse, POST /v1/chat/completions (OpenAI-style), GET /healthz."""
    from netprobe.farend.server import serve  # lazily: aiohttp only for this command
    from netprobe.logs import setup_logging

    host, port = parse_listen(listen)
    api_key = read_api_key(api_key_file) if api_key_file is not None else None
    setup_logging("info")
    asyncio.run(serve(host, port, api_key=api_key, grace=grace))
