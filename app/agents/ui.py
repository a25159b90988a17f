"""The agents (`/ui/agents`): their list, a form for a new one (`/ui/agents/new`), and an
agent's page (`/ui/agents/{id}`): why its runs would fail as configured now, the same form
filled in to edit it, and its recent runs.

The form's script builds the JSON body and calls the API (`POST /v1/agents`, or `PATCH
/v1/agents/{id}` with `If-Match`: the version the page showed, so an edit made meanwhile
is refused rather than overwritten); the API's field errors are shown next to the fields.
The model's fields are those of the provider chosen: the scripted model adds its script,
an OpenAI-compatible one its server and the variable holding its key. A fallback model is
shown as `fallback` (an agent's older `fallback_name`, as the same provider's), and saved so.
The MCP servers are a JSON text, as the API takes them."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.agents.schemas import AgentCreate, AgentRead
from app.agents.store import agents as agent_store
from app.core.model_config import FallbackModel, ModelConfig, ModelProvider, ScriptedTurn
from app.core.vocabulary import CostTier
from app.dashboard.deps import DbDep, ServicesDep, Viewer, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.runs.schemas.tools import ToolApproval, ToolRead
from app.runs.store import history
from app.runs.store import runs as run_store

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("agents", "Agents", "/ui/agents", order=100))

AGENTS_PAGE = 50
RECENT_RUNS = 20  # an agent's runs its page lists; the runs board has them all

# A new agent's form: the schema's defaults, the model left for the person to name.
_NEW = AgentCreate.model_construct(
    name="", model=ModelConfig.model_construct(provider=ModelProvider.ANTHROPIC, name="")
)


@router.get("/agents")
async def agents_list(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    """In the order they were made, a page at a time; `after`: the page after that agent."""
    rows = await agent_store.list_agents(db, after_id=after, limit=AGENTS_PAGE + 1)
    agents = rows[:AGENTS_PAGE]
    context = {
        "section": "agents",
        "agents": agents,
        "more": agents[-1].id if len(rows) > AGENTS_PAGE else None,
        "first_page": after is None,
    }
    return render(request, "agents.html", viewer, context)


@router.get("/agents/new")
async def new_agent(request: Request, viewer: ViewerDep, services: ServicesDep) -> HTMLResponse:
    return render(request, "agent.html", viewer, _form(_NEW, None, services.tools))


@router.get("/agents/{agent_id}")
async def agent_page(
    agent_id: str, request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> HTMLResponse:
    agent = await agent_store.get_agent(db, agent_id)
    if agent is None:
        return _not_found(request, viewer, agent_id)
    rows = await run_store.list_runs(
        db,
        start=None,
        limit=RECENT_RUNS,
        filters={"agent_id": agent.id},
        newest_first=True,
    )
    context = {
        **_form(agent, services.agents.with_warnings(agent), services.tools),
        "runs": await history.with_live_counters(db, rows),
        "agents": {agent.id: agent.name},  # the runs' rows name their agent
    }
    return render(request, "agent.html", viewer, context)


def _form(
    values: AgentCreate | AgentRead, agent: AgentRead | None, tools: list[ToolRead]
) -> dict[str, object]:
    """The form's context: `values` to fill it with, and the stored `agent` it edits (None:
    a new one)."""
    known = {tool.name for tool in tools}
    return {
        "section": "agents",
        "values": values,
        "agent": agent,
        "script": _script_text(values.model.script),
        "fallback": _fallback(values.model),
        "tools": tools,
        # The MCP servers as JSON, and the auto-approved tools of theirs (no checkbox has
        # them: the servers' tools are known to runs only).
        "mcp_servers": _mcp_text(values),
        "mcp_auto_approve": [name for name in values.auto_approve if name not in known],
        "side_effects": ToolApproval.SIDE_EFFECTS,
        "providers": list(ModelProvider),
        "cost_tiers": list(CostTier),
    }


def _fallback(model: ModelConfig) -> FallbackModel | None:
    if model.fallback is not None or model.fallback_name is None:
        return model.fallback
    return FallbackModel(provider=model.provider, name=model.fallback_name)


def _script_text(script: list[ScriptedTurn] | None) -> str:
    """The scripted model's turns as the form's JSON, without the fields left at their
    defaults."""
    if not script:
        return ""
    turns = [turn.model_dump(mode="json", exclude_defaults=True) for turn in script]
    return json.dumps(turns, indent=2, ensure_ascii=False)


def _mcp_text(values: AgentCreate | AgentRead) -> str:
    servers = [
        server.model_dump(mode="json", exclude_defaults=True) for server in values.mcp_servers
    ]
    for server, typed in zip(servers, values.mcp_servers, strict=True):
        server["transport"] = typed.transport.value  # a default, but the union's tag
    return json.dumps(servers, indent=2, ensure_ascii=False)


def _not_found(request: Request, viewer: Viewer, agent_id: str) -> HTMLResponse:
    context = {"section": "agents", "what": f"agent {agent_id}"}
    return render(request, "not_found.html", viewer, context, status_code=404)
