"""Migrations are linear, reversible, and produce exactly the tables the models declare;
the data a migration moves comes back on its downgrade."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import idempotency, migrate
from app.db.connection import make_sessionmaker
from app.events.models import IDEMPOTENCY_KEYS
from app.runs.engine.runs import CREATE_SCOPE, SPAWN_SCOPE
from app.tables import Base
from app.tasks.engine.task_engine import CREATE_SCOPE as TASK_CREATE_SCOPE
from app.tasks.engine.task_engine import TOOL_CREATE_SCOPE


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


def test_the_head_read_from_the_revision_files_is_alembics() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert migrate.head_revision() == script.get_current_head()
    assert migrate.head_revision() is not None  # else every start would load Alembic


async def test_a_database_at_head_is_recognised_without_loading_alembic(
    scratch_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(scratch_engine)
    url = scratch_engine.url.render_as_string(hide_password=False)
    check = (
        "import asyncio, sys\n"
        "from app.db import migrate\n"
        "from app.db.connection import make_engine\n"
        "async def main():\n"
        f"    engine = make_engine({url!r})\n"
        "    await migrate.upgrade(engine)\n"
        "    await engine.dispose()\n"
        "asyncio.run(main())\n"
        "print('alembic' in sys.modules)\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", check, stdout=asyncio.subprocess.PIPE
    )
    loaded, _ = await process.communicate()
    assert process.returncode == 0
    assert loaded.decode().strip() == "False"


async def test_a_database_behind_head_is_upgraded(scratch_engine: AsyncEngine) -> None:
    await migrate.upgrade(scratch_engine, "0008")
    await migrate.upgrade(scratch_engine)
    async with scratch_engine.connect() as conn:
        version = await conn.execute(text("SELECT version_num FROM alembic_version"))
        assert version.scalar() == migrate.head_revision()
        assert await conn.run_sync(_differences) == []


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


@dataclass(frozen=True)
class _Run:
    id: str


async def _runs_as_0007_kept_them(engine: AsyncEngine) -> tuple[_Run, _Run]:
    """A parent run and the child its tool call made, written as 0007 wrote them."""
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO agents (id, name, role, skills, system_prompt, tools, model, "
                "limits, max_concurrent_tasks, cost_tier, version) VALUES ('agent_a', 'a', "
                "'worker', '[]', '', '[]', '{}', '{}', 1, 'standard', 1)"
            )
        )
        await conn.execute(
            text("INSERT INTO conversations (id, message_count) VALUES ('conv_a', 0)")
        )
        for run_id, parent in (("run_parent", None), ("run_child", "run_parent")):
            await conn.execute(
                text(
                    "INSERT INTO runs (id, agent_id, conversation_id, lane, input, multitask, "
                    "status, iteration, usage, attempt, metadata, cancel_requested, "
                    "lease_token, resume_available, version, parent_run_id) VALUES (:id, "
                    "'agent_a', 'conv_a', :id, 'go', 'enqueue', 'queued', 0, '{}', 1, '{}', "
                    "false, 0, false, 1, :parent)"
                ),
                {"id": run_id, "parent": parent},
            )
    return _Run("run_parent"), _Run("run_child")


async def test_0008_records_the_run_of_spawn_keys_and_takes_it_back(
    scratch_engine: AsyncEngine,
) -> None:
    """Upgrade: a key 0007 kept for a child run moves to `runs.spawn` and records its parent
    (the run whose tool call made it); a client's key stays as it was. Downgrade: runs'
    keys go back to the clients' scopes (a client's key spelled the same wins), and the
    column and the sweep's indexes go."""
    await migrate.upgrade(scratch_engine, "0007")
    sessionmaker = make_sessionmaker(scratch_engine)
    parent, child = await _runs_as_0007_kept_them(scratch_engine)
    as_0007_kept_them = [
        (CREATE_SCOPE, "spawned", child.id),
        (CREATE_SCOPE, "client", parent.id),
        (TASK_CREATE_SCOPE, "task-client", "task_1"),
        (TASK_CREATE_SCOPE, "same", "task_2"),
    ]
    async with scratch_engine.begin() as conn:
        for scope, key, resource in as_0007_kept_them:
            await conn.execute(
                text(
                    "INSERT INTO idempotency_keys (scope, key, request_hash, resource_id, "
                    "response, created_at) VALUES (:scope, :key, 'h', :resource, '{}', now())"
                ),
                {"scope": scope, "key": key, "resource": resource},
            )

    async def keys() -> set[tuple[str, str, str | None]]:
        """(scope, key, run_id), run_id None where 0007 has no such column."""
        async with scratch_engine.connect() as conn:
            columns = await conn.run_sync(_key_columns)
            run_id = "run_id" if "run_id" in columns else "NULL"
            rows = await conn.execute(text(f"SELECT scope, key, {run_id} FROM idempotency_keys"))
            return {(scope, key, run) for scope, key, run in rows}

    async def indexes() -> dict[str, str]:
        async with scratch_engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT indexname, indexdef FROM pg_indexes "
                    "WHERE tablename = 'idempotency_keys' AND indexname LIKE 'ix_%'"
                )
            )
            return {name: definition.split(" USING ", 1)[1] for name, definition in rows}

    await migrate.upgrade(scratch_engine)
    assert await keys() == {
        (SPAWN_SCOPE, "spawned", parent.id),
        (CREATE_SCOPE, "client", None),
        (TASK_CREATE_SCOPE, "task-client", None),
        (TASK_CREATE_SCOPE, "same", None),
    }
    assert (
        await indexes()
        == _declared_key_indexes()
        == {
            "ix_idempotency_keys_client_created_at": "btree (created_at) WHERE (run_id IS NULL)",
            "ix_idempotency_keys_run_created_at": "btree (created_at) WHERE (run_id IS NOT NULL)",
        }
    )
    async with sessionmaker() as session, session.begin():  # as create_task keeps them
        await idempotency.insert_keys(
            session,
            [
                idempotency.KeyRecord(TOOL_CREATE_SCOPE, "made", "h", "task_3", {}, parent.id),
                idempotency.KeyRecord(TOOL_CREATE_SCOPE, "same", "h", "task_4", {}, parent.id),
            ],
            datetime.now(UTC),
        )

    await migrate.downgrade(scratch_engine, "0007")
    assert await keys() == {
        (CREATE_SCOPE, "spawned", None),
        (CREATE_SCOPE, "client", None),
        (TASK_CREATE_SCOPE, "task-client", None),
        (TASK_CREATE_SCOPE, "same", None),  # the client's (task_2), not the tool's
        (TASK_CREATE_SCOPE, "made", None),
    }
    assert await indexes() == {}
    async with scratch_engine.connect() as conn:
        same = text("SELECT resource_id FROM idempotency_keys WHERE key = 'same'")
        assert await conn.scalar(same) == "task_2"


def _key_columns(connection: Connection) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns("idempotency_keys")}


def _declared_key_indexes() -> dict[str, str]:
    """The model's indexes of idempotency_keys as pg_indexes spells them (the round trip's
    comparison does not look at a partial index's WHERE)."""
    declared = {}
    for index in IDEMPOTENCY_KEYS.indexes:
        columns = ", ".join(column.name for column in index.columns)
        where = index.dialect_options["postgresql"]["where"]
        declared[str(index.name)] = f"btree ({columns}) WHERE ({where})"
    return declared
