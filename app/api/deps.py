"""Request dependencies: the process runtime, a short session, the caller's identity."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Unauthorized
from app.engine.task_engine import TaskEngine
from app.runtime import Runtime

_bearer = HTTPBearer(auto_error=False, description="An API key from LOOPWRIGHT_AUTH__API_KEYS.")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_session(runtime: RuntimeDep) -> AsyncIterator[AsyncSession]:
    async with runtime.sessionmaker() as session:
        yield session


def get_task_engine(runtime: RuntimeDep) -> TaskEngine:
    return runtime.tasks


def get_principal(
    runtime: RuntimeDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """Who is calling: `key-<n>` for the n-th configured API key, `local` when the server
    runs without keys (it then listens on loopback only)."""
    keys = runtime.settings.auth.api_keys
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
PrincipalDep = Annotated[str, Depends(get_principal)]
