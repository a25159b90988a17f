"""The OpenAPI document: readable operation ids and problem responses on every route."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.core.shapes import Problem, ValidationProblem
from app.events.api.stream_docs import EVENT_STREAMS
from app.http.request_ids import declare_in_openapi

_PROBLEMS = {
    "401": "Missing or invalid API key.",
    "403": (
        "A dashboard session's change without its CSRF token (`csrf_failed`); on a service "
        "without keys, a Host that is not loopback (`host_refused`) or a change asked for by "
        "another site's page (`cross_origin_refused`)."
    ),
    "404": "The resource does not exist.",
    "409": "Version conflict, invalid transition, reused idempotency key or expired approval.",
    "413": "The request body is too large.",
    "422": "The request is not valid; `errors` names each field.",
    "503": "Unavailable, queue full or shutting down; honour `Retry-After`.",
}
_STREAM_503 = (
    "`too_many_streams`: this process serves as many event streams as it may "
    "(`LOOPWRIGHT_STREAMS__MAX_SUBSCRIBERS`; the problem names the `limit`); reconnect after "
    "`Retry-After` seconds, with `Last-Event-ID` to miss nothing. Also `unavailable` or "
    "`shutting_down`."
)
_RETRY_AFTER = {
    "description": "Seconds to wait before trying again.",
    "schema": {"type": "integer", "minimum": 0},
}


def _streams(operation: dict[str, Any]) -> bool:
    """An SSE endpoint: its 200 is `text/event-stream`."""
    ok = operation.get("responses", {}).get("200", {})
    return "text/event-stream" in ok.get("content", {})


def operation_id(route: APIRoute) -> str:
    """The endpoint function's name (`create_task`), which SDK generators turn into
    `createTask` / `create_task`."""
    return route.name


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without its `null` variant: a header or a query parameter is
    absent or a string, never JSON null (FastAPI writes `anyOf: [X, null]` for an optional
    one). Keywords beside the `anyOf` (a pattern, a description) apply to X."""
    variants = schema.get("anyOf")
    if not isinstance(variants, list):
        return schema
    kept = [v for v in variants if v != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(variants):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest}


def _add_schema(components: dict[str, Any], model: type[BaseModel]) -> None:
    """`model`'s schema as a component, with the schemas it refers to beside it."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema


def _problem(name: str) -> dict[str, Any]:
    return {"application/problem+json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}


def _optional_security(schema: dict[str, Any]) -> None:
    """Without API keys the service is open (it listens on loopback only): a key may be
    sent and is not needed. Said once for the whole document, `[{}, {"HTTPBearer": []}]`,
    rather than on each operation: generators such as openapi-python-client read any
    `security` of an operation's own as "a key is required", whatever it lists."""
    requirements: list[dict[str, Any]] = []
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for requirement in operation.pop("security", []):
                if requirement not in requirements:
                    requirements.append(requirement)
    if requirements:
        schema["security"] = [{}, *requirements]


def build_openapi(app: FastAPI, *, keys_required: bool) -> dict[str, Any]:
    """The document as this app serves it; `keys_required`: the app has API keys, so the
    `/v1` operations require one."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    _add_schema(components, Problem)
    _add_schema(components, ValidationProblem)
    for stream in EVENT_STREAMS:  # the routes' own schemas of shared models stay as they are
        for name, event_schema in stream.schemas().items():
            components.setdefault(name, event_schema)
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            # A route whose refusals mean something else (the webhooks' signatures) says so.
            own = operation.pop("x-problem-descriptions", {})
            for status, default in _PROBLEMS.items():
                if status in ("401", "403") and not path.startswith("/v1/"):
                    continue
                description = own.get(status, default)
                content = _problem("ValidationProblem" if status == "422" else "Problem")
                responses[status] = {"description": description, "content": content}
            responses["503"]["headers"] = {
                "Retry-After": {"$ref": "#/components/headers/RetryAfter"}
            }
            if _streams(operation):
                responses["503"]["description"] = _STREAM_503
            if method == "get" and "requestBody" in operation:
                del operation["requestBody"]
            for parameter in operation.get("parameters", []):
                if "schema" in parameter:
                    parameter["schema"] = _not_null(parameter["schema"])
    schema["components"].setdefault("headers", {})["RetryAfter"] = _RETRY_AFTER
    if not keys_required:
        _optional_security(schema)
    declare_in_openapi(schema)
    app.openapi_schema = schema
    return schema
