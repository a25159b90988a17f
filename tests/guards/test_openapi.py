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
            problem = operation["responses"]["422"]["content"]["application/problem+json"]
            assert problem["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert len(ids) == len(set(ids))
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
