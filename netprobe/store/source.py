"""What a report reads from: its own Reader where the database allows, else the Store."""

from __future__ import annotations

from netprobe.store.reads import Source, open_reader


async def open_source(url: str | None) -> Source:
    """A Reader when `url` is an existing database at the head revision, else the Store (open_store:
    it creates and migrates, and says what is wrong with the database)."""
    reader = await open_reader(url)
    if reader is not None:
        return reader
    from netprobe.store.store import open_store  # SQLAlchemy: only when the Reader declines

    return await open_store(url)


__all__ = ["open_source"]
