"""The dashboard_viewers table: who may read the dashboard (DESIGN §11), each secret stored only as its
hash, as agent tokens are (netprobe.store.tokens). Nothing here is written by a page view."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from netprobe.store.engine import upsert
from netprobe.store.schema import dashboard_viewers
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
        values = {"secret_hash": secret_hash, "created_at": now, "revoked_at": None}
        stmt = upsert(self._store.dialect, dashboard_viewers).values(name=name, **values)
        stmt = stmt.on_conflict_do_update(index_elements=["name"], set_=values)
        async with self._store._write("adding a viewer to") as conn:
            existed = (await conn.execute(select(_V.name).where(_V.name == name))).first()
            await conn.execute(stmt)
        return existed is not None

    async def revoke(self, name: str, now: datetime) -> tuple[Viewer | None, bool]:
        """Revoke → (the viewer, None when unknown; True if it was live until now)."""
        async with self._store._write("revoking a viewer in") as conn:
            changed = await conn.execute(update(dashboard_viewers)
                                         .where(_V.name == name, _V.revoked_at.is_(None))
                                         .values(revoked_at=now))
            row = (await conn.execute(select(dashboard_viewers).where(_V.name == name))).mappings().first()
        return (_record(row) if row is not None else None), changed.rowcount > 0

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
