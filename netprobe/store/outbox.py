"""The agent's outbox: rounds waiting for the collector's acknowledgement (docs/deployment.md).

Rows enter in the same transaction that stores the round (Store.write with an outbox cap), so a
round is either stored and queued for upload or neither — whatever kills the agent. Rows leave only
when the collector acknowledged them, or when the cap is hit (oldest first, counted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from netprobe.store.engine import AsyncConnection
from netprobe.store.schema import outbox

_O = outbox.c


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    seq: int
    result_id: str
    payload: dict[str, Any]
    attempts: int


async def enqueue(conn: AsyncConnection, envelopes: Sequence[tuple[str, dict[str, Any]]],
                  now: datetime) -> None:
    """(result id, envelope) pairs, in the order given (upload order)."""
    if envelopes:
        await conn.execute(outbox.insert(), [
            {"result_id": rid, "payload": env, "created_at": now, "attempts": 0, "next_attempt_at": now}
            for rid, env in envelopes])


async def trim(conn: AsyncConnection, cap: int) -> int:
    """Drop the oldest rows beyond `cap`; returns how many were dropped."""
    # max - min + 1 bounds the row count from two index lookups; count(*) scans, so only when needed
    span = (await conn.execute(select(func.max(_O.seq) - func.min(_O.seq) + 1))).scalar()
    if span is None or span <= cap:
        return 0
    depth = await count(conn)
    excess = depth - cap
    if excess <= 0:
        return 0
    doomed = select(_O.seq).order_by(_O.seq).limit(excess)
    result = await conn.execute(delete(outbox).where(_O.seq.in_(doomed)))
    return int(result.rowcount)


async def count(conn: AsyncConnection) -> int:
    return int((await conn.execute(select(func.count()).select_from(outbox))).scalar_one())


async def oldest(conn: AsyncConnection, limit: int, now: datetime) -> list[OutboxEntry]:
    """The oldest entries due by `now` (a parked entry waits for its next_attempt_at)."""
    q = (select(_O.seq, _O.result_id, _O.payload, _O.attempts).where(_O.next_attempt_at <= now)
         .order_by(_O.seq).limit(limit))
    return [OutboxEntry(int(r.seq), str(r.result_id), dict(r.payload), int(r.attempts))
            for r in await conn.execute(q)]


async def remove(conn: AsyncConnection, seqs: Sequence[int]) -> int:
    if not seqs:
        return 0
    result = await conn.execute(delete(outbox).where(_O.seq.in_(list(seqs))))
    return int(result.rowcount)


async def note_failure(conn: AsyncConnection, seqs: Sequence[int], error: str, retry_at: datetime) -> None:
    """Count the attempt and keep the reason, so `db` inspection shows why rows are waiting."""
    if seqs:
        stmt = update(outbox).where(_O.seq.in_(list(seqs)))
        await conn.execute(stmt.values(attempts=_O.attempts + 1, last_error=error[:500],
                                       next_attempt_at=retry_at))
