"""`/v1/agents`: agent configuration."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status

from app.agents.schemas import AgentCreate, AgentPatch, AgentRead
from app.agents.store import agents as agent_store
from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.db.idempotency import request_hash
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page

router = APIRouter(prefix="/v1/agents", tags=["agents"], dependencies=[Depends(get_principal)])


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=AgentRead, summary="Create an agent"
)
async def create_agent(
    body: AgentCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> AgentRead:
    """With `Idempotency-Key`, a repeat of the request (same key, same body) gets the first
    response again (`Idempotent-Replayed: true`) and makes no second agent; the same key
    with another body is a 409 `idempotency_key_reused`.

    Rules the schema cannot state (they compare fields): `limits.soft_time_limit_s` must be
    below `limits.hard_time_limit_s` (defaults 900 and 1,200), otherwise a 422
    `validation_error` naming `limits`; the `mcp_servers` have unique names, otherwise one
    naming `mcp_servers`; an `auto_approve` entry that is no tool of `GET /v1/tools` is
    `<server>__<tool>` of one of them (any tool name), otherwise one naming it."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    agent, replayed = await services.agents.create_keyed(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_agent", agent_id=agent.id))
    response.headers["ETag"] = etag(agent.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return agent


@router.get("", response_model=Page[AgentRead], summary="List agents")
async def list_agents(
    session: SessionDep,
    services: ServicesDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[AgentRead]:
    rows = await agent_store.list_agents(session, after_id=decode_cursor(cursor), limit=limit + 1)
    return page([services.agents.with_warnings(agent) for agent in rows], limit)


@router.get("/{agent_id}", response_model=AgentRead, summary="Get an agent")
async def get_agent(
    agent_id: str, session: SessionDep, services: ServicesDep, response: Response
) -> AgentRead:
    agent = await agent_store.get_agent(session, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id)
    response.headers["ETag"] = etag(agent.version)
    return services.agents.with_warnings(agent)


@router.patch("/{agent_id}", response_model=AgentRead, summary="Update an agent")
async def update_agent(
    agent_id: str,
    body: AgentPatch,
    response: Response,
    services: ServicesDep,
    if_match: IfMatchHeader = None,
) -> AgentRead:
    """The fields sent replace the agent's (`limits` and `model` as a whole). One rule the
    schema cannot state: `limits.soft_time_limit_s` must be below `hard_time_limit_s`, a
    field left out of `limits` counting as its default (900 and 1,200); otherwise a 422
    `validation_error` naming `limits`; as on create, unique `mcp_servers` names, and
    `auto_approve` entries of `GET /v1/tools` or of the agent's MCP servers as patched. A
    stale `If-Match` is a 409 `version_conflict`."""
    if not body.model_fields_set:
        raise ValidationFailed.field("body", "names no field to change")
    agent = await services.agents.update(
        agent_id, body, expected_version=expected_version(if_match)
    )
    response.headers["ETag"] = etag(agent.version)
    return agent


@router.delete("/{agent_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete an agent")
async def delete_agent(
    agent_id: str, services: ServicesDep, if_match: IfMatchHeader = None
) -> Response:
    """Refused (409 `agent_in_use`) while runs refer to the agent."""
    await services.agents.delete(agent_id, expected_version=expected_version(if_match))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
