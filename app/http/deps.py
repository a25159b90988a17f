"""Request dependencies: the process's services, a short session, the caller's identity
(a bearer API key, or the dashboard's session cookie with its CSRF token)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.engine.approvals import ApprovalCommands
from app.core.errors import CsrfFailed, Unauthorized
from app.core.sessions import CSRF_HEADER, SESSION_COOKIE, UNSAFE_METHODS
from app.services import Services
from app.tasks.engine.task_engine import TaskEngine
from app.workflows.engine.workflows import WorkflowCommands

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
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """Who is calling: `key-<n>` for the n-th configured API key, sent as a bearer token
    or logged in to the dashboard (its session cookie; a request that changes anything
    must then carry the session's CSRF token in `X-CSRF-Token`); `local` when the server
    runs without keys (it then listens on loopback only)."""
    sessions = services.sessions
    if not sessions.required:
        return "local"
    if credentials is not None:
        index = sessions.key_index(credentials.credentials)
        if index is None:
            raise Unauthorized("the API key is not valid")
        return f"key-{index}"
    cookie = request.cookies.get(SESSION_COOKIE)
    session = sessions.read(cookie)
    if session is None:
        raise Unauthorized("the dashboard session has ended: log in again" if cookie else None)
    if request.method in UNSAFE_METHODS and not session.csrf_matches(
        request.headers.get(CSRF_HEADER)
    ):
        raise CsrfFailed()
    return session.principal


SessionDep = Annotated[AsyncSession, Depends(get_session)]
TaskEngineDep = Annotated[TaskEngine, Depends(get_task_engine)]
ApprovalCommandsDep = Annotated[ApprovalCommands, Depends(get_approval_commands)]
WorkflowCommandsDep = Annotated[WorkflowCommands, Depends(get_workflow_commands)]
PrincipalDep = Annotated[str, Depends(get_principal)]
