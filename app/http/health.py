"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from app.core.errors import Unavailable
from app.core.shapes import Health
from app.http.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """The process answers HTTP."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, summary="Readiness")
async def readyz(services: ServicesDep) -> Health:
    """The database answers and the TaskEngine accepts writes."""
    if not services.tasks.running:
        raise Unavailable("the task engine is not running")
    async with services.sessionmaker() as session:
        await session.execute(text("SELECT 1"))
    return Health(status="ready")
