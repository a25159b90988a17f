"""Migrations are linear, reversible, and produce exactly the tables the models declare;
the data a migration moves comes back on its downgrade."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import migrate
from app.db import Base, make_engine, make_sessionmaker
from app.engine.agents import AgentCommands
from app.engine.bus import EventBus
from app.engine.runs import CREATE_SCOPE, SPAWN_SCOPE, RunCommands
from app.schemas.agents import AgentCreate, ModelConfig
from app.schemas.runs import RunCreate
from app.store import idempotency
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


async def test_0008_gives_spawn_keys_a_scope_of_their_own_and_takes_it_back(
    scratch_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(scratch_engine, "0007")
    sessionmaker = make_sessionmaker(scratch_engine)
    runs = RunCommands(sessionmaker, EventBus())
    model = ModelConfig(provider="scripted", name="scripted", script=[{"text": "done"}])
    agent = await AgentCommands(sessionmaker).create(AgentCreate(name="a", model=model))
    parent, _ = await runs.create(RunCreate(agent_id=agent.id, input="split"))
    child, _ = await runs.create(
        RunCreate(agent_id=agent.id, input="part"), parent_run_id=parent.id
    )
    async with sessionmaker() as session, session.begin():  # as 0007 kept them
        await idempotency.insert_keys(
            session,
            [
                idempotency.KeyRecord(CREATE_SCOPE, "spawned", "h", child.id, {}),
                idempotency.KeyRecord(CREATE_SCOPE, "client", "h", parent.id, {}),
            ],
            datetime.now(UTC),
        )

    async def keys() -> set[tuple[str, str]]:
        async with scratch_engine.connect() as conn:
            rows = await conn.execute(text("SELECT scope, key FROM idempotency_keys"))
            return {(scope, key) for scope, key in rows}

    await migrate.upgrade(scratch_engine)
    assert await keys() == {(SPAWN_SCOPE, "spawned"), (CREATE_SCOPE, "client")}
    await migrate.downgrade(scratch_engine, "0007")
    assert await keys() == {(CREATE_SCOPE, "spawned"), (CREATE_SCOPE, "client")}
