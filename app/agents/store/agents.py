"""Agent rows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.schemas import AgentRead
from app.runs.models import AGENTS, Agent, Run


async def insert_agent(session: AsyncSession, values: dict[str, Any]) -> AgentRead:
    row = Agent(**values)
    session.add(row)
    await session.flush()
    await session.refresh(row)
    return AgentRead.model_validate(row)


async def get_agent(session: AsyncSession, agent_id: str) -> AgentRead | None:
    row = await session.get(Agent, agent_id)
    return AgentRead.model_validate(row) if row else None


async def list_agents(
    session: AsyncSession, *, after_id: str | None, limit: int
) -> list[AgentRead]:
    stmt = select(Agent).order_by(Agent.id).limit(limit)
    if after_id is not None:
        stmt = stmt.where(Agent.id > after_id)
    return [AgentRead.model_validate(r) for r in await session.scalars(stmt)]


async def all_agents(session: AsyncSession) -> list[AgentRead]:
    """Every agent, oldest id first (routing weighs them all)."""
    return [
        AgentRead.model_validate(r) for r in await session.scalars(select(Agent).order_by(Agent.id))
    ]


async def update_agent(
    session: AsyncSession, agent_id: str, *, read_version: int, values: dict[str, Any]
) -> AgentRead | None:
    """Compare-and-set on `version`; None when the row is gone or was changed."""
    row = (
        await session.execute(
            update(AGENTS)
            .where(AGENTS.c.id == agent_id, AGENTS.c.version == read_version)
            .values(**values, version=read_version + 1, updated_at=func.now())
            .returning(*AGENTS.c)
        )
    ).first()
    return AgentRead.model_validate(row._mapping) if row else None


async def delete_agent(session: AsyncSession, agent_id: str, *, read_version: int | None) -> bool:
    stmt = delete(AGENTS).where(AGENTS.c.id == agent_id)
    if read_version is not None:
        stmt = stmt.where(AGENTS.c.version == read_version)
    return bool((await session.execute(stmt.returning(AGENTS.c.id))).first())


async def has_runs(session: AsyncSession, agent_id: str) -> bool:
    return bool(
        await session.scalar(select(select(Run.id).where(Run.agent_id == agent_id).exists()))
    )


async def names(session: AsyncSession, agent_ids: Iterable[str] | None = None) -> dict[str, str]:
    """Agents' names by id: of `agent_ids`, or of every agent (a list's labels)."""
    stmt = select(Agent.id, Agent.name).order_by(Agent.name, Agent.id)
    if agent_ids is not None:
        stmt = stmt.where(Agent.id.in_(set(agent_ids)))
    return {row.id: row.name for row in await session.execute(stmt)}


async def lock_reporting_lines(session: AsyncSession) -> None:
    """Serialise changes of `reports_to` until the transaction ends, so that two changes,
    each fine alone, cannot close a loop together."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext('agents.reports_to'))"))


async def chain_above(session: AsyncSession, agent_id: str) -> list[str] | None:
    """`agent_id` and its managers up to the top, nearest first; None when the agent does
    not exist. A loop (which the commands refuse) ends the walk where it closes."""
    rows = await session.execute(
        text(
            "WITH RECURSIVE up(id, reports_to, depth, path) AS ("
            " SELECT id, reports_to, 0, ARRAY[id] FROM agents WHERE id = :id"
            " UNION ALL"
            " SELECT a.id, a.reports_to, up.depth + 1, up.path || a.id"
            " FROM agents AS a JOIN up ON a.id = up.reports_to"
            " WHERE NOT a.id = ANY(up.path))"
            " SELECT id FROM up ORDER BY depth"
        ),
        {"id": agent_id},
    )
    chain = [row.id for row in rows]
    return chain or None
