"""Workflow definitions through real HTTP: CRUD, optimistic concurrency, validate, export."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import yaml

from app.core.ids import id_floor
from app.http.pagination import encode_cursor
from tests.support.api import assert_problem
from tests.support.factories import create_workflow


def diamond(**fields: Any) -> dict[str, Any]:
    """start -> t1 -> split -> (t2, t3) -> join -> t4 -> end"""

    def task(node_id: str) -> dict[str, Any]:
        return {"id": node_id, "type": "task", "config": {"title": f"do {node_id}"}}

    return {
        "name": "Release",
        "description": "ship it",
        "nodes": [
            {"id": "s", "type": "start", "position": {"x": 0, "y": 0}},
            task("t1"),
            {"id": "split", "type": "parallel_split"},
            task("t2"),
            task("t3"),
            {"id": "join", "type": "parallel_join", "config": {"join_strategy": "all"}},
            task("t4"),
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "t1"},
            {"id": "e2", "source": "t1", "target": "split"},
            {"id": "e3", "source": "split", "target": "t2", "type": "parallel_branch"},
            {"id": "e4", "source": "split", "target": "t3", "type": "parallel_branch"},
            {"id": "e5", "source": "t2", "target": "join"},
            {"id": "e6", "source": "t3", "target": "join"},
            {"id": "e7", "source": "join", "target": "t4"},
            {"id": "e8", "source": "t4", "target": "e"},
        ],
        **fields,
    }


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Still imported from here by other test modules: `create_workflow` of the factories."""
    return await create_workflow(client, **body)


def from_now(prefix: str) -> str:
    """A list cursor before every id made from now on (an id begins with its time), so a
    test lists what it made, however much the shared database holds."""
    return encode_cursor(id_floor(prefix, datetime.now(UTC)))


async def test_create_get_list_delete(client: httpx.AsyncClient) -> None:
    since = from_now("wf")
    response = await client.post("/v1/workflows", json=diamond())
    assert response.status_code == 201, response.text
    workflow = response.json()
    assert workflow["version"] == 1 and workflow["name"] == "Release"
    assert workflow["review_timeout_s"] == 86_400
    assert workflow["review_timeout_policy"] == "escalate"
    assert [n["id"] for n in workflow["nodes"]] == [
        "s",
        "t1",
        "split",
        "t2",
        "t3",
        "join",
        "t4",
        "e",
    ]
    assert workflow["nodes"][0]["position"] == {"x": 0, "y": 0}
    assert response.headers["etag"] == '"1"'
    assert response.headers["location"].endswith(f"/v1/workflows/{workflow['id']}")

    fetched = await client.get(f"/v1/workflows/{workflow['id']}")
    assert fetched.status_code == 200 and fetched.json() == workflow

    other = await create_workflow(client, **diamond(name="Other"))
    first = (await client.get("/v1/workflows", params={"limit": 1, "cursor": since})).json()
    assert [w["id"] for w in first["items"]] == [workflow["id"]]
    second = (await client.get("/v1/workflows", params={"cursor": first["next_cursor"]})).json()
    assert [w["id"] for w in second["items"]] == [other["id"]] and second["next_cursor"] is None

    stale = await client.delete(f"/v1/workflows/{workflow['id']}", headers={"If-Match": '"7"'})
    assert_problem(stale, 409, "version_conflict")
    deleted = await client.delete(f"/v1/workflows/{workflow['id']}", headers={"If-Match": '"1"'})
    assert deleted.status_code == 204
    assert_problem(await client.get(f"/v1/workflows/{workflow['id']}"), 404, "not_found")
    assert_problem(await client.delete(f"/v1/workflows/{workflow['id']}"), 404, "not_found")


async def test_update_with_if_match_or_body_version(client: httpx.AsyncClient) -> None:
    workflow = await create_workflow(client, **diamond())
    url = f"/v1/workflows/{workflow['id']}"

    renamed = await client.patch(url, json={"name": "Renamed"}, headers={"If-Match": '"1"'})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["version"] == 2 and renamed.headers["etag"] == '"2"'
    assert renamed.json()["nodes"] == workflow["nodes"]  # what the patch does not name stays

    stale = await client.patch(url, json={"name": "Late"}, headers={"If-Match": '"1"'})
    problem = assert_problem(stale, 409, "version_conflict")
    assert problem["expected_version"] == 1 and problem["current_version"] == 2

    stale_body = await client.patch(url, json={"name": "Late", "version": 1})
    assert_problem(stale_body, 409, "version_conflict")
    by_body = await client.patch(url, json={"review_timeout_policy": "auto_deny", "version": 2})
    assert by_body.status_code == 200 and by_body.json()["version"] == 3
    assert by_body.json()["review_timeout_policy"] == "auto_deny"

    disagree = await client.patch(
        url, json={"name": "x", "version": 3}, headers={"If-Match": '"2"'}
    )
    assert_problem(disagree, 422, "validation_error")
    assert_problem(await client.patch(url, json={"version": 3}), 422, "validation_error")
    assert (await client.get(url)).json()["name"] == "Renamed"


