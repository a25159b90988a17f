"""The committed OpenAPI document is the one the app serves; SDK generators rely on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.core.config import Settings
from app.main import create_app

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def _served() -> dict[str, object]:
    return create_app(Settings()).openapi()


def test_committed_document_matches_the_app() -> None:
    committed = json.loads(DOCUMENT.read_text())
    assert committed == _served(), (
        "openapi/openapi.json is out of date: run `make openapi` and commit the result"
    )


def test_operations_have_readable_ids_and_problem_responses() -> None:
    document = _served()
    ids = []
    for path, operations in document["paths"].items():  # type: ignore[attr-defined]
        for method, operation in operations.items():
            ids.append(operation["operationId"])
            assert re.fullmatch(r"[a-z]+(_[a-z]+)*", operation["operationId"]), (path, method)
            for status, response in operation["responses"].items():
                if status[0] in "45":
                    name = "ValidationProblem" if status == "422" else "Problem"
                    problem = response["content"]["application/problem+json"]["schema"]
                    assert problem == {"$ref": f"#/components/schemas/{name}"}, (path, status)
    assert len(ids) == len(set(ids))
    schemas = document["components"]["schemas"]  # type: ignore[index]
    invalid = schemas["ValidationProblem"]["properties"]["errors"]["items"]
    assert invalid == {"$ref": "#/components/schemas/FieldError"}
    assert set(schemas["FieldError"]["required"]) == {"field", "message"}
    assert {"create_task", "list_tasks", "stream_task_events", "transition_task"} <= set(ids)


def test_each_stream_documents_its_503_with_retry_after() -> None:
    document = _served()
    streams = [
        (path, operation)
        for path, operations in document["paths"].items()  # type: ignore[attr-defined]
        for operation in operations.values()
        if "text/event-stream" in operation["responses"].get("200", {}).get("content", {})
    ]
    assert len(streams) >= 6
    for path, operation in streams:
        refused = operation["responses"]["503"]
        assert "too_many_streams" in refused["description"], path
        assert refused["headers"]["Retry-After"] == {"$ref": "#/components/headers/RetryAfter"}
        problem = refused["content"]["application/problem+json"]["schema"]
        assert problem == {"$ref": "#/components/schemas/Problem"}


def _security(document: dict[str, object]) -> dict[str, object]:
    return {
        f"{method.upper()} {path}": operation.get("security")
        for path, operations in document["paths"].items()  # type: ignore[attr-defined]
        for method, operation in operations.items()
        if path.startswith("/v1/")
    }


def test_without_keys_every_operation_may_be_called_without_one() -> None:
    """The default (and committed) document: the service is open, so a generated client
    needs no key, and may still send one."""
    security = _security(_served())
    assert security and set(map(str, security.values())) == {str([{}, {"HTTPBearer": []}])}


def test_with_keys_every_operation_requires_one() -> None:
    document = create_app(Settings(auth={"api_keys": ["k"]})).openapi()
    security = _security(document)
    assert security and set(map(str, security.values())) == {str([{"HTTPBearer": []}])}
