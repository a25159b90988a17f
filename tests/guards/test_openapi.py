"""The committed OpenAPI document is the one the app serves; SDK generators rely on it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from openapi_spec_validator import validate

from app.core.config import Settings
from app.main import create_app

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def _served() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def test_committed_document_matches_the_app() -> None:
    committed = json.loads(DOCUMENT.read_text())
    assert committed == _served(), (
        "openapi/openapi.json is out of date: run `make openapi` and commit the result"
    )


def test_operations_have_readable_ids_and_problem_responses() -> None:
    document = _served()
    ids = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            ids.append(operation["operationId"])
            assert re.fullmatch(r"[a-z]+(_[a-z]+)*", operation["operationId"]), (path, method)
            for status, response in operation["responses"].items():
                if status[0] in "45":
                    name = "ValidationProblem" if status == "422" else "Problem"
                    problem = response["content"]["application/problem+json"]["schema"]
                    assert problem == {"$ref": f"#/components/schemas/{name}"}, (path, status)
    assert len(ids) == len(set(ids))
    schemas = document["components"]["schemas"]
    invalid = schemas["ValidationProblem"]["properties"]["errors"]["items"]
    assert invalid == {"$ref": "#/components/schemas/FieldError"}
    assert set(schemas["FieldError"]["required"]) == {"field", "message"}
    assert {"create_task", "list_tasks", "stream_task_events", "transition_task"} <= set(ids)


def test_each_stream_documents_its_503_with_retry_after() -> None:
    document = _served()
    streams = [
        (path, operation)
        for path, operations in document["paths"].items()
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


def _security(document: dict[str, Any]) -> dict[str, object]:
    return {
        f"{method.upper()} {path}": operation.get("security")
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if path.startswith("/v1/")
    }


def test_without_keys_every_operation_may_be_called_without_one() -> None:
    """The default (and committed) document: the service is open, so a key may be sent and
    none is needed. Said for the whole document: an operation's own `security` makes
    openapi-python-client demand an authenticated client."""
    document = _served()
    assert document["security"] == [{}, {"HTTPBearer": []}]
    assert set(_security(document).values()) == {None}


def test_with_keys_every_operation_requires_one() -> None:
    """But the webhooks' route, which says it needs none: the trigger's secret signs it."""
    document = create_app(Settings(auth={"api_keys": ["k"]})).openapi()
    assert "security" not in document
    security = _security(document)
    assert security.pop("POST /v1/hooks/{trigger_id}") == []
    assert security and set(map(str, security.values())) == {str([{"HTTPBearer": []}])}


def test_the_document_is_valid_openapi() -> None:
    validate(_served())


# Objects a response may hold with no shape of their own, each for a reason.
FREE_FORM = {
    "ExecutionRead.context": "the caller's own JSON, given at activation",
    "RunRead.metadata": "the caller's own JSON, given at creation",
    "ApprovalRead.arguments": "a tool call's input: its tool's `input_schema` says its shape",
    "ToolUseBlock.input": "a tool call's input: its tool's `input_schema` says its shape",
    "ScriptedToolCall.input": "a scripted tool call's input, as the script's author wrote it",
    "ToolRead.input_schema": "a JSON Schema document, as tools publish it",
    "RunDiagnosticData": "each diagnostic has fields of its own, for people and dashboards",
    "RunTarget.metadata": "a template of the caller's own JSON (a run's metadata)",
    "WorkflowTarget.context": "a template of the caller's own JSON (an activation's context)",
    "WebhookConfig.payload_schema": "a JSON Schema document, as the trigger's author wrote it",
    "WebhookPayload.data": "the delivered event's data: its stream's event schemas say its shape",
}


def _loose_objects(document: dict[str, Any]) -> set[str]:
    """Where a schema reachable from a 2xx response (or a stream's events) is an object
    without properties, or with properties and `additionalProperties: true`."""
    components = document["components"]["schemas"]
    reached: set[str] = set()
    loose: set[str] = set()

    def walk(schema: dict[str, Any], where: str) -> None:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in reached:
                reached.add(name)
                walk(components[name], name)
            return
        extra = schema.get("additionalProperties")
        is_object = schema.get("type") == "object" or "properties" in schema or extra is not None
        unions = [v for key in ("oneOf", "anyOf", "allOf") for v in schema.get(key, [])]
        shapeless = is_object and "properties" not in schema and extra in (None, True, {})
        open_ended = "properties" in schema and extra is True
        if schema == {} or shapeless or open_ended:
            loose.add(where)
        for name, prop in schema.get("properties", {}).items():
            walk(prop, f"{where}.{name}")
        for variant in unions:
            walk(variant, where)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{where}[]")
        if isinstance(extra, dict) and extra:
            walk(extra, f"{where}{{}}")

    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                for media in response.get("content", {}).values() if status[0] == "2" else ():
                    for key in ("schema", "x-itemSchema"):
                        if key in media:
                            walk(media[key], f"{method.upper()} {path} {status}")
    return loose


def test_responses_hold_no_untyped_object_without_a_reason() -> None:
    loose = _loose_objects(_served())
    assert loose - FREE_FORM.keys() == set(), "type these, or list them with a reason"
    assert FREE_FORM.keys() - loose == set(), "typed now: take them off the list"


def test_each_stream_publishes_its_events_and_how_to_resume() -> None:
    document = _served()
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for operation in operations.values():
            ok = operation["responses"].get("200", {})
            stream = ok.get("content", {}).get("text/event-stream")
            if stream is None:
                continue
            assert stream["schema"] == {"type": "string"}, path
            event = stream["x-itemSchema"]["$ref"].rsplit("/", 1)[-1]
            assert event in schemas, path
            assert "Server-Sent Events: `" in ok["description"], path
            parameters = {(p.get("in"), p.get("name")) for p in operation["parameters"]}
            assert {("header", "Last-Event-ID"), ("query", "last_event_id")} <= parameters, path
    run_events = document["paths"]["/v1/runs/{run_id}/events"]["get"]
    assert "keep_open" in {p.get("name") for p in run_events["parameters"]}


def test_the_yaml_export_is_text() -> None:
    export = _served()["paths"]["/v1/workflows/{workflow_id}/export"]["get"]
    assert export["responses"]["200"]["content"] == {
        "application/yaml": {"schema": {"type": "string"}}
    }
