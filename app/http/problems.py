"""Renders every error as an RFC 9457 problem document (`application/problem+json`)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.errors import AppError, FieldError, ProblemCode, ValidationFailed
from app.db.errors import translate

log = logging.getLogger(__name__)

PROBLEM_TYPE_PREFIX = "urn:loopwright:problem:"
PROBLEM_MEDIA_TYPE = "application/problem+json"

_HTTP_CODES = {
    404: (ProblemCode.NOT_FOUND, "No route matches this path."),
    405: (ProblemCode.METHOD_NOT_ALLOWED, "This method is not allowed on this resource."),
}
_OTHER_HTTP = (ProblemCode.HTTP_ERROR, "HTTP error")


def problem_body(
    *, code: ProblemCode, title: str, status: int, detail: str, instance: str | None, **ext: Any
) -> dict[str, Any]:
    return {
        "type": PROBLEM_TYPE_PREFIX + code,
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "instance": instance,
        **ext,
    }


def problem_response(error: AppError, instance: str | None = None) -> JSONResponse:
    body = problem_body(
        code=error.code,
        title=error.title,
        status=error.status_code,
        detail=error.detail,
        instance=instance,
        **error.extensions(),
    )
    return JSONResponse(
        body, status_code=error.status_code, headers=error.headers(), media_type=PROBLEM_MEDIA_TYPE
    )


def _field_path(error: dict[str, Any]) -> str:
    if error.get("type") == "json_invalid":
        return "body"
    loc = [str(part) for part in error.get("loc", ())]
    named = (error.get("ctx") or {}).get("field")
    if named and (not loc or loc[-1] != named):
        loc.append(str(named))
    if loc and loc[0] in {"body", "query", "path", "header"}:
        where, rest = loc[0], loc[1:]
        return ".".join(rest) if rest and where == "body" else ".".join([where, *rest])
    return ".".join(loc) or "body"


def _field_message(error: dict[str, Any]) -> str:
    if error.get("type") == "json_invalid":
        return "the body is not valid JSON"
    if error.get("type") == "extra_forbidden":
        return "is not a field of this resource"
    message = str(error.get("msg", "is invalid"))
    return message.removeprefix("Value error, ")


def validation_problem(errors: list[dict[str, Any]]) -> ValidationFailed:
    return ValidationFailed([FieldError(_field_path(e), _field_message(e)) for e in errors])


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path. The router answers a 405 from the first
    route whose path matched, and each route serves only its own methods (`GET /v1/tasks`
    and `POST /v1/tasks` are two), so its `Allow` named one of them. Each method is tried
    against the routes as the router would (a 405 is rare enough for the cost)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]


def install(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(request: Request, exc: AppError) -> JSONResponse:
        if exc.status_code >= 500 and type(exc) is AppError:
            log.error(
                "internal error on %s %s: %s",
                request.method,
                request.url.path,
                exc,
                exc_info=exc,
            )
        return problem_response(exc, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(validation_problem(list(exc.errors())), request.url.path)

    @app.exception_handler(PydanticValidationError)
    async def _invalid_below(request: Request, exc: PydanticValidationError) -> JSONResponse:
        # A command below the API that validates what it builds from the request (a patch
        # merged into the stored resource) refuses it the same way as the request itself.
        log.info(
            "validation failed below the API on %s %s: %s", request.method, request.url.path, exc
        )
        errors = [dict(e) for e in exc.errors(include_url=False)]
        return problem_response(validation_problem(errors), request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code, title = _HTTP_CODES.get(exc.status_code, _OTHER_HTTP)
        body = problem_body(
            code=code,
            title=title,
            status=exc.status_code,
            detail=str(exc.detail),
            instance=request.url.path,
        )
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return JSONResponse(
            body, status_code=exc.status_code, headers=headers, media_type=PROBLEM_MEDIA_TYPE
        )

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        error = translate(exc)
        log.warning("database error on %s %s: %s", request.method, request.url.path, exc)
        return problem_response(error, request.url.path)

    @app.exception_handler(OSError)
    async def _os(request: Request, exc: OSError) -> JSONResponse:
        log.warning("I/O error on %s %s: %s", request.method, request.url.path, exc)
        return problem_response(translate(exc), request.url.path)
