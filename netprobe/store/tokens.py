"""The agent_tokens table: one bearer token per agent, stored only as its hash (DESIGN §8)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from netprobe.store.engine import upsert
from netprobe.store.schema import agent_tokens
from netprobe.store.store import Store

_T = agent_tokens.c


@dataclass(frozen=True, slots=True)
class AgentToken:
    """What may be shown about a token: never the token or its hash."""

    agent_id: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        def iso(ts: datetime | None) -> str | None:
            return ts.isoformat().replace("+00:00", "Z") if ts is not None else None

        return {"id": self.agent_id, "created_at": iso(self.created_at), "revoked_at": iso(self.revoked_at),
                "last_used_at": iso(self.last_used_at)}


@dataclass(frozen=True, slots=True)
class TokenMatch:
    """The row a token hash was found in."""

    agent_id: str
    token_hash: str
    revoked: bool


class TokenTable:
    """Reads and writes of agent_tokens; errors are StorageError."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, agent_id: str, token_hash: str, now: datetime) -> bool:
        """Give `agent_id` this token (replacing and un-revoking any old one); True if it had one."""
        values = {"token_hash": token_hash, "created_at": now, "revoked_at": None, "last_used_at": None}
        stmt = upsert(self._store.dialect, agent_tokens).values(agent_id=agent_id, **values)
        stmt = stmt.on_conflict_do_update(index_elements=["agent_id"], set_=values)
        async with self._store._write("issuing a token in") as conn:
            existed = (await conn.execute(select(_T.agent_id).where(_T.agent_id == agent_id))).first()
            await conn.execute(stmt)
        return existed is not None

    async def revoke(self, agent_id: str, now: datetime) -> tuple[AgentToken | None, bool]:
        """Revoke → (the token's record, None for an agent without one; True if it was live until now)."""
        async with self._store._write("revoking a token in") as conn:
            changed = await conn.execute(update(agent_tokens)
                                         .where(_T.agent_id == agent_id, _T.revoked_at.is_(None))
                                         .values(revoked_at=now))
            row = (await conn.execute(select(agent_tokens).where(_T.agent_id == agent_id))).mappings().first()
        return (_record(row) if row is not None else None), changed.rowcount > 0

    async def list(self) -> list[AgentToken]:
        async with self._store._read("reading tokens from") as conn:
            rows = (await conn.execute(select(agent_tokens).order_by(_T.agent_id))).mappings().all()
        return [_record(r) for r in rows]

    async def find(self, token_hash: str) -> TokenMatch | None:
        async with self._store._read("checking a token in") as conn:
            row = (await conn.execute(select(_T.agent_id, _T.token_hash, _T.revoked_at)
                                      .where(_T.token_hash == token_hash))).first()
        if row is None:
            return None
        return TokenMatch(str(row.agent_id), str(row.token_hash), row.revoked_at is not None)

    async def mark_used(self, agent_id: str, now: datetime, every: timedelta) -> None:
        """Set last_used_at to `now` unless it was set within `every` (by this or another collector)."""
        async with self._store._write("marking a token used in") as conn:
            # the condition keeps several collectors from rewriting the row on every request
            await conn.execute(update(agent_tokens)
                               .where(_T.agent_id == agent_id,
                                      or_(_T.last_used_at.is_(None), _T.last_used_at < now - every))
                               .values(last_used_at=now))


def _record(row: Any) -> AgentToken:
    return AgentToken(agent_id=row["agent_id"], created_at=row["created_at"], revoked_at=row["revoked_at"],
                      last_used_at=row["last_used_at"])
