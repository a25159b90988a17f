"""The OpenAPI document: readable operation ids and problem responses on every route."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app.api.request_ids import declare_in_openapi
from app.schemas.common import Problem

_PROBLEMS = {
    "401": "Missing or invalid API key.",
    "404": "The resource does not exist.",
    "409": "Version conflict, invalid transition, reused idempotency key or expired approval.",
    "413": "The request body is too large.",
    "422": "The request is not valid; `errors` names each field.",
    "503": "Unavailable, queue full or shutting down; honour `Retry-After`.",
}


def operation_id(route: APIRoute) -> str:
    """The endpoint function's name (`create_task`), which SDK generators turn into
    `createTask` / `create_task`."""
    return route.name


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, description in _PROBLEMS.items():
                if status == "401" and not path.startswith("/v1/"):
                    continue
                responses[status] = {"description": description, "content": problem}
            if method == "get" and "requestBody" in operation:
                del operation["requestBody"]
    declare_in_openapi(schema)
    app.openapi_schema = schema
    return schema
