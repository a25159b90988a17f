"""Workflow templates through the real service: the catalogue (one template or more of each
kind, each rendering a valid definition with its defaults), instantiation with variables
(a sprint of `sprint_length` days, a strict WIP limit of `wip_limit`), limits already set
kept, an open sprint left alone, bad variables named by field, an unknown template, an
idempotent replay that changes nothing, and activation into the definition's project."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.sprints.test_sprints_api import (
    make_sprint,
    sprint_events,
    sprints_stream_end,
)
from tests.support.api import assert_problem
from tests.support.event_schemas import stored_events_documented
from tests.support.factories import project, unique
from tests.tasks.test_boards_api import board, column, limit
from tests.workflows.test_workflows_api import from_now

KINDS = ["sequential", "parallel", "kanban", "agile_kanban"]


async def instantiate(
    client: httpx.AsyncClient, template: str, headers: dict[str, str] | None = None, **body: Any
) -> httpx.Response:
    return await client.post(
        f"/v1/workflow-templates/{template}/instantiate", json=body, headers=headers or {}
    )


async def made(client: httpx.AsyncClient, template: str, **body: Any) -> dict[str, Any]:
    response = await instantiate(client, template, **body)
    assert response.status_code == 201, response.text
    workflow: dict[str, Any] = response.json()
    return workflow


async def made_since(client: httpx.AsyncClient, path: str, cursor: str) -> list[dict[str, Any]]:
    """What `path` lists after `cursor` (`from_now`): what was made since, on any test's part
    (the tests of a worker run one at a time)."""
    response = await client.get(path, params={"cursor": cursor, "limit": 200})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def sprints_of(client: httpx.AsyncClient, project: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/sprints", params={"project": project})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def today() -> set[date]:
    """Today as the server's clock says it (UTC); the day before too, should the test
    cross midnight between the request and this."""
    now = datetime.now(UTC).date()
    return {now, now - timedelta(days=1)}


async def test_the_catalogue_lists_each_kind_and_each_renders_a_valid_definition(
    client: httpx.AsyncClient,
) -> None:
    listed = await client.get("/v1/workflow-templates")
    assert listed.status_code == 200, listed.text
    templates = listed.json()
    assert [t["kind"] for t in templates] == KINDS  # listed in the order of their kinds
    for summary in templates:
        assert "definition" not in summary
        found = await client.get(f"/v1/workflow-templates/{summary['name']}")
        assert found.status_code == 200, found.text
        template = found.json()
        assert template["variables"] == summary["variables"]
        definition = template["definition"]
        assert definition["kind"] == summary["kind"]
        # The default definition is one `POST /v1/workflows` takes and activation accepts.
        saved = await client.post("/v1/workflows", json=definition)
        assert saved.status_code == 201, saved.text
        checked = await client.post(f"/v1/workflows/{saved.json()['id']}/validate")
        assert checked.json() == {"valid": True, "errors": []}

    agile = (await client.get("/v1/workflow-templates/agile_kanban")).json()
    variables = {v["name"]: v for v in agile["variables"]}
    assert variables["sprint_length"] == {
        "name": "sprint_length",
        "type": "int",
        "default": 14,
        "minimum": 1,
        "maximum": 90,
        "description": "A sprint's length in days, its first and last day included.",
    }
    assert variables["wip_limit"]["default"] == 3
    assert agile["definition"]["board"] == {
        "wip_limits": [{"column": "in_progress", "limit": 3, "mode": "strict"}],
        "sprint": {"length_days": 14, "velocity_window": 3, "auto_transition": True},
    }
    kanban = (await client.get("/v1/workflow-templates/kanban")).json()
    assert {v["name"] for v in kanban["variables"]} >= {"wip_limit"}


async def test_an_unknown_template_is_a_404(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.get("/v1/workflow-templates/waterfall"), 404, "not_found")
    assert problem["resource"] == "workflow template" and problem["id"] == "waterfall"
    assert_problem(await instantiate(client, "waterfall"), 404, "not_found")


async def test_agile_kanban_instantiated_opens_a_sprint_and_sets_the_limit(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    atlas = project()
    since = await sprints_stream_end(db_engine)
    response = await instantiate(
        client,
        "agile_kanban",
        name="Atlas sprints",
        project=atlas,
        variables={"sprint_length": 10, "wip_limit": 2},
    )
    assert response.status_code == 201, response.text
    workflow = response.json()
    assert response.headers["Location"].endswith(f"/v1/workflows/{workflow['id']}")
    assert response.headers["ETag"] == '"1"'
    assert workflow["name"] == "Atlas sprints"
    assert (workflow["kind"], workflow["project"]) == ("agile_kanban", atlas)
    assert workflow["board"]["sprint"]["length_days"] == 10
    assert (await client.get(f"/v1/workflows/{workflow['id']}")).json() == workflow

    in_progress = column(await board(client, atlas), "in_progress")
    assert in_progress["wip_limit"] == {"limit": 2, "mode": "strict"}
    [sprint] = await sprints_of(client, atlas)
    assert sprint["status"] == "planning" and sprint["duration_days"] == 10
    assert date.fromisoformat(sprint["start_date"]) in today()
    assert sprint["name"] == "Sprint 1"

    [event] = await sprint_events(client, since, sprint["id"], 1)
    assert event.event == "sprint.created" and event.data["sprint"]["id"] == sprint["id"]
    assert event.data["actor"] == "local"
    assert "sprint.created" in await stored_events_documented(db_engine, {sprint["id"]}, runs=set())


async def test_a_limit_already_set_is_kept_and_an_open_sprint_left_alone(
    client: httpx.AsyncClient,
) -> None:
    atlas, orion = project(), project()
    await limit(client, atlas, "in_progress", 7, "advisory")
    planned = await make_sprint(client, project=atlas)
    await made(client, "agile_kanban", project=atlas, variables={"wip_limit": 2})
    found = await board(client, atlas)
    assert column(found, "in_progress")["wip_limit"] == {"limit": 7, "mode": "advisory"}
    assert [s["id"] for s in await sprints_of(client, atlas)] == [planned["id"]]

    # An active sprint counts as open too; kanban sets both its columns where they are free.
    active = await make_sprint(client, project=orion)
    started = await client.post(f"/v1/sprints/{active['id']}/transitions", json={"to": "active"})
    assert started.status_code == 200, started.text
    await limit(client, orion, "review", 9)
    await made(client, "agile_kanban", project=orion)
    await made(client, "kanban", project=orion, variables={"wip_limit": 4})
    assert [s["id"] for s in await sprints_of(client, orion)] == [active["id"]]
    limits = (await client.get(f"/v1/projects/{orion}/wip-limits")).json()
    assert [(w["column"], w["limit"], w["mode"]) for w in limits] == [
        ("in_progress", 3, "strict"),  # agile_kanban's default came first and stays
        ("review", 9, "strict"),
    ]


async def test_without_a_project_the_board_is_left_alone(client: httpx.AsyncClient) -> None:
    atlas, since = project(), from_now("sprint")
    workflow = await made(client, "agile_kanban", variables={"sprint_length": 5})
    assert workflow["project"] is None and workflow["board"]["sprint"]["length_days"] == 5
    assert await made_since(client, "/v1/sprints", since) == []
    sequential = await made(client, "sequential", project=atlas, variables={"feature": " SSO "})
    assert sequential["name"] == "Deliver SSO" and sequential["board"] is None
    titles = [n["config"].get("title") for n in sequential["nodes"] if n["type"] == "task"]
    assert titles == ["Design SSO", "Implement SSO", "Review SSO"]
    assert (await client.get(f"/v1/projects/{atlas}/wip-limits")).json() == []
    assert await sprints_of(client, atlas) == []


async def test_bad_variables_are_named_by_field(client: httpx.AsyncClient) -> None:
    atlas, since = project(), from_now("wf")
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"wip_limt": 2}, "variables.wip_limt", "is not a variable of template 'agile_kanban'"),
        ({"wip_limit": "2"}, "variables.wip_limit", "must be an integer"),
        ({"wip_limit": 0}, "variables.wip_limit", "must be from 1 to 100"),
        ({"sprint_length": 91}, "variables.sprint_length", "must be from 1 to 90"),
        ({"wip_limit": True}, "variables.wip_limit", "must be an integer or a string"),
        ({"wip_limit": 2.5}, "variables.wip_limit", "must be an integer or a string"),
    ]
    for variables, field, message in cases:
        response = await instantiate(client, "agile_kanban", project=atlas, variables=variables)
        problem = assert_problem(response, 422, "validation_error")
        assert [e["field"] for e in problem["errors"]] == [field], variables
        assert problem["errors"][0]["message"].startswith(message), problem
    blank = await instantiate(client, "sequential", variables={"feature": "   "})
    assert assert_problem(blank, 422, "validation_error")["errors"][0]["field"] == (
        "variables.feature"
    )
    assert_problem(await instantiate(client, "kanban", colour="red"), 422, "validation_error")
    # Nothing was made by the refusals.
    assert await made_since(client, "/v1/workflows", since) == []
    assert await sprints_of(client, atlas) == []


async def test_a_repeat_with_the_key_gets_the_first_answer_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    atlas, since = project(), from_now("wf")
    body = {"project": atlas, "variables": {"wip_limit": 2}}
    key = {"Idempotency-Key": unique("tpl-1")}
    first = await instantiate(client, "agile_kanban", key, **body)
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    # Meanwhile the sprint completes its planning and the limit is removed: a replay
    # restores neither.
    [sprint] = await sprints_of(client, atlas)
    await client.post(f"/v1/sprints/{sprint['id']}/transitions", json={"to": "active"})
    assert (await client.delete(f"/v1/projects/{atlas}/wip-limits/in_progress")).status_code == 204

    again = await instantiate(client, "agile_kanban", key, **body)
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["Location"] == first.headers["Location"]
    assert len(await made_since(client, "/v1/workflows", since)) == 1
    assert len(await sprints_of(client, atlas)) == 1
    assert (await client.get(f"/v1/projects/{atlas}/wip-limits")).json() == []

    other = await instantiate(client, "kanban", key, **body)  # the key names one request
    assert_problem(other, 409, "idempotency_key_reused")


async def test_activation_uses_the_definitions_project_and_its_wip_defaults(
    client: httpx.AsyncClient,
) -> None:
    atlas, orion = project(), project()
    workflow = await made(client, "kanban", project=atlas, variables={"wip_limit": 2})
    activated = await client.post(f"/v1/workflow-executions/activate/{workflow['id']}")
    assert activated.status_code == 201, activated.text
    task_ids = list(activated.json()["node_tasks"].values())
    assert len(task_ids) == 3
    for task_id in task_ids:
        assert (await client.get(f"/v1/tasks/{task_id}")).json()["project"] == atlas

    # Into another project: its columns with no limit get the definition's; a set one stays.
    await limit(client, orion, "review", 5, "advisory")
    elsewhere = await client.post(
        f"/v1/workflow-executions/activate/{workflow['id']}", json={"project": orion}
    )
    assert elsewhere.status_code == 201, elsewhere.text
    task_id = next(iter(elsewhere.json()["node_tasks"].values()))
    assert (await client.get(f"/v1/tasks/{task_id}")).json()["project"] == orion
    found = await board(client, orion)
    assert column(found, "in_progress")["wip_limit"] == {"limit": 2, "mode": "strict"}
    assert column(found, "review")["wip_limit"] == {"limit": 5, "mode": "advisory"}


async def test_a_board_kind_written_by_hand_sets_limits_on_activation_and_others_do_not(
    client: httpx.AsyncClient,
) -> None:
    atlas = project()
    template = (await client.get("/v1/workflow-templates/sequential")).json()
    definition = template["definition"] | {
        "board": {"wip_limits": [{"column": "ready", "limit": 4}]},
        "project": atlas,
    }
    sequential = await client.post("/v1/workflows", json=definition)
    assert sequential.status_code == 201, sequential.text
    activated = await client.post(f"/v1/workflow-executions/activate/{sequential.json()['id']}")
    assert activated.status_code == 201, activated.text
    assert (await client.get(f"/v1/projects/{atlas}/wip-limits")).json() == []

    kanban = await client.post("/v1/workflows", json=definition | {"kind": "kanban"})
    activated = await client.post(f"/v1/workflow-executions/activate/{kanban.json()['id']}")
    assert activated.status_code == 201, activated.text
    limits = (await client.get(f"/v1/projects/{atlas}/wip-limits")).json()
    assert [(w["column"], w["limit"], w["mode"]) for w in limits] == [("ready", 4, "strict")]
