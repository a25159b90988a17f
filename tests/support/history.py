"""Writing a conversation's transcript directly, as the steps of a run (a test's own run on
that conversation unless one is named), for tests of what reads it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.messages import Message
from app.core.states import RunStatus
from app.core.vocabulary import StepKind
from app.runs.store import history

_AGENT = (
    "INSERT INTO agents (id, name, role, skills, system_prompt, tools, model, limits, "
    "max_concurrent_tasks, cost_tier, version) VALUES (:id, 'writer', 'worker', '[]', '', "
    "'[]', '{\"provider\": \"scripted\"}', '{}', 1, 'standard', 1) ON CONFLICT DO NOTHING"
)
_RUN = (
    "INSERT INTO runs (id, agent_id, conversation_id, lane, input, multitask, status, "
    "iteration, usage, attempt, metadata, cancel_requested, lease_token, resume_available, "
    "version) VALUES (:id, :agent, :conversation, :lane, 'written by a test', 'enqueue', "
    "'completed', 0, '{}', 1, '{}', false, 0, false, 1) ON CONFLICT DO NOTHING"
)


async def append_messages(
    session: AsyncSession,
    conversation_id: str,
    messages: Sequence[Message],
    run_id: str | None = None,
) -> tuple[int, int | None]:
    """Append `messages` to the conversation as one step; its seq and first position."""
    if run_id is None:
        run_id = f"run-writes-{conversation_id}"
        agent_id = f"agent-writes-{conversation_id}"
        await session.execute(text(_AGENT), {"id": agent_id})
        lane = f"lane-writes-{conversation_id}"
        params = {"id": run_id, "agent": agent_id, "conversation": conversation_id, "lane": lane}
        await session.execute(text(_RUN), params)
    step = history.NewStep(
        run_id,
        conversation_id,
        StepKind.NOTE,
        RunStatus.COMPLETED,
        datetime.now(UTC),
        [m.model_dump(mode="json") for m in messages],
    )
    return await history.append_locked(session, step)


# The tool-call ledger as rows, for tests that query it in SQL beside tables of their own:
# (run_id, tool_call_id, tool, arguments, completed_at, result) of every call started, its
# arguments read from the `tool_use` block that made it, `completed_at` and `result` NULL
# until it was answered.
LEDGER_ROWS = """(
    SELECT s.run_id, s.tool_call_id, s.tool, u.block -> 'input' AS arguments, c.completed_at,
        c.result
    FROM (
        SELECT h.run_id, e ->> 'id' AS tool_call_id, e ->> 'tool' AS tool
        FROM run_history AS h CROSS JOIN LATERAL jsonb_array_elements(h.data -> 'started') AS e
        WHERE h.data ? 'started'
        GROUP BY 1, 2, 3
    ) AS s
    LEFT JOIN LATERAL (
        SELECT h.at AS completed_at, coalesce(e ->> 'result', (
            SELECT b ->> 'content' FROM jsonb_array_elements(h.messages) AS m
            CROSS JOIN LATERAL jsonb_array_elements(m -> 'content') AS b
            WHERE b ->> 'tool_use_id' = s.tool_call_id LIMIT 1)) AS result
        FROM run_history AS h
        CROSS JOIN LATERAL jsonb_array_elements(h.data -> 'completed') AS e
        WHERE h.run_id = s.run_id AND h.data ? 'completed' AND e ->> 'id' = s.tool_call_id
        ORDER BY h.seq DESC LIMIT 1
    ) AS c ON true
    LEFT JOIN LATERAL (
        SELECT b AS block FROM run_history AS h
        CROSS JOIN LATERAL jsonb_array_elements(h.messages) AS m
        CROSS JOIN LATERAL jsonb_array_elements(m -> 'content') AS b
        WHERE h.run_id = s.run_id AND h.messages IS NOT NULL
          AND b ->> 'type' = 'tool_use' AND b ->> 'id' = s.tool_call_id
        LIMIT 1
    ) AS u ON true
)"""


# The types of a run's events ($1: the run), as its stream sends them, in SQL.
RUN_EVENT_TYPES = """
    SELECT e ->> 0 AS type FROM run_history AS h
    CROSS JOIN LATERAL jsonb_array_elements(
        coalesce(h.data -> 'opening', '[]') || coalesce(h.data -> 'events', '[]')) AS e
    WHERE h.run_id = $1
    UNION ALL
    SELECT 'message.created' FROM run_history AS h
    CROSS JOIN LATERAL jsonb_array_elements(h.messages) AS m
    WHERE h.run_id = $1 AND h.messages IS NOT NULL
"""
