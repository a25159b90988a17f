"""The API's own description: `/openapi.json`, and the `/docs` (Swagger UI) and `/redoc`
pages that render it. With API keys configured they ask for a key like `/v1` does (the
document names every operation and shape of the service), unless
`LOOPWRIGHT_AUTH__PUBLIC_DOCS` makes them public.

The pages' scripts and styles are served here, from the `fastapi-offline` package (pinned
with the other dependencies), not from a CDN: the docs work on a machine with no internet.
They are the libraries' own files, so they need no key. A browser logged in to the
dashboard reads them with its session."""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.staticfiles import StaticFiles

from app.http.deps import ServicesDep, bearer, get_principal

OPENAPI_URL = "/openapi.json"
ASSETS_URL = "/docs/assets"


def assets() -> StaticFiles:
    """The docs pages' scripts, styles and icon (mounted at `ASSETS_URL`)."""
    return StaticFiles(directory=str(files("fastapi_offline") / "static"))


def may_read_docs(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    if not services.settings.auth.public_docs:
        get_principal(request, services, credentials)


router = APIRouter(dependencies=[Depends(may_read_docs)], include_in_schema=False)


@router.get(OPENAPI_URL)
async def openapi_document(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=OPENAPI_URL,
        title=f"{request.app.title} API",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
    )


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=OPENAPI_URL,
        title=f"{request.app.title} API",
        redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )
