"""`netprobe db …`: migrate a database, import result envelopes (or RIPE Atlas results) from JSON Lines."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from netprobe.errors import UsageError

# The store stack (SQLAlchemy, Alembic, pydantic models) is imported inside the commands:
# `netprobe --help` and unrelated commands should not pay for it.

app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[str | None, typer.Option(
    "--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's SQLite "
    "file under its state directory)")]
IMPORT_BATCH = 500
PROGRESS_BYTES = 8 << 20


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
        folded = await store.fold_rollups()      # backfills the prefix rollups of an existing database
    finally:
        await store.close()
    head = " (head)" if revision == head_revision() else ""
    typer.echo(f"{store.url}: at revision {revision}{head}")
    if folded.rows:
        typer.echo(f"prefix rollups: {folded.rows} rows for {folded.series} series folded")


@app.command("rebuild-rollups")
def rebuild_rollups(db: DbOption = None) -> None:
    """Rebuild the reports' prefix rollups from the hourly rollups (after a restore, or to check them)."""
    asyncio.run(_rebuild(db))


async def _rebuild(db: str | None) -> None:
    from netprobe.store.store import open_store

    store = await open_store(db)
    try:
        await store.clear_prefix()
        folded = await store.fold_rollups()
    finally:
        await store.close()
    typer.echo(f"{store.url}: {folded.rows} prefix rows for {folded.series} series"
               + (f"; not folded (sketch of another accuracy): {', '.join(folded.skipped)}"
                  if folded.skipped else ""))


@app.command("import")
def import_(file: Annotated[Path, typer.Argument(metavar="FILE.jsonl",
                                                help="one result envelope (or RIPE Atlas result) per line")],
            db: DbOption = None) -> None:
    """Import result envelopes, or RIPE Atlas ping/traceroute results, one JSON object per line.

    Already stored ids are skipped (an Atlas result always maps to the same id). A bad line is reported
    by number and skipped; the rest is imported, and the exit status is then 1."""
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise UsageError(f"{file}: {exc.strerror or exc}") from None
    bad = asyncio.run(_import(file, db, size))
    raise typer.Exit(1 if bad else 0)


def _lines(file: Path, bad: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(bytes read so far, envelope) per good line; a bad line goes to `bad` (and stderr), not out."""
    from netprobe.store import atlas
    from netprobe.store.envelopes import EnvelopeError, parse_envelope

    done = 0
    try:
        with file.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                done += len(raw)
                where = f"{file}:{lineno}"
                try:
                    line = raw.decode("utf-8")
                    if not line.strip():
                        continue
                    data = json.loads(line)
                    if isinstance(data, dict) and atlas.is_atlas(data):
                        data = atlas.to_envelope(data)
                    parse_envelope(data, where)
                except UnicodeDecodeError as exc:
                    _skip(bad, f"{where}: not UTF-8 text ({exc.reason})")
                except json.JSONDecodeError as exc:
                    _skip(bad, f"{where}: not JSON ({exc.msg} at column {exc.colno})")
                except EnvelopeError as exc:
                    _skip(bad, str(exc))
                except ValueError as exc:
                    _skip(bad, f"{where}: {exc}")
                else:
                    yield done, data
    except OSError as exc:
        raise UsageError(f"{file}: {exc.strerror or exc}") from None


def _skip(bad: list[str], message: str) -> None:
    bad.append(message)
    typer.echo(f"{message} (line skipped)", err=True)


async def _import(file: Path, db: str | None, size: int) -> list[str]:
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    from netprobe.store.store import open_store

    store = await open_store(db)
    accepted = duplicates = expired = 0
    bad: list[str] = []
    # a bar on a terminal for files worth waiting for; never in pipes or logs
    quiet = size < PROGRESS_BYTES or not sys.stderr.isatty()
    progress = Progress("importing", BarColumn(), DownloadColumn(), TimeRemainingColumn(), transient=True,
                        disable=quiet, console=Console(stderr=True))
    try:
        with progress:
            task = progress.add_task("import", total=size)
            batch: list[dict[str, Any]] = []
            for done, data in _lines(file, bad):
                batch.append(data)
                if len(batch) >= IMPORT_BATCH:
                    stats = await store.write(batch)
                    accepted, duplicates, expired = (accepted + stats.accepted, duplicates + stats.duplicates,
                                                     expired + stats.expired)
                    batch.clear()
                    progress.update(task, completed=done)
            if batch:
                stats = await store.write(batch)
                accepted, duplicates, expired = (accepted + stats.accepted, duplicates + stats.duplicates,
                                                 expired + stats.expired)
    finally:
        await store.close()
    extra = f", {expired} older than the retention horizon skipped" if expired else ""
    extra += f", {len(bad)} bad lines skipped" if bad else ""
    typer.echo(f"imported {accepted} results into {store.url} ({duplicates} duplicates skipped{extra})")
    return bad
