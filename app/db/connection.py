"""The engine and sessionmaker factories, and the spellings of a PostgreSQL URL.

Engines are created by the lifespan (or a CLI command), never at import time.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def async_url(url: str) -> str:
    """Accept the usual `postgres://` / `postgresql://` spellings and pick the asyncpg driver."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://', 1)[0]}://…")


def libpq_url(url: str) -> str:
    """The same URL without the SQLAlchemy driver suffix, for plain asyncpg connections."""
    return "postgresql://" + async_url(url)[len("postgresql+asyncpg://") :]


def make_engine(
    url: str, *, pool_size: int = 10, pool_timeout_s: float = 5.0, pre_ping: bool = False
) -> AsyncEngine:
    """No pre-ping by default: it costs three round trips per checkout on the hot paths;
    a connection found dead is reported as `unavailable` and the pool is refilled."""
    return create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=pool_timeout_s,
        pool_pre_ping=pre_ping,
        pool_recycle=1800,
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


async def one_snapshot(session: AsyncSession) -> None:
    """Make the session's next transaction read one snapshot (REPEATABLE READ): a page
    built from several queries (a board's columns, their counts) then shows each task
    once, where a task moving between two of its queries would otherwise show in two
    columns or in none. Call it before the transaction's first query."""
    await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
