"""Shared fixtures: a real Postgres (TEST_DATABASE_URL, else a local server on
127.0.0.1:5432, else the embedded one), a fresh migrated database per test session,
and a real HTTP server running the app for the API tests."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
import uvicorn
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app import migrate
from app.config import Settings
from app.db import Base, libpq_url, make_engine
from app.main import create_app

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
EMBEDDED_DIR = Path(os.environ.get("LOOPWRIGHT_TEST_PGDATA", "/tmp/loopwright-test-pgdata"))


async def _answers(url: str) -> bool:
    try:
        conn = await asyncpg.connect(libpq_url(url), timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    await conn.close()
    return True


def _server_url() -> str:
    if os.environ.get("TEST_DATABASE_URL"):
        return os.environ["TEST_DATABASE_URL"]
    if asyncio.run(_answers(LOCAL_SERVER)):
        return LOCAL_SERVER
    from app.embedded_pg import start_embedded

    return start_embedded(EMBEDDED_DIR).url


async def _admin(server_url: str, sql: str) -> None:
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _with_database(server_url: str, name: str) -> str:
    return make_url(libpq_url(server_url)).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    return _server_url()


@pytest.fixture(scope="session")
def database_url(pg_server_url: str) -> Iterator[str]:
    """A database of its own for this test session, migrated to head, dropped afterwards."""
    name = f"lw_test_{secrets.token_hex(4)}"
    asyncio.run(_admin(pg_server_url, f'CREATE DATABASE "{name}"'))
    url = _with_database(pg_server_url, name)

    async def upgrade() -> None:
        engine = make_engine(url)
        await migrate.upgrade(engine)
        await engine.dispose()

    asyncio.run(upgrade())
    yield url
    asyncio.run(_admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def db_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


TABLES = ", ".join(t.name for t in Base.metadata.sorted_tables)


@pytest.fixture
async def clean_db(db_engine: AsyncEngine) -> AsyncEngine:
    """Empty tables for tests that commit (engine, API, e2e tiers)."""
    async with db_engine.begin() as conn:
        await conn.execute(text(f"TRUNCATE {TABLES}"))
    return db_engine


def make_settings(database_url: str, **groups: dict[str, object]) -> Settings:
    base: dict[str, object] = {
        "database": {"url": database_url, "migrate_on_start": False, "pool_size": 5},
        "streams": {"keepalive_s": 1.0, "poll_interval_s": 1.0},
    }
    for group, values in groups.items():
        merged = dict(base.get(group, {}))  # type: ignore[call-overload]
        merged.update(values)
        base[group] = merged
    return Settings.model_validate(base)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@asynccontextmanager
async def running_server(settings: Settings) -> AsyncIterator[str]:
    """The app behind a real uvicorn server on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings), log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("the server stopped during start-up")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
        sock.close()


@pytest.fixture
async def base_url(settings: Settings, clean_db: AsyncEngine) -> AsyncIterator[str]:
    async with running_server(settings) as url:
        yield url


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        yield http
