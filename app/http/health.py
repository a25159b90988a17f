"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import text

from app.core.errors import Unavailable
from app.core.shapes import Health
from app.http.deps import ServicesDep
from app.runtime.components import ComponentState, Reading

router = APIRouter(tags=["health"])


class ComponentHealth(BaseModel):
    """A background component of this process."""

    name: str
    state: ComponentState = Field(
        description="`running`, `restarting` (its loop died) or `stopped`."
    )
    last_pass: datetime | None = Field(description="When it last completed a pass.")
    restarts: int = Field(description="Times its loop died and was started again.")
    stalled: bool = Field(description="Running, but no pass for several of its intervals.")

    @classmethod
    def of(cls, reading: Reading) -> ComponentHealth:
        return cls(
            name=reading.name,
            state=reading.state,
            last_pass=reading.last_pass,
            restarts=reading.restarts,
            stalled=reading.stalled,
        )


class Readiness(Health):
    components: list[ComponentHealth] = Field(
        description="This process's supervised background components. A component that "
        "restarted or stalled does not make the process unready: the probe answers for "
        "requests, which it still serves."
    )


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """The process answers HTTP."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, summary="Readiness")
async def readyz(services: ServicesDep) -> Readiness:
    """The database answers and the TaskEngine accepts writes; with each background
    component's state, last pass and restarts."""
    if not services.tasks.running:
        raise Unavailable("the task engine is not running")
    async with services.sessionmaker() as session:
        await session.execute(text("SELECT 1"))
    components = [ComponentHealth.of(r) for r in services.components.readings()]
    return Readiness(status="ready", components=components)
