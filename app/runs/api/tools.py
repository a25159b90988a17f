"""`/v1/tools`: the tools an agent may name, with their inputs."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.http.deps import ServicesDep, get_principal
from app.runs.schemas.tools import ToolRead

router = APIRouter(prefix="/v1/tools", tags=["tools"], dependencies=[Depends(get_principal)])


@router.get("", response_model=list[ToolRead], summary="List the tools")
async def list_tools(services: ServicesDep) -> list[ToolRead]:
    """Every tool this service knows, by name: the built-ins, the task tools,
    `http_request` and the configured plugins'. An agent's `tools` and `auto_approve` may
    name only these."""
    return services.tools
