"""Alembic environment. netprobe runs it programmatically (netprobe.store.migrate), handing over an
open connection; the alembic CLI also works:
`alembic -c netprobe/store/migrations/alembic.ini -x db=URL upgrade head`.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from netprobe.store.engine import create_engine
from netprobe.store.schema import metadata
from netprobe.store.urls import default_db_url, normalise_url

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",   # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    return (context.get_x_argument(as_dictionary=True).get("db")
            or config.get_main_option("sqlalchemy.url") or default_db_url())


async def _run_cli() -> None:
    engine = create_engine(normalise_url(_url()))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=str(normalise_url(_url())), target_metadata=metadata, literal_binds=True,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
    else:
        asyncio.run(_run_cli())
