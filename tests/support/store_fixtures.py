"""Store tests: each gets a session inside a transaction that is rolled back at the end,
so store functions run on the real schema and nothing they write outlives the test."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession


@pytest.fixture
async def session(db_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    async with db_engine.connect() as conn:
        outer = await conn.begin()
        db = AsyncSession(
            bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        try:
            yield db
        finally:
            await db.close()
            await outer.rollback()


@pytest.fixture
def token() -> str:
    """A unique prefix for ids, projects and streams: other tiers commit rows to the same
    database, so tests here never assume an empty table."""
    return secrets.token_hex(4)
