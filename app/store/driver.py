"""Statements sent straight to asyncpg, inside a session's transaction.

The bulk writes of the agent loop's boundaries are a handful of statements per group
commit, each carrying one JSON document of many rows. Going through SQLAlchemy costs more
Python time than the statements themselves (compiling, parameter and result processing,
`json.dumps`), so these few go to the driver connection under the session instead: the
same connection, the same transaction.
"""

from __future__ import annotations

from typing import Any

import orjson
from asyncpg import Connection
from sqlalchemy.ext.asyncio import AsyncSession


async def driver_connection(session: AsyncSession) -> Connection[Any]:
    """The asyncpg connection the session's transaction runs on. SQLAlchemy sends BEGIN
    lazily, with the transaction's first statement; if none went through it yet, a no-op
    one does, so that what is sent here belongs to the transaction."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver: Connection[Any] = raw.driver_connection
    if not driver.is_in_transaction():
        await connection.exec_driver_sql("SELECT 1")
    return driver


def json_text(value: Any) -> str:
    """A JSON document as statement text: orjson handles datetimes (RFC 3339) and
    `orjson.Fragment`s of JSON encoded once already."""
    return orjson.dumps(value).decode()
