"""What the two probes of the far end share (DESIGN §9): the target's `reflector` key, read by rmtr
(POST /api/v1/trace on it) and owd (UDP to its host and port), one TargetOption for both."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field

from netprobe.config.base import HttpUrl
from netprobe.errors import SetupError
from netprobe.probes.base import ProbeContext, ProbeTarget, ReflectorAuth, TargetOption

KEY = "reflector"
DEFAULT_PORT = 8473   # `netprobe target`'s default --listen port

OPTION = TargetOption(key=KEY, annotation=HttpUrl | None, required=True, field=Field(
    default=None, description="its `netprobe target` (reflector) base URL, for rmtr and owd"))


def url_of(target: ProbeTarget) -> str:
    """The target's reflector URL (the CLI puts its argument there), without a trailing slash."""
    url = target.option(KEY)
    return (url if isinstance(url, str) and url else target.url or target.host).rstrip("/")


def host_port(url: str) -> tuple[str, int]:
    """The reflector URL's host and port (its scheme's default when none is given)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else DEFAULT_PORT if parts.scheme == "http" else 0)
    return parts.hostname or "", port


def auth(ctx: ProbeContext) -> ReflectorAuth:
    """The agent's reflector token; a SetupError (exit 2 at start) when none was configured."""
    if ctx.reflector is None:
        raise SetupError("reflector: no token (set [reflector] token_file, or --token-file)")
    return ctx.reflector
