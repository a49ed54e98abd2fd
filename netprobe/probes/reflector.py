"""What the two probes of the far end share (docs/probes.md): the target's `reflector` key, read by rmtr
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


TOKEN_ENV = "NETPROBE_REFLECTOR_TOKEN"


def cli_token(path: str) -> str:
    """`netprobe probe rmtr|owd --token-file F`: the token from F, else $NETPROBE_REFLECTOR_TOKEN; neither
    is a usage error (exit 2) naming the option."""
    import os

    from netprobe.config.secrets import read_secret
    from netprobe.errors import UsageError

    try:
        token = read_secret("reflector", file=path) if path else os.environ.get(TOKEN_ENV, "").strip()
    except SetupError as exc:
        raise UsageError(str(exc).replace("reflector.token_file", "--token-file")) from None
    if not token:
        raise UsageError(f"--token-file: the reflector needs this agent's token (`netprobe target add-agent` "
                         f"printed it), or set ${TOKEN_ENV}")
    return token
