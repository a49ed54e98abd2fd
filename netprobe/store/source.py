"""What a report reads from: its own Reader where the database allows, else the Store."""

from __future__ import annotations

from netprobe.errors import StorageError
from netprobe.store.fleet import never_folded
from netprobe.store.reads import Source, open_reader
from netprobe.times import utc_now


async def open_source(url: str | None) -> Source:
    """A Reader when `url` is an existing database at the head revision, else the Store (open_store:
    it creates and migrates, and says what is wrong with the database). StorageError, naming the
    command to run, when the database's prefix rollups were never folded."""
    source: Source | None = await open_reader(url)
    if source is None:
        from netprobe.store.store import open_store  # SQLAlchemy: only when the Reader declines

        source = await open_store(url)
    try:
        unfolded = await never_folded(source, utc_now())
    except BaseException:
        await source.close()
        raise
    if unfolded:
        await source.close()
        db = f" --db {url}" if url else ""
        raise StorageError("the reports' prefix rollups of this database were never folded, so a report "
                           f"would read every hour: run `netprobe db rebuild-rollups{db}` (an agent or a "
                           "collector folds them as it runs)")
    return source


__all__ = ["open_source"]
