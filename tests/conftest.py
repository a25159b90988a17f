"""Shared fixtures: a real Postgres (TEST_DATABASE_URL, else a local server on
127.0.0.1:5432, else the embedded one), a fresh migrated database per test session,
and a real HTTP server running the app for the API tests."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.models.base import Base
from app.store import migrate
from app.store.db import make_engine
from tests.support.database import admin, server_url, with_database
from tests.support.server import make_settings, running_server


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    return server_url()


@pytest.fixture(scope="session")
def database_url(pg_server_url: str) -> Iterator[str]:
    """A database of its own for this test session, migrated to head, dropped afterwards."""
    name = f"lw_test_{secrets.token_hex(4)}"
    asyncio.run(admin(pg_server_url, f'CREATE DATABASE "{name}"'))
    url = with_database(pg_server_url, name)

    async def upgrade() -> None:
        engine = make_engine(url)
        await migrate.upgrade(engine)
        await engine.dispose()

    asyncio.run(upgrade())
    yield url
    asyncio.run(admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


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


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
async def base_url(settings: Settings, clean_db: AsyncEngine) -> AsyncIterator[str]:
    async with running_server(settings) as url:
        yield url


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        yield http
