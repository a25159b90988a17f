"""`GET /metrics`: the Prometheus exposition (text format, or OpenMetrics if asked).

It asks for the API key like `/v1` does (when keys are configured): the counts, model,
tool and breaker names it shows are about the users' work, and Prometheus sends a bearer
token with a one-line scrape setting. Not in the OpenAPI document: it is not JSON and no
SDK should call it.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import choose_encoder

from app.http.deps import PrincipalDep, ServicesDep, SessionDep
from app.runs.store import run_counts

router = APIRouter(tags=["metrics"])


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request, _: PrincipalDep, services: ServicesDep, session: SessionDep
) -> Response:
    exported = services.metrics
    exported.set_run_counts(await run_counts.count_by_status(session))
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(exported.registry), media_type=content_type)
