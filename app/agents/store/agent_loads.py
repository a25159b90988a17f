"""How many tasks each agent holds, against its `max_concurrent_tasks`.

An agent holds the tasks assigned to it (by id, or by name as a person may write it)
whose status is in `TASK_HELD`. The writer of an assignment locks the agent's row first
and counts afterwards, in a statement of its own: under READ COMMITTED a statement sees
what committed before it began, so the count sees every assignment whose transaction
held the lock before this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import TASK_HELD
from app.runs.models import AGENTS

_HELD = ", ".join(f"'{status.value}'" for status in sorted(TASK_HELD))
_COUNT_HELD = text(
    "SELECT a.id, count(t.id) AS held FROM agents AS a"
    " LEFT JOIN tasks AS t ON t.assigned_to IN (a.id, a.name)"
    f" AND t.status IN ({_HELD}) AND NOT t.id = ANY(CAST(:leaving_out AS text[]))"
    " WHERE a.id = ANY(CAST(:ids AS text[])) GROUP BY a.id"
)
_COUNT_ALL_HELD = text(
    "SELECT a.id, count(t.id) AS held FROM agents AS a"
    f" LEFT JOIN tasks AS t ON t.assigned_to IN (a.id, a.name) AND t.status IN ({_HELD})"
    " GROUP BY a.id"
)


@dataclass(frozen=True)
class AgentLoad:
    """An agent's capacity, and how many tasks it holds (outside the writer's batch)."""

    agent_id: str
    name: str
    max_concurrent_tasks: int
    held: int


async def lock_agent_loads(
    session: AsyncSession, agent_ids: Iterable[str], *, leaving_out: Iterable[str]
) -> dict[str, AgentLoad]:
    """The loads of these agents, their rows locked until the transaction ends; tasks in
    `leaving_out` (the batch's own, counted from its working copy) are not counted.
    Missing agents are absent."""
    ids = sorted(set(agent_ids))  # a stable lock order, as for task rows
    if not ids:
        return {}
    rows = await session.execute(
        select(AGENTS.c.id, AGENTS.c.name, AGENTS.c.max_concurrent_tasks)
        .where(AGENTS.c.id.in_(ids))
        .order_by(AGENTS.c.id)
        .with_for_update()
    )
    agents = {row.id: row for row in rows}
    counts = await session.execute(
        _COUNT_HELD, {"ids": list(agents), "leaving_out": sorted(set(leaving_out))}
    )
    held = {row.id: int(row.held) for row in counts}
    return {
        agent_id: AgentLoad(agent_id, row.name, row.max_concurrent_tasks, held.get(agent_id, 0))
        for agent_id, row in agents.items()
    }


async def held_counts(session: AsyncSession) -> dict[str, int]:
    """How many tasks each agent holds now, without locking (routing's first look)."""
    return {row.id: int(row.held) for row in await session.execute(_COUNT_ALL_HELD)}
