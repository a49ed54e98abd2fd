"""`netprobe db …`: migrate a database, import result envelopes (or RIPE Atlas results) from JSON Lines."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from netprobe.errors import UsageError
from netprobe.textout import Group

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

    from netprobe.store.envelopes import Envelope


# The store stack (SQLAlchemy, Alembic, pydantic models) is imported inside the commands:
# `netprobe --help` and unrelated commands should not pay for it.
app = Group("db", help="Database maintenance.")

db_option = click.option(
    "--db", metavar="URL", default=None, help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the "
    "agent's SQLite file under its state directory)")
# Envelopes per Store.write, as the collector's largest request (collector.max_batch): big batches
# merge more rounds into each hour row per statement; two batches in memory at most.
IMPORT_BATCH = 5000
IMPORT_BATCH_BYTES = 32 << 20   # or fewer when lines are long (traceroutes)
YIELD_LINES = 200               # lines read between turns of the event loop
PROGRESS_BYTES = 8 << 20
GC_ALLOCATIONS = 100_000     # the cycle collector's first threshold during an import


@app.command("upgrade")
@db_option
def upgrade(db: str | None) -> None:
    """Create or migrate the database schema to the latest revision."""
    asyncio.run(_upgrade(db))


async def _upgrade(db: str | None) -> None:
    from netprobe.store.migrate import head_revision
    from netprobe.store.store import open_store

    async with await open_store(db) as store:
        revision = await store.revision()
        folded = await store.fold_rollups()      # backfills the prefix rollups of an existing database
    head = " (head)" if revision == head_revision() else ""
    click.echo(f"{store.url}: at revision {revision}{head}")
    if folded.rows:
        click.echo(f"prefix rollups: {folded.rows} rows for {folded.series} series folded")


@app.command("rebuild-rollups")
@db_option
def rebuild_rollups(db: str | None) -> None:
    """Rebuild the reports' prefix rollups from the hourly rollups (after a restore, or to check them)."""
    asyncio.run(_rebuild(db))


async def _rebuild(db: str | None) -> None:
    from netprobe.store.store import open_store

    async with await open_store(db) as store:
        await store.clear_prefix()
        folded = await store.fold_rollups()
    click.echo(f"{store.url}: {folded.rows} prefix rows for {folded.series} series"
               + (f"; not folded (sketch of another accuracy): {', '.join(folded.skipped)}"
                  if folded.skipped else ""))


@app.command("import")
@click.argument("file", metavar="FILE.jsonl", type=click.Path(path_type=Path))
@db_option
def import_(file: Path, db: str | None) -> None:
    """Import result envelopes, or RIPE Atlas ping/traceroute results, one JSON object per line.

    Already stored ids are skipped (an Atlas result always maps to the same id). A bad line is reported
    by number and skipped; the rest is imported, and the exit status is then 1.

    FILE.jsonl: one result envelope (or RIPE Atlas result) per line."""
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise UsageError(f"{file}: {exc.strerror or exc}") from None
    # Two batches of envelopes stay alive while the next is parsed: at the default threshold (700
    # allocations) the cycle collector walks them all again and again, a large part of the import's CPU.
    # The import makes few cycles; a collection every GC_ALLOCATIONS keeps the same peak memory.
    threshold = gc.get_threshold()
    gc.set_threshold(GC_ALLOCATIONS, *threshold[1:])
    try:
        bad = asyncio.run(_import(file, db, size))
    finally:
        gc.set_threshold(*threshold)
    raise click.exceptions.Exit(1 if bad else 0)


@dataclass(slots=True)
class _Batch:
    envelopes: list[Envelope]
    size: int = 0             # bytes of the lines read into it
    done: int = 0             # bytes of the file read up to its last line


def _line_reader() -> Callable[[bytes, str], Envelope | None]:
    """A function from one line to its envelope (None for a blank line), raising what _batches reports.
    orjson when it reads the line as the json module would, else the json module, whose verdict and
    words stand."""
    from netprobe.collector.body import orjson_reads_alike
    from netprobe.probes import atlas
    from netprobe.store.envelopes import parse_envelope

    unread = object()

    def envelope(raw: bytes, where: str) -> Envelope | None:
        text: str | None = None
        data: Any = unread
        if orjson_reads_alike(raw):
            with contextlib.suppress(orjson.JSONDecodeError):
                data = orjson.loads(raw)
                text = raw.decode().strip()      # valid UTF-8, and only JSON's whitespace around it
        if data is unread:
            line = raw.decode("utf-8")
            if not line.strip():
                return None
            data = json.loads(line)
        if isinstance(data, dict) and atlas.is_atlas(data):
            data, text = atlas.to_envelope(data), None
        return parse_envelope(data, where, text)

    return envelope


