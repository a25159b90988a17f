"""Migrations are linear, reversible, and produce exactly the tables the models declare."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from app import migrate
from app.db import Base, make_engine
from tests.support.database import admin, with_database


@pytest.fixture
async def scratch_engine(pg_server_url: str) -> AsyncIterator[AsyncEngine]:
    name = f"lw_migrations_{secrets.token_hex(4)}"
    await admin(pg_server_url, f'CREATE DATABASE "{name}"')
    engine = make_engine(with_database(pg_server_url, name))
    try:
        yield engine
    finally:
        await engine.dispose()
        await admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _differences(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names()) - {"alembic_version"}


def test_history_is_linear() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert len(script.get_heads()) == 1
    assert len(script.get_bases()) == 1
    for revision in script.walk_revisions():
        assert not revision.is_merge_point


async def test_upgrade_downgrade_round_trip_matches_the_models(
    scratch_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(scratch_engine)
    async with scratch_engine.connect() as conn:
        assert await conn.run_sync(_differences) == []
        assert await conn.run_sync(_tables) == set(Base.metadata.tables)

    await migrate.downgrade(scratch_engine, "base")
    async with scratch_engine.connect() as conn:
        assert await conn.run_sync(_tables) == set()

    await migrate.upgrade(scratch_engine)
    async with scratch_engine.connect() as conn:
        assert await conn.run_sync(_differences) == []
