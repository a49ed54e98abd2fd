"""Secrets from the config: inline, a file, or an environment variable — read at start, never logged.
One reader for every token and signing secret, so each fails the same way, naming its key."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from netprobe.errors import SetupError


def read_secret(where: str, *, inline: str = "", file: str = "", env: str = "") -> str:
    """The first of inline / file / env that is set ("" when none is); SetupError names `where`
    (e.g. "uplink") and the key when a file is unreadable or empty, or the variable unset."""
    if inline:
        return inline
    if file:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SetupError(f"{where}.{_key(where, 'file')} {file}: {exc.strerror or exc}") from None
        if not value:
            raise SetupError(f"{where}.{_key(where, 'file')} {file}: the file is empty")
        return value
    if env:
        value = os.environ.get(env, "")
        if not value:
            raise SetupError(f"{where}.{_key(where, 'env')}: ${env} is not set")
        return value
    return ""


def _key(where: str, kind: str) -> str:
    return f"secret_{kind}" if where.startswith("notifiers") else f"token_{kind}"


def new_token() -> str:
    """A per-agent bearer token (collector uplink, reflector): shown once, stored only hashed."""
    return secrets.token_urlsafe(32)   # 256 bits: a plain sha256 is enough, no slow hash needed


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
