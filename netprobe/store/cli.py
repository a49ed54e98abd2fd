"""`netprobe db …`: migrate a database, import result envelopes from JSON Lines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from netprobe.errors import UsageError

# The store stack (SQLAlchemy, Alembic, pydantic models) is imported inside the commands:
# `netprobe --help` and unrelated commands should not pay for it.

app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[str | None, typer.Option(
    "--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's SQLite "
    "file under its state directory)")]
IMPORT_BATCH = 500


@app.command()
def upgrade(db: DbOption = None) -> None:
    """Create or migrate the database schema to the latest revision."""
    asyncio.run(_upgrade(db))


async def _upgrade(db: str | None) -> None:
    from netprobe.store.migrate import head_revision
    from netprobe.store.store import open_store

    store = await open_store(db)
    try:
        revision = await store.revision()
    finally:
        await store.close()
    head = " (head)" if revision == head_revision() else ""
    typer.echo(f"{store.url}: at revision {revision}{head}")


@app.command("import")
def import_(file: Annotated[Path, typer.Argument(metavar="FILE.jsonl", help="one result envelope per line")],
            db: DbOption = None) -> None:
    """Import result envelopes (one JSON object per line); already stored ids are skipped."""
    for _ in _envelopes(file):      # validate the whole file before writing any of it
        pass
    asyncio.run(_import(file, db))


def _envelopes(file: Path) -> Iterator[dict[str, Any]]:
    from netprobe.store.envelopes import parse_envelope

    try:
        with file.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{file}:{lineno}"
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
                parse_envelope(data, where)
                yield data
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise UsageError(f"{file}: {exc.strerror or exc}") from None


async def _import(file: Path, db: str | None) -> None:
    from netprobe.store.store import open_store

    store = await open_store(db)
    accepted = duplicates = expired = 0
    try:
        batch: list[dict[str, Any]] = []
        for data in _envelopes(file):
            batch.append(data)
            if len(batch) >= IMPORT_BATCH:
                stats = await store.write(batch)
                accepted, duplicates, expired = (accepted + stats.accepted, duplicates + stats.duplicates,
                                                 expired + stats.expired)
                batch.clear()
        if batch:
            stats = await store.write(batch)
            accepted, duplicates, expired = (accepted + stats.accepted, duplicates + stats.duplicates,
                                             expired + stats.expired)
    finally:
        await store.close()
    extra = f", {expired} older than the retention horizon skipped" if expired else ""
    typer.echo(f"imported {accepted} results into {store.url} ({duplicates} duplicates skipped{extra})")
