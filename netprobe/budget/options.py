"""The options `budget` and `diagnose` share: what a new request's network share is made of."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


def connection_options(fn: F) -> F:
    """--tls, --keepalive and --calls, in that order in the help."""
    fn = click.option("--calls", metavar="N", type=int, default=1, show_default=True,
                      help="model calls in series per answer (agent workflows)")(fn)
    fn = click.option("--keepalive", is_flag=True, help="a warm connection: one round trip")(fn)
    return click.option("--tls", metavar="1.2|1.3", default="1.3", show_default=True,
                        help="TLS version of a new connection")(fn)