async def test_concurrent_updates_with_one_version_let_exactly_one_win(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **diamond())
    responses = await asyncio.gather(
        *(
            client.patch(
                f"/v1/workflows/{workflow['id']}",
                json={"description": f"writer {i}"},
                headers={"If-Match": '"1"'},
            )
            for i in range(10)
        )
    )
    assert sorted(r.status_code for r in responses) == [200] + [409] * 9


async def test_a_condition_that_does_not_parse_is_refused_on_save(
    client: httpx.AsyncClient,
) -> None:
    body = diamond()
    body["nodes"].append(
        {"id": "gate", "type": "conditional", "config": {"condition_expression": "env = 'prod'"}}
    )
    problem = assert_problem(await client.post("/v1/workflows", json=body), 422, "validation_error")
    [error] = problem["errors"]
    assert error["field"] == "nodes[gate]"
    assert "condition_expression" in error["message"] and "position 4" in error["message"]

    workflow = await create_workflow(client, **diamond())
    patched = await client.patch(f"/v1/workflows/{workflow['id']}", json={"nodes": body["nodes"]})
    assert_problem(patched, 422, "validation_error")
    assert (await client.get(f"/v1/workflows/{workflow['id']}")).json()["version"] == 1


async def test_structure_is_checked_on_save(client: httpx.AsyncClient) -> None:
    body = diamond()
    body["edges"].append({"id": "e1", "source": "t4", "target": "ghost"})
    body["nodes"][1]["config"]["priority"] = "urgent"
    problem = assert_problem(await client.post("/v1/workflows", json=body), 422, "validation_error")
    fields = sorted(e["field"] for e in problem["errors"])
    assert fields == ["edges[e1]", "edges[e1]", "nodes[t1]"]

    unknown_type = diamond()
    unknown_type["nodes"][1]["type"] = "loop"
    assert_problem(await client.post("/v1/workflows", json=unknown_type), 422, "validation_error")


async def test_validate_reports_every_broken_rule_by_node_and_edge(
    client: httpx.AsyncClient,
) -> None:
    good = await create_workflow(client, **diamond())
    report = (await client.post(f"/v1/workflows/{good['id']}/validate")).json()
    assert report == {"valid": True, "errors": []}

    draft = diamond()
    draft["nodes"][1]["config"]["title"] = ""  # an untitled task may be saved as a draft
    draft["edges"] = [e for e in draft["edges"] if e["id"] not in ("e4", "e8")]
    draft["edges"].append({"id": "back", "source": "t4", "target": "t1"})
    saved = await create_workflow(client, **draft)
    response = await client.post(f"/v1/workflows/{saved['id']}/validate")
    assert response.status_code == 200
    report = response.json()
    assert report["valid"] is False
    found = {(e["rule"], e["node_id"] or e["edge_id"]) for e in report["errors"]}
    assert found == {
        ("task_title", "t1"),
        ("parallel_split_branches", "split"),
        ("unreachable", "t3"),
        ("end_unreachable", "e"),
        ("cycle", "back"),
    }
    assert all(e["message"] for e in report["errors"])
    missing = await client.post("/v1/workflows/wf_missing/validate")
    assert_problem(missing, 404, "not_found")


async def test_export_is_yaml_in_topological_order(client: httpx.AsyncClient) -> None:
    workflow = await create_workflow(client, **diamond())
    response = await client.get(f"/v1/workflows/{workflow['id']}/export")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/yaml")
    steps = yaml.safe_load(response.text)["workflow"]["steps"]
    assert [(s["id"], s.get("depends_on", [])) for s in steps] == [
        ("t1", []),
        ("split", ["t1"]),
        ("t2", ["split"]),
        ("t3", ["split"]),
        ("join", ["t2", "t3"]),
        ("t4", ["join"]),
    ]
    assert steps[1]["branches"] == ["t2", "t3"] and steps[4]["join_strategy"] == "all"
