"""The tool-call ledger: a row is started before its tool runs and completed after."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import TOOL_CALLS
from app.store.driver import driver_connection, json_text


@dataclass(frozen=True)
class ToolCallRecord:
    run_id: str
    tool_call_id: str
    tool: str
    arguments: dict[str, Any]
    idempotent: bool
    attempts: int
    started_at: datetime
    completed_at: datetime | None
    result: str | None
    is_error: bool


# The rows are `Started` and `Completed` documents: orjson writes a dataclass as an object
# of its fields, which are the record columns below.
_START_MANY = (
    "INSERT INTO tool_calls (run_id, tool_call_id, tool, arguments, idempotent, attempts, "
    "started_at, is_error) "
    "SELECT run_id, tool_call_id, tool, arguments, idempotent, 1, started_at, false "
    "FROM jsonb_to_recordset($1::text::jsonb) AS s(run_id text, tool_call_id text, "
    "tool text, arguments jsonb, idempotent boolean, started_at timestamptz) "
    "ON CONFLICT (run_id, tool_call_id) DO UPDATE "
    "SET attempts = tool_calls.attempts + 1, started_at = excluded.started_at"
)
_COMPLETE_MANY = (
    "UPDATE tool_calls AS t SET result = r.result, is_error = r.is_error, "
    "attempts = r.attempts, completed_at = r.completed_at "
    "FROM jsonb_to_recordset($1::text::jsonb) AS r(run_id text, tool_call_id text, "
    "result text, is_error boolean, attempts int, completed_at timestamptz) "
    "WHERE t.run_id = r.run_id AND t.tool_call_id = r.tool_call_id"
)


@dataclass(frozen=True)
class Started:
    run_id: str
    tool_call_id: str
    tool: str
    arguments: dict[str, Any]
    idempotent: bool
    started_at: datetime


@dataclass(frozen=True)
class Completed:
    run_id: str
    tool_call_id: str
    result: str
    is_error: bool
    attempts: int
    completed_at: datetime


async def start_many(session: AsyncSession, calls: Sequence[Started]) -> None:
    """Ledger rows begun before their tools run; a call begun before (a re-run after a
    crash) counts one more attempt."""
    if calls:
        driver = await driver_connection(session)
        await driver.execute(_START_MANY, json_text(list(calls)))


async def complete_many(session: AsyncSession, results: Sequence[Completed]) -> None:
    if results:
        driver = await driver_connection(session)
        await driver.execute(_COMPLETE_MANY, json_text(list(results)))


async def complete(
    session: AsyncSession,
    run_id: str,
    tool_call_id: str,
    *,
    result: str,
    is_error: bool,
    attempts: int,
    now: datetime,
) -> None:
    await session.execute(
        update(TOOL_CALLS)
        .where(TOOL_CALLS.c.run_id == run_id, TOOL_CALLS.c.tool_call_id == tool_call_id)
        .values(result=result, is_error=is_error, completed_at=now, attempts=attempts)
    )


async def forget(session: AsyncSession, run_id: str, tool_call_id: str) -> None:
    """Drop a call's ledger row: a person checked it never took effect, so it may run."""
    await session.execute(
        delete(TOOL_CALLS).where(
            TOOL_CALLS.c.run_id == run_id, TOOL_CALLS.c.tool_call_id == tool_call_id
        )
    )


async def for_run(session: AsyncSession, run_id: str) -> dict[str, ToolCallRecord]:
    rows = await session.execute(select(TOOL_CALLS).where(TOOL_CALLS.c.run_id == run_id))
    return {row.tool_call_id: ToolCallRecord(**row._mapping) for row in rows}
