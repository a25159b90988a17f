"""Statements sent straight to asyncpg, inside a session's transaction.

The bulk writes of the agent loop's boundaries are a handful of statements per group
commit, each carrying one JSON document of many rows. Going through SQLAlchemy costs more
Python time than the statements themselves (compiling, parameter and result processing,
`json.dumps`), so these few go to the driver connection under the session instead: the
same connection, the same transaction, and the same exceptions as through SQLAlchemy.
"""

from __future__ import annotations

import json
from dataclasses import is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import asyncpg
import orjson
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession


class Driver:
    """The asyncpg connection of a session's transaction. A failure is raised as the
    SQLAlchemy error the same statement would have raised through the session, so callers
    (and `app.db.errors`) tell a lost connection or a violated constraint apart alike."""

    def __init__(self, dialect: Dialect, adapted: Any) -> None:
        self._dialect = dialect
        self._adapted = adapted  # SQLAlchemy's DB-API adapter around the asyncpg connection
        self._connection: asyncpg.Connection[Any] = adapted.driver_connection

    async def begin(self) -> None:
        """SQLAlchemy sends BEGIN lazily, with a transaction's first statement: if none went
        through it yet, BEGIN is sent here, as its adapter sends it (so the adapter commits
        or rolls back this transaction as its own)."""
        if not self._connection.is_in_transaction():
            await self._adapted._start_transaction()

    async def execute(self, statement: str, *args: Any) -> None:
        try:
            await self._connection.execute(statement, *args)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self._translated(statement, args, exc) from exc

    async def fetch(self, statement: str, *args: Any) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self._connection.fetch(statement, *args)
            return rows
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self._translated(statement, args, exc) from exc

    def _translated(self, statement: str, args: tuple[Any, ...], exc: Exception) -> Exception:
        try:
            self._adapted._handle_exception(exc)  # raises SQLAlchemy's DB-API error for it
        except Exception as dbapi_error:
            base = self._dialect.loaded_dbapi.Error
            exc = DBAPIError.instance(statement, args, dbapi_error, base, dialect=self._dialect)
        return exc


async def driver_connection(session: AsyncSession) -> Driver:
    """The driver under the session's transaction, begun."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver = Driver(connection.dialect, raw.dbapi_connection)
    await driver.begin()
    return driver


def json_text(value: Any) -> str:
    """A JSON document as statement text. orjson writes datetimes (RFC 3339), enums and
    dataclasses itself; non-string keys become strings, as `json.dumps` makes them."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        # An integer beyond 64 bits (a model may put any number in tool arguments), which
        # only the standard library writes.
        return json.dumps(value, default=_plain)


def _plain(value: Any) -> Any:
    """What orjson would have written for a value `json` does not know."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):
        return vars(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
