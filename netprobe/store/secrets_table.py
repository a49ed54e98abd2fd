"""What agent tokens (netprobe.store.tokens) and dashboard viewers (netprobe.store.viewers) share: a
table of one hashed secret per key, which can be replaced (un-revoking it) or revoked."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select, update

from netprobe.store.engine import upsert
from netprobe.store.store import Store


async def put_secret(store: Store, table: Table, key: str, value: str, hashed: tuple[str, str],
                     now: datetime, what: str, reset: Mapping[str, Any] | None = None) -> bool:
    """Give row `key = value` the hash `hashed` (column, value), created now and not revoked, with the
    `reset` columns set too; True if the row existed."""
    col = table.c[key]
    values = {hashed[0]: hashed[1], "created_at": now, "revoked_at": None, **(reset or {})}
    stmt = upsert(store.dialect, table).values({key: value, **values})
    stmt = stmt.on_conflict_do_update(index_elements=[key], set_=values)
    async with store._write(what) as conn:
        existed = (await conn.execute(select(col).where(col == value))).first()
        await conn.execute(stmt)
    return existed is not None


async def revoke_secret(store: Store, table: Table, key: str, value: str, now: datetime,
                        what: str) -> tuple[Any | None, bool]:
    """Revoke row `key = value` → (the row's mapping, None when unknown; True if it was live until now)."""
    col = table.c[key]
    async with store._write(what) as conn:
        changed = await conn.execute(update(table).where(col == value, table.c.revoked_at.is_(None))
                                     .values(revoked_at=now))
        row = (await conn.execute(select(table).where(col == value))).mappings().first()
    return row, changed.rowcount > 0
