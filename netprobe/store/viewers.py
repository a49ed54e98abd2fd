"""The dashboard_viewers table: who may read the dashboard (docs/dashboard.md), each secret stored only as its
hash, as agent tokens are (netprobe.store.tokens). Nothing here is written by a page view."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from netprobe.store.schema import dashboard_viewers
from netprobe.store.secrets_table import put_secret, revoke_secret
from netprobe.store.store import Store
from netprobe.times import iso

_V = dashboard_viewers.c


@dataclass(frozen=True, slots=True)
class Viewer:
    """What may be shown about a viewer: never the secret or its hash."""

    name: str
    created_at: datetime
    revoked_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "created_at": iso(self.created_at),
                "revoked_at": iso(self.revoked_at) if self.revoked_at is not None else None}


class ViewerTable:
    """Reads and writes of dashboard_viewers; errors are StorageError."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, name: str, secret_hash: str, now: datetime) -> bool:
        """Give `name` this secret (replacing and un-revoking any old one); True if it had one."""
        return await put_secret(self._store, dashboard_viewers, "name", name, ("secret_hash", secret_hash),
                                now, "adding a viewer to")

    async def revoke(self, name: str, now: datetime) -> tuple[Viewer | None, bool]:
        """Revoke → (the viewer, None when unknown; True if it was live until now)."""
        row, was_live = await revoke_secret(self._store, dashboard_viewers, "name", name, now,
                                            "revoking a viewer in")
        return (_record(row) if row is not None else None), was_live

    async def list(self) -> list[Viewer]:
        async with self._store._read("reading viewers from") as conn:
            rows = (await conn.execute(select(dashboard_viewers).order_by(_V.name))).mappings().all()
        return [_record(r) for r in rows]

    async def live_hash(self, name: str) -> str | None:
        """The secret hash of a viewer that is not revoked, else None."""
        async with self._store._read("checking a viewer in") as conn:
            row = (await conn.execute(select(_V.secret_hash)
                                      .where(_V.name == name, _V.revoked_at.is_(None)))).first()
        return str(row[0]) if row is not None else None


def _record(row: Any) -> Viewer:
    return Viewer(name=row["name"], created_at=row["created_at"], revoked_at=row["revoked_at"])
