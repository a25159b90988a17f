"""Request dependencies: the process's services, a short session, the caller's identity."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Unauthorized
from app.engine.approvals import ApprovalCommands
from app.engine.services import Services
from app.engine.task_engine import TaskEngine
from app.engine.workflows import WorkflowCommands

bearer = HTTPBearer(
    auto_error=False,
    description="An API key from `LOOPWRIGHT_AUTH__API_KEYS`; a server without keys needs none.",
)


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_session(services: ServicesDep) -> AsyncIterator[AsyncSession]:
    async with services.sessionmaker() as session:
        yield session


def get_task_engine(services: ServicesDep) -> TaskEngine:
    return services.tasks


def get_approval_commands(services: ServicesDep) -> ApprovalCommands:
    return services.approvals


def get_workflow_commands(services: ServicesDep) -> WorkflowCommands:
    return services.workflows


def get_principal(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """Who is calling: `key-<n>` for the n-th configured API key, `local` when the server
    runs without keys (it then listens on loopback only)."""
    keys = services.settings.auth.api_keys
    if not keys:
        return "local"
    if credentials is None:
        raise Unauthorized()
    offered = credentials.credentials.encode()
    for index, key in enumerate(keys):
        if hmac.compare_digest(offered, key.get_secret_value().encode()):
            return f"key-{index}"
    raise Unauthorized("the API key is not valid")


SessionDep = Annotated[AsyncSession, Depends(get_session)]
TaskEngineDep = Annotated[TaskEngine, Depends(get_task_engine)]
ApprovalCommandsDep = Annotated[ApprovalCommands, Depends(get_approval_commands)]
WorkflowCommandsDep = Annotated[WorkflowCommands, Depends(get_workflow_commands)]
PrincipalDep = Annotated[str, Depends(get_principal)]
