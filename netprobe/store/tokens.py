"""The agent_tokens table: one bearer token per agent, stored only as its hash (docs/deployment.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from netprobe.store.schema import agent_tokens
from netprobe.store.secrets_table import put_secret, revoke_secret
from netprobe.store.store import Store
from netprobe.times import iso

_T = agent_tokens.c


@dataclass(frozen=True, slots=True)
class AgentToken:
    """What may be shown about a token: never the token or its hash."""

    agent_id: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.agent_id, "created_at": iso(self.created_at),
                "revoked_at": iso(self.revoked_at) if self.revoked_at is not None else None,
                "last_used_at": iso(self.last_used_at) if self.last_used_at is not None else None}


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
        return await put_secret(self._store, agent_tokens, "agent_id", agent_id, ("token_hash", token_hash),
                                now, "issuing a token in", reset={"last_used_at": None})

    async def revoke(self, agent_id: str, now: datetime) -> tuple[AgentToken | None, bool]:
        """Revoke → (the token's record, None for an agent without one; True if it was live until now)."""
        row, was_live = await revoke_secret(self._store, agent_tokens, "agent_id", agent_id, now,
                                            "revoking a token in")
        return (_record(row) if row is not None else None), was_live

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
