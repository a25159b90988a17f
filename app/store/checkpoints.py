"""Checkpoints: one row per safe boundary of a run, where it may resume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import CHECKPOINTS
from app.store.driver import driver_connection, json_text

CheckpointKind = Literal[
    "input", "llm_response", "tool_result", "compaction", "journal_update", "human_pause", "final"
]


@dataclass(frozen=True)
class CheckpointRecord:
    kind: CheckpointKind
    iteration: int
    message_cursor: int
    persisted_message_count: int
    system_prompt_hash: str
    completed_tool_call_ids: list[str] = field(default_factory=list)
    loop_counters: dict[str, Any] = field(default_factory=dict)


_WRITE_MANY = (
    "INSERT INTO checkpoints (run_id, kind, iteration, message_cursor, "
    "persisted_message_count, system_prompt_hash, completed_tool_call_ids, loop_counters) "
    "SELECT run_id, kind, iteration, message_cursor, persisted_message_count, "
    "system_prompt_hash, completed_tool_call_ids, loop_counters "
    "FROM jsonb_to_recordset($1::text::jsonb) AS c(run_id text, kind text, iteration int, "
    "message_cursor int, persisted_message_count int, system_prompt_hash text, "
    "completed_tool_call_ids jsonb, loop_counters jsonb)"
)


async def write_many(
    session: AsyncSession, checkpoints: Sequence[tuple[str, CheckpointRecord]]
) -> None:
    if checkpoints:
        rows = [{"run_id": run_id, **vars(c)} for run_id, c in checkpoints]
        driver = await driver_connection(session)
        await driver.execute(_WRITE_MANY, json_text(rows))


async def latest(session: AsyncSession, run_id: str) -> CheckpointRecord | None:
    row = (
        await session.execute(
            select(CHECKPOINTS)
            .where(CHECKPOINTS.c.run_id == run_id)
            .order_by(CHECKPOINTS.c.id.desc())
            .limit(1)
        )
    ).first()
    if row is None:
        return None
    m = row._mapping
    return CheckpointRecord(
        m["kind"],
        m["iteration"],
        m["message_cursor"],
        m["persisted_message_count"],
        m["system_prompt_hash"],
        m["completed_tool_call_ids"],
        m["loop_counters"],
    )
