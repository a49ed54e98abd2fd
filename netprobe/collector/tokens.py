"""Per-agent bearer tokens (docs/deployment.md): random, shown once, stored only as a sha256 hash."""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta

from netprobe.config.base import check_id_arg
from netprobe.config.secrets import hash_token, new_token
from netprobe.errors import UsageError
from netprobe.store import Store
from netprobe.store.tokens import AgentToken, TokenTable
from netprobe.times import utc_now

# last_used_at is a hint for operators, not an audit log: write it at most this often per agent.
TOUCH_EVERY = timedelta(seconds=60)


def check_agent_id(agent_id: str) -> str:
    """The agent config's id rules, as a UsageError (exit 2) for the command line."""
    return check_id_arg(agent_id, "AGENT_ID")


class Tokens:
    """The agent_tokens table of an open Store. Errors are StorageError (database) or UsageError."""

    def __init__(self, store: Store) -> None:
        self._table = TokenTable(store)
        self._touched: dict[str, datetime] = {}

    async def issue(self, agent_id: str) -> tuple[str, bool]:
        """A new token for `agent_id` → (token, rotated); rotating replaces and un-revokes the old one."""
        check_agent_id(agent_id)
        token = new_token()
        rotated = await self._table.put(agent_id, hash_token(token), utc_now())
        return token, rotated

    async def revoke(self, agent_id: str) -> tuple[AgentToken, bool]:
        """Revoke → (the token's record, True if it was live until now). Unknown agent: UsageError."""
        record, changed = await self._table.revoke(agent_id, utc_now())
        if record is None:
            raise UsageError(f"agent {agent_id!r} has no token; `netprobe collector list-agents` shows "
                             "the agents that have one")
        return record, changed

    async def list(self) -> list[AgentToken]:
        return await self._table.list()

    async def authenticate(self, token: str) -> str | None:
        """The agent a live token belongs to, else None; marks it used (at most once a minute)."""
        if not token or len(token) > 512:
            return None
        digest = hash_token(token)
        row = await self._table.find(digest)
        # The lookup is by hash of a 256-bit secret, so its timing reveals nothing useful;
        # compare_digest keeps the final check constant-time all the same.
        if row is None or row.revoked or not hmac.compare_digest(row.token_hash, digest):
            return None
        await self._touch(row.agent_id, digest)
        return row.agent_id

    async def _touch(self, agent_id: str, digest: str) -> None:
        now = utc_now()
        last = self._touched.get(digest)     # by token: a rotated token is marked on its first use
        if last is not None and now - last < TOUCH_EVERY:
            return
        self._touched[digest] = now
        await self._table.mark_used(agent_id, now, TOUCH_EVERY)
