"""Agent commands: create (with `Idempotency-Key`), update (compare-and-set on version),
delete."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentCreate, AgentPatch, AgentRead
from app.agents.store import agents as agent_store
from app.core.errors import (
    Conflict,
    FieldError,
    NotFound,
    ProblemCode,
    ValidationFailed,
    VersionConflict,
)
from app.core.ids import new_id
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.runs.schemas.mcp import server_of

CREATE_SCOPE = "agents.create"


class AgentInUse(Conflict):
    """Runs refer to this agent, so it cannot be deleted."""

    code = ProblemCode.AGENT_IN_USE


class AgentCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
        known_tools: Collection[str] | None = None,
        warnings: Callable[[AgentRead], list[str]] = lambda agent: [],
    ) -> None:
        """`known_tools`: the tools an agent may name (None: any name, e.g. a process that
        only stores agents); `warnings`: why an agent's runs would fail as configured now
        (a provider without credentials), told to the client with the agent."""
        self._sessionmaker = sessionmaker
        self._clock = clock
        self._idempotency_retention = idempotency_retention
        self._known_tools = None if known_tools is None else sorted(known_tools)
        self._warnings = warnings

    def with_warnings(self, agent: AgentRead) -> AgentRead:
        return agent.model_copy(update={"warnings": self._warnings(agent)})

    async def misconfigured(self) -> list[AgentRead]:
        """The stored agents whose runs would fail as configured now, with the reasons in
        their `warnings`: told at start-up, before a run finds out."""
        found: list[AgentRead] = []
        after_id: str | None = None
        while True:
            async with self._sessionmaker() as session:
                agents = await agent_store.list_agents(session, after_id=after_id, limit=500)
            found += [a for a in map(self.with_warnings, agents) if a.warnings]
            if len(agents) < 500:
                return found
            after_id = agents[-1].id

    def _check_tools(self, values: dict[str, Any], mcp_servers: Collection[str]) -> None:
        """An unknown tool name is refused now, not when a run first calls it. The tools of
        the agent's MCP servers (`mcp_servers`: their names) are known only to its runs: any
        `<server>__<tool>` of one of them may be auto-approved, and none needs listing."""
        known = self._known_tools
        if known is None:
            return
        servers = set(mcp_servers)
        unknown = [
            FieldError(f"body.{field}[{i}]", _unknown_tool(name, known, servers, field))
            for field in ("tools", "auto_approve")
            for i, name in enumerate(values.get(field) or [])
            if name not in known
            and not (field == "auto_approve" and server_of(name, servers) is not None)
        ]
        if unknown:
            raise ValidationFailed(unknown)

    @staticmethod
    async def _check_manager(session: AsyncSession, agent_id: str, manager: str | None) -> None:
        """`reports_to` names an existing agent, and following it never comes back."""
        if manager is None:
            return
        await agent_store.lock_reporting_lines(session)
        chain = await agent_store.chain_above(session, manager)
        if chain is None:
            raise ValidationFailed.field("body.reports_to", f"no agent has the id {manager!r}")
        if agent_id in chain:
            loop = " → ".join([agent_id, *chain[: chain.index(agent_id) + 1]])
            raise ValidationFailed.field("body.reports_to", f"reporting lines may not loop: {loop}")

    async def create(self, body: AgentCreate) -> AgentRead:
        agent, _ = await self.create_keyed(body)
        return agent

    async def create_keyed(
        self,
        body: AgentCreate,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[AgentRead, bool]:
        """The agent, and whether it is the first response to this key, replayed (the
        agent as that create returned it)."""
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        values = body.model_dump(mode="json") | {"id": new_id("agent"), "version": 1}
        self._check_tools(values, [server.name for server in body.mcp_servers])
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=self._clock(), retention=self._idempotency_retention
            )
            if create.replay is not None:
                replayed = AgentRead.model_validate(create.replay.response)
                return self.with_warnings(replayed), True
            await self._check_manager(session, values["id"], body.reports_to)
            agent = await agent_store.insert_agent(session, values)
            await create.remember(agent.id, agent.model_dump(mode="json"))
        return self.with_warnings(agent), False

    async def update(
        self, agent_id: str, body: AgentPatch, *, expected_version: int | None
    ) -> AgentRead:
        changes = body.model_dump(mode="json", exclude_unset=True)
        async with self._sessionmaker() as session, session.begin():
            current = await agent_store.get_agent(session, agent_id)
            if current is None:
                raise NotFound("agent", agent_id)
            if expected_version is not None and expected_version != current.version:
                raise VersionConflict(expected_version, current.version)
            merged = AgentCreate.model_validate(
                current.model_dump(mode="json", include=set(AgentCreate.model_fields)) | changes
            )
            self._check_tools(changes, [server.name for server in merged.mcp_servers])
            if "reports_to" in changes:
                await self._check_manager(session, agent_id, merged.reports_to)
            updated = await agent_store.update_agent(
                session,
                agent_id,
                read_version=current.version,
                values=merged.model_dump(mode="json"),
            )
            if updated is None:
                latest = await agent_store.get_agent(session, agent_id)
                raise VersionConflict(current.version, latest.version if latest else 0)
            return self.with_warnings(updated)

    async def delete(self, agent_id: str, *, expected_version: int | None) -> None:
        async with self._sessionmaker() as session, session.begin():
            current = await agent_store.get_agent(session, agent_id)
            if current is None:
                raise NotFound("agent", agent_id)
            if expected_version is not None and expected_version != current.version:
                raise VersionConflict(expected_version, current.version)
            if await agent_store.has_runs(session, agent_id):
                raise AgentInUse(f"agent {agent_id!r} has runs; it is kept for their history")
            await agent_store.delete_agent(session, agent_id, read_version=current.version)


def _unknown_tool(name: str, known: list[str], servers: set[str], field: str) -> str:
    if field == "tools" and server_of(name, servers) is not None:
        return (
            f"{name!r} is a tool of the agent's MCP server {server_of(name, servers)!r}: "
            "those are its own without being listed here"
        )
    mcp = f"; or `<server>__<tool>` of its MCP servers ({', '.join(sorted(servers))})"
    return (
        f"no tool is named {name!r}; known: {', '.join(known)}"
        f"{mcp if field == 'auto_approve' and servers else ''}"
    )
