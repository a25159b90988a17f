"""Finding a Postgres for the tests (TEST_DATABASE_URL, else 127.0.0.1:5432, else the
embedded server) and creating scratch databases on it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from app.store.db import libpq_url

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
    from app.store.embedded_pg import start_embedded

    return start_embedded(EMBEDDED_DIR).url


async def admin(server_url: str, sql: str) -> None:
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def with_database(server_url: str, name: str) -> str:
    return make_url(libpq_url(server_url)).set(database=name).render_as_string(hide_password=False)
