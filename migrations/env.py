"""Alembic environment. Runs on a connection handed over by `app.migrate` or, when
Alembic is invoked directly, on one opened from the configured URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection

from app.core.config import load_settings
from app.db.connection import make_engine
from app.tables import Base

target_metadata = Base.metadata


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _migrate_from_url() -> None:
    url = load_settings().database.url
    if url is None:
        raise SystemExit(
            "set DATABASE_URL or LOOPWRIGHT_DATABASE__URL, or use `loopwright migrate`"
        )
    engine = make_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(_migrate)
    await engine.dispose()


given = context.config.attributes.get("connection")
if given is not None:
    _migrate(given)
else:
    asyncio.run(_migrate_from_url())
