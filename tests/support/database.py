"""Finding a Postgres for the tests (TEST_DATABASE_URL, else 127.0.0.1:5432, else the
embedded server), and the suite's databases on it: one migrated template per test run,
cloned for each worker (`CREATE DATABASE … TEMPLATE`, a file copy: no migration runs
twice)."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from app.db import migrate
from app.db.connection import libpq_url, make_engine
from app.tables import Base

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
EMBEDDED_DIR = Path(os.environ.get("LOOPWRIGHT_TEST_PGDATA", "/tmp/loopwright-test-pgdata"))


async def answers(url: str) -> bool:
    try:
        conn = await asyncpg.connect(libpq_url(url), timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    await conn.close()
    return True


def server_url() -> str:
    if os.environ.get("TEST_DATABASE_URL"):
        return os.environ["TEST_DATABASE_URL"]
    if asyncio.run(answers(LOCAL_SERVER)):
        return LOCAL_SERVER
    from app.db.embedded_pg import start_embedded

    return start_embedded(EMBEDDED_DIR).url


async def admin(server_url: str, sql: str) -> None:
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def with_database(server_url: str, name: str) -> str:
    return make_url(libpq_url(server_url)).set(database=name).render_as_string(hide_password=False)


async def create_template(server_url: str) -> str:
    """A new database migrated to head, to be cloned (nothing may connect to it meanwhile)."""
    name = f"lw_template_{secrets.token_hex(4)}"
    await admin(server_url, f'CREATE DATABASE "{name}"')
    engine = make_engine(with_database(server_url, name))
    try:
        await migrate.upgrade(engine)
    finally:
        await engine.dispose()
    return name


async def clone(server_url: str, template: str, name: str) -> str:
    """A copy of `template` named `name` (dropped first if a killed run left it); its URL."""
    await drop(server_url, name)
    await admin(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return with_database(server_url, name)


async def drop(server_url: str, name: str) -> None:
    await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Children before parents. DELETE, not TRUNCATE: a test leaves a few rows, and emptying 30
# small tables row by row takes ~10 ms where TRUNCATE's new files for each take ~250 ms.
# Locked first, all at once, as TRUNCATE would: a process the previous test left stopping
# may still insert, and a run inserted between two DELETEs would hold its conversation.
_TABLES = [t.name for t in reversed(Base.metadata.sorted_tables)]
_EMPTY = f"LOCK TABLE {', '.join(_TABLES)} IN ACCESS EXCLUSIVE MODE;" + ";".join(
    f"DELETE FROM {name}" for name in _TABLES
)


async def empty_tables(url: str) -> None:
    """Every table of the app emptied, in one transaction."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        await conn.execute(f"BEGIN;{_EMPTY};COMMIT")
    finally:
        await conn.close()
