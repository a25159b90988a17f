"""An agent's loop kind through real HTTP: `react` by default, with plan_execute's (and
hybrid's) settings stored beside it, every kind accepted on create and on patch (the
published schema lists them), an unknown one refused (422). A react agent's run still
works."""

from __future__ import annotations

import httpx
import pytest

from tests.runs.test_runs_api import make_agent, scripted, settle, start
from tests.support.api import assert_problem

SCRIPT = {"provider": "scripted", "name": "s", "script": [{"text": "done"}]}


async def test_an_agent_runs_react_unless_it_says_otherwise(client: httpx.AsyncClient) -> None:
    agent_id = await make_agent(client, scripted({"text": "done"}))
    agent = (await client.get(f"/v1/agents/{agent_id}")).json()
    assert agent["execution_loop"] == "react"
    assert agent["plan_execute"] == {
        "planner_model": None,
        "executor_model": None,
        "max_replans": 3,
        "max_turns_per_step": 5,
        "allow_replan_on_completion": False,
    }
    run = await settle(client, (await start(client, agent_id=agent_id))["id"])
    assert run["status"] == "completed" and run["result"] == "done"


async def test_plan_execute_settings_are_stored(client: httpx.AsyncClient) -> None:
    settings = {
        "planner_model": "big",
        "executor_model": "small",
        "max_replans": 1,
        "max_turns_per_step": 2,
        "allow_replan_on_completion": True,
    }
    made = await client.post(
        "/v1/agents",
        json={"name": "p", "model": SCRIPT, "execution_loop": "react", "plan_execute": settings},
    )
    assert made.status_code == 201, made.text
    assert made.json()["plan_execute"] == settings
    too_many = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "plan_execute": {"max_replans": 99}}
    )
    assert_problem(too_many, 422, "validation_error")
    no_turns = await client.post(
        "/v1/agents",
        json={"name": "p", "model": SCRIPT, "plan_execute": {"max_turns_per_step": 0}},
    )
    assert_problem(no_turns, 422, "validation_error")


@pytest.mark.parametrize("kind", ["plan_execute", "hybrid", "auto"])
async def test_every_loop_kind_is_accepted_and_published(
    client: httpx.AsyncClient, kind: str
) -> None:
    made = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "execution_loop": kind}
    )
    assert made.status_code == 201, made.text
    assert made.json()["execution_loop"] == kind
    agent_id = await make_agent(client, {"name": "q", "model": SCRIPT})
    patched = await client.patch(f"/v1/agents/{agent_id}", json={"execution_loop": kind})
    assert patched.status_code == 200, patched.text
    assert patched.json()["execution_loop"] == kind
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    assert kind in schemas["ExecutionLoopKind"]["enum"]
    for body in ("AgentCreate", "AgentPatch"):  # a valid body is accepted
        field = schemas[body]["properties"]["execution_loop"]
        assert field["$ref"] == "#/components/schemas/ExecutionLoopKind", field


async def test_an_unknown_loop_kind_is_refused(client: httpx.AsyncClient) -> None:
    unknown = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "execution_loop": "tree_of_thought"}
    )
    problem = assert_problem(unknown, 422, "validation_error")
    assert problem["errors"][0]["field"] == "execution_loop"
