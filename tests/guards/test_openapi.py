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
