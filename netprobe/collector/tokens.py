"""Per-agent bearer tokens (DESIGN §8): random, shown once, stored only as a sha256 hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from netprobe.config_base import check_id
from netprobe.errors import UsageError
from netprobe.results import utc_now
from netprobe.store import Store
from netprobe.store.engine import READ_ONLY, mapped_errors
from netprobe.store.schema import agent_tokens

# last_used_at is a hint for operators, not an audit log: write it at most this often per agent.
TOUCH_EVERY = timedelta(seconds=60)
_T = agent_tokens.c


def new_token() -> str:
    return secrets.token_urlsafe(32)   # 256 bits: a plain sha256 is enough, no slow hash needed


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_agent_id(agent_id: str) -> str:
    """The agent config's id rules, as a UsageError (exit 2) for the command line."""
    try:
        return check_id(agent_id)
    except ValueError as exc:
        raise UsageError(f"AGENT_ID: {exc}") from None


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


class Tokens:
    """The agent_tokens table of an open Store. Errors are StorageError (database) or UsageError."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._touched: dict[str, datetime] = {}

    async def issue(self, agent_id: str) -> tuple[str, bool]:
        """A new token for `agent_id` → (token, rotated); rotating replaces and un-revokes the old one."""
        check_agent_id(agent_id)
        token = new_token()
        now = utc_now()
        values = {"token_hash": hash_token(token), "created_at": now, "revoked_at": None,
                  "last_used_at": None}
        ins = (pg_insert if self._store.dialect == "postgresql" else sqlite_insert)(agent_tokens)
        stmt = ins.values(agent_id=agent_id, **values).on_conflict_do_update(
            index_elements=["agent_id"], set_=values)
        async with mapped_errors(self._store.url, "issuing a token in"), self._store.engine.begin() as conn:
            existed = (await conn.execute(select(_T.agent_id).where(_T.agent_id == agent_id))).first()
            await conn.execute(stmt)
        return token, existed is not None

    async def revoke(self, agent_id: str) -> tuple[AgentToken, bool]:
        """Revoke → (the token's record, True if it was live until now). Unknown agent: UsageError."""
        now = utc_now()
        async with mapped_errors(self._store.url, "revoking a token in"), self._store.engine.begin() as conn:
            changed = await conn.execute(update(agent_tokens)
                                         .where(_T.agent_id == agent_id, _T.revoked_at.is_(None))
                                         .values(revoked_at=now))
            row = (await conn.execute(select(agent_tokens).where(_T.agent_id == agent_id))).mappings().first()
        if row is None:
            raise UsageError(f"agent {agent_id!r} has no token; `netprobe collector list-agents` shows "
                             "the agents that have one")
        return _record(row), changed.rowcount > 0

    async def list(self) -> list[AgentToken]:
        async with mapped_errors(self._store.url, "reading tokens from"), \
                self._store.engine.connect() as conn:
            await conn.execution_options(**READ_ONLY)
            rows = (await conn.execute(select(agent_tokens).order_by(_T.agent_id))).mappings().all()
        return [_record(r) for r in rows]

    async def authenticate(self, token: str) -> str | None:
        """The agent a live token belongs to, else None; marks it used (at most once a minute)."""
        if not token or len(token) > 512:
            return None
        digest = hash_token(token)
        async with mapped_errors(self._store.url, "checking a token in"), \
                self._store.engine.connect() as conn:
            await conn.execution_options(**READ_ONLY)
            row = (await conn.execute(select(_T.agent_id, _T.token_hash, _T.revoked_at)
                                      .where(_T.token_hash == digest))).first()
        # The lookup is by hash of a 256-bit secret, so its timing reveals nothing useful;
        # compare_digest keeps the final check constant-time all the same.
        if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
            return None
        agent_id = str(row.agent_id)
        await self._touch(agent_id, digest)
        return agent_id

    async def _touch(self, agent_id: str, digest: str) -> None:
        now = utc_now()
        last = self._touched.get(digest)     # by token: a rotated token is marked on its first use
        if last is not None and now - last < TOUCH_EVERY:
            return
        self._touched[digest] = now
        async with mapped_errors(self._store.url, "marking a token used in"), \
                self._store.engine.begin() as conn:
            # the condition keeps several collectors from rewriting the row on every request
            await conn.execute(update(agent_tokens)
                               .where(_T.agent_id == agent_id,
                                      or_(_T.last_used_at.is_(None), _T.last_used_at < now - TOUCH_EVERY))
                               .values(last_used_at=now))


def _record(row: Any) -> AgentToken:
    return AgentToken(agent_id=row["agent_id"], created_at=row["created_at"], revoked_at=row["revoked_at"],
                      last_used_at=row["last_used_at"])
