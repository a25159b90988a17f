"""The API's own description: `/openapi.json`, and the `/docs` (Swagger UI) and `/redoc`
pages that render it. With API keys configured they ask for a key like `/v1` does (the
document names every operation and shape of the service), unless
`LOOPWRIGHT_AUTH__PUBLIC_DOCS` makes them public."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials

from app.api.deps import ServicesDep, bearer, get_principal

OPENAPI_URL = "/openapi.json"


def may_read_docs(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    if not services.settings.auth.public_docs:
        get_principal(services, credentials)


router = APIRouter(dependencies=[Depends(may_read_docs)], include_in_schema=False)


@router.get(OPENAPI_URL)
async def openapi_document(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} API")


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} API")
