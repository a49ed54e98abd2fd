"""The collector's two kinds of credential, each a name and a random secret shown once and stored only
as a sha256 hash: per-agent bearer tokens (docs/deployment.md) and dashboard viewers (docs/dashboard.md)."""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from netprobe.config.base import check_id_arg
from netprobe.config.secrets import hash_token, new_token
from netprobe.errors import UsageError
from netprobe.store import Store
from netprobe.store.tokens import AgentToken, TokenTable
from netprobe.store.viewers import Viewer, ViewerTable
from netprobe.times import utc_now

# last_used_at is a hint for operators, not an audit log: write it at most this often per agent.
TOUCH_EVERY = timedelta(seconds=60)

R = TypeVar("R")


class _Table(Protocol[R]):
    async def put(self, name: str, secret_hash: str, now: datetime, /) -> bool: ...
    async def revoke(self, name: str, now: datetime, /) -> tuple[R | None, bool]: ...
    async def list(self) -> list[R]: ...


class _Credentials(Generic[R]):
    """Issue, revoke and list the credentials of one table of an open Store. Errors are StorageError
    (database) or UsageError."""

    def __init__(self, table: _Table[R], label: str, unknown: str) -> None:
        self._table = table
        self._label = label           # the name's command-line argument, in a bad-id UsageError
        self._unknown = unknown       # revoking a name the table lacks: this, formatted with repr(name)

    async def issue(self, name: str) -> tuple[str, bool]:
        """A new secret for `name` → (secret, rotated); rotating replaces and un-revokes the old one."""
        check_id_arg(name, self._label)
        secret = new_token()
        rotated = await self._table.put(name, hash_token(secret), utc_now())
        return secret, rotated

    async def revoke(self, name: str) -> tuple[R, bool]:
        """Revoke → (the record, True if it was live until now). Unknown name: UsageError."""
        record, changed = await self._table.revoke(name, utc_now())
        if record is None:
            raise UsageError(self._unknown.format(name))
        return record, changed

    async def list(self) -> list[R]:
        return await self._table.list()


class Tokens(_Credentials[AgentToken]):
    """The agent_tokens table."""

    def __init__(self, store: Store) -> None:
        self._tokens = TokenTable(store)
        super().__init__(self._tokens, "AGENT_ID", "agent {!r} has no token; `netprobe collector "
                         "list-agents` shows the agents that have one")
        self._touched: dict[str, datetime] = {}

    async def authenticate(self, token: str) -> str | None:
        """The agent a live token belongs to, else None; marks it used (at most once a minute)."""
        if not token or len(token) > 512:
            return None
        digest = hash_token(token)
        row = await self._tokens.find(digest)
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
        await self._tokens.mark_used(agent_id, now, TOUCH_EVERY)


class Viewers(_Credentials[Viewer]):
    """The dashboard_viewers table; a viewer's name is an id as agents' are (no ":", which HTTP Basic
    would split on)."""

    def __init__(self, store: Store) -> None:
        self._viewers = ViewerTable(store)
        super().__init__(self._viewers, "NAME",
                         "viewer {!r} is unknown; `netprobe collector list-viewers` shows the viewers")

    async def authenticate(self, name: str, secret: str) -> bool:
        """Whether `secret` is live viewer `name`'s. Reads only: a page view writes nothing."""
        if not name or not secret or len(name) > 128 or len(secret) > 512:
            return False
        stored = await self._viewers.live_hash(name)
        # compare_digest: the hash of a wrong secret must not be told from the right one by timing
        return stored is not None and hmac.compare_digest(stored, hash_token(secret))
