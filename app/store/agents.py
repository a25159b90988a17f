"""Agent rows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import AGENTS, Agent, Run
from app.schemas.agents import AgentRead


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
