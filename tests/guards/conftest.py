"""What the migration guards share: a scratch database of their own per test."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import make_engine
from tests.support.database import admin, with_database


@pytest.fixture
async def scratch_engine(pg_server_url: str) -> AsyncIterator[AsyncEngine]:
    """An empty database, migrated by the test itself, dropped afterwards."""
    name = f"lw_migrations_{secrets.token_hex(4)}"
    await admin(pg_server_url, f'CREATE DATABASE "{name}"')
    engine = make_engine(with_database(pg_server_url, name))
    try:
        yield engine
    finally:
        await engine.dispose()
        await admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