async def _batches(file: Path, bad: list[str]) -> AsyncIterator[_Batch]:
    """The good lines' envelopes in batches of up to IMPORT_BATCH (or IMPORT_BATCH_BYTES of text); a bad
    line goes to `bad` (and stderr), not out. Streams the file, and lets the event loop run every
    YIELD_LINES lines, so the previous batch's write goes on while this one is read."""
    from netprobe.store.envelopes import EnvelopeError

    envelope = _line_reader()
    batch = _Batch([])
    done = 0
    name = str(file)
    try:
        with file.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                done += len(raw)
                if lineno % YIELD_LINES == 0:
                    await asyncio.sleep(0)
                where = f"{name}:{lineno}"
                try:
                    env = envelope(raw, where)
                except UnicodeDecodeError as exc:
                    _skip(bad, f"{where}: not UTF-8 text ({exc.reason})")
                except json.JSONDecodeError as exc:
                    _skip(bad, f"{where}: not JSON ({exc.msg} at column {exc.colno})")
                except EnvelopeError as exc:
                    _skip(bad, str(exc))
                except ValueError as exc:
                    _skip(bad, f"{where}: {exc}")
                else:
                    if env is None:
                        continue
                    batch.envelopes.append(env)
                    batch.size += len(raw)
                    if len(batch.envelopes) >= IMPORT_BATCH or batch.size >= IMPORT_BATCH_BYTES:
                        batch.done = done
                        yield batch
                        batch = _Batch([])
    except OSError as exc:
        raise UsageError(f"{file}: {exc.strerror or exc}") from None
    if batch.envelopes:
        batch.done = done
        yield batch


def _skip(bad: list[str], message: str) -> None:
    bad.append(message)
    # on a terminal the line may hold the progress bar: the message replaces it (the next update redraws it)
    clear = "\r\x1b[K" if sys.stderr.isatty() else ""
    click.echo(f"{clear}{message} (line skipped)", err=True)


async def _import(file: Path, db: str | None, size: int) -> list[str]:
    from netprobe.store.store import WriteStats, open_store

    store = await open_store(db)
    accepted = duplicates = expired = 0
    bad: list[str] = []
    # a bar on a terminal for files worth waiting for; never in pipes or logs
    quiet = size < PROGRESS_BYTES or not sys.stderr.isatty()
    bar: ProgressBar[int] | None = None
    if not quiet:
        bar = click.progressbar(length=size, label="importing", file=sys.stderr,
                                item_show_func=lambda done: _megabytes(done, size))
    shown = 0
    # One batch is written while the next is read: one write at a time, in file order, so duplicates
    # across batches and the retention horizon are judged as a line-by-line import would.
    writing: tuple[asyncio.Task[WriteStats], int] | None = None

    async def written() -> None:
        nonlocal accepted, duplicates, expired, shown
        if writing is not None:
            stats = await writing[0]
            accepted, duplicates, expired = (accepted + stats.accepted, duplicates + stats.duplicates,
                                             expired + stats.expired)
            if bar is not None:
                bar.update(writing[1] - shown, writing[1])
                shown = writing[1]

    try:
        with contextlib.ExitStack() as showing:
            if bar is not None:
                showing.enter_context(bar)
            async for batch in _batches(file, bad):
                await written()
                write = store.write(batch.envelopes, bulk=True)
                writing = (asyncio.create_task(write), batch.done)
            await written()
            writing = None
        if bar is not None:  # done: the bar leaves the screen (click ends it with a newline)
            click.echo("\x1b[1A\x1b[2K", err=True, nl=False)
        # the reports read prefix rows: folded now, not left to a later upkeep (or a slow report)
        folded = await store.fold_rollups()
    finally:
        if writing is not None and not writing[0].done():
            writing[0].cancel()
            with contextlib.suppress(BaseException):
                await writing[0]
        await store.close()
    extra = f", {expired} older than the retention horizon skipped" if expired else ""
    extra += f", {len(bad)} bad lines skipped" if bad else ""
    click.echo(f"imported {accepted} results into {store.url} ({duplicates} duplicates skipped{extra})")
    click.echo(f"prefix rollups: {folded.rows} rows for {folded.series} series folded")
    return bad


def _megabytes(done: int | None, size: int) -> str | None:
    return None if done is None else f"{done / 1e6:.1f}/{size / 1e6:.1f} MB"
