"""Dashboard viewers (docs/dashboard.md): a name and a random secret, shown once, kept as a sha256 hash."""

from __future__ import annotations

import hmac

from netprobe.config.base import check_id_arg
from netprobe.config.secrets import hash_token, new_token
from netprobe.errors import UsageError
from netprobe.store import Store
from netprobe.store.viewers import Viewer, ViewerTable
from netprobe.times import utc_now


def check_viewer_name(name: str) -> str:
    """An id as agents' are (no ":", which HTTP Basic would split on), as a UsageError (exit 2)."""
    return check_id_arg(name, "NAME")


class Viewers:
    """The dashboard_viewers table of an open Store. Errors are StorageError (database) or UsageError."""

    def __init__(self, store: Store) -> None:
        self._table = ViewerTable(store)

    async def issue(self, name: str) -> tuple[str, bool]:
        """A new secret for `name` → (secret, rotated); rotating replaces and un-revokes the old one."""
        check_viewer_name(name)
        secret = new_token()
        rotated = await self._table.put(name, hash_token(secret), utc_now())
        return secret, rotated

    async def revoke(self, name: str) -> tuple[Viewer, bool]:
        record, changed = await self._table.revoke(name, utc_now())
        if record is None:
            raise UsageError(f"viewer {name!r} is unknown; `netprobe collector list-viewers` shows the "
                             "viewers")
        return record, changed

    async def list(self) -> list[Viewer]:
        return await self._table.list()

    async def authenticate(self, name: str, secret: str) -> bool:
        """Whether `secret` is live viewer `name`'s. Reads only: a page view writes nothing."""
        if not name or not secret or len(name) > 128 or len(secret) > 512:
            return False
        stored = await self._table.live_hash(name)
        # compare_digest: the hash of a wrong secret must not be told from the right one by timing
        return stored is not None and hmac.compare_digest(stored, hash_token(secret))
