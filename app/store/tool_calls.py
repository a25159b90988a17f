"""The tool-call ledger: a row is started before its tool runs and completed after."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import TOOL_CALLS


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


async def start(
    session: AsyncSession,
    run_id: str,
    calls: Sequence[tuple[str, str, dict[str, Any], bool]],
    now: datetime,
) -> None:
    """Record (tool_call_id, tool, arguments, idempotent) as started; a call started before
    (a re-run after a crash) counts one more attempt."""
    if not calls:
        return
    stmt = insert(TOOL_CALLS).values(
        [
            {
                "run_id": run_id,
                "tool_call_id": call_id,
                "tool": tool,
                "arguments": arguments,
                "idempotent": idempotent,
                "attempts": 1,
                "started_at": now,
                "is_error": False,
            }
            for call_id, tool, arguments, idempotent in calls
        ]
    )
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["run_id", "tool_call_id"],
            set_={"attempts": TOOL_CALLS.c.attempts + 1, "started_at": now},
        )
    )


_COMPLETE_MANY = text(
    "UPDATE tool_calls AS t SET result = r.result, is_error = r.is_error, "
    "attempts = r.attempts, completed_at = :now "
    "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) "
    "AS r(tool_call_id text, result text, is_error boolean, attempts int) "
    "WHERE t.run_id = :run_id AND t.tool_call_id = r.tool_call_id"
)


async def complete_many(
    session: AsyncSession,
    run_id: str,
    results: Sequence[tuple[str, str, bool, int]],
    now: datetime,
) -> None:
    """Record (tool_call_id, result, is_error, attempts) for calls that finished."""
    if not results:
        return
    rows = [
        {"tool_call_id": i, "result": r, "is_error": e, "attempts": a} for i, r, e, a in results
    ]
    await session.execute(_COMPLETE_MANY, {"run_id": run_id, "rows": json.dumps(rows), "now": now})


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


async def for_run(session: AsyncSession, run_id: str) -> dict[str, ToolCallRecord]:
    rows = await session.execute(select(TOOL_CALLS).where(TOOL_CALLS.c.run_id == run_id))
    return {row.tool_call_id: ToolCallRecord(**row._mapping) for row in rows}
