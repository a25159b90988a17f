"""An agent's loop kind through real HTTP: `react` by default, with plan_execute's
settings stored beside it, `plan_execute` accepted, and the kinds not built yet refused
(422) on create and on patch rather than stored as a knob that does nothing (the published
schema lists only the accepted kinds). A react agent's run still works."""

from __future__ import annotations

import httpx
import pytest

from tests.api.test_runs_api import make_agent, scripted, settle, start
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
    }
    run = await settle(client, (await start(client, agent_id=agent_id))["id"])
    assert run["status"] == "completed" and run["result"] == "done"


async def test_plan_execute_settings_are_stored(client: httpx.AsyncClient) -> None:
    settings = {"planner_model": "big", "executor_model": "small", "max_replans": 1}
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


async def test_plan_execute_is_accepted_and_published_alone_with_react(
    client: httpx.AsyncClient,
) -> None:
    made = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "execution_loop": "plan_execute"}
    )
    assert made.status_code == 201, made.text
    assert made.json()["execution_loop"] == "plan_execute"
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    for body in ("AgentCreate", "AgentPatch"):
        field = schemas[body]["properties"]["execution_loop"]
        assert field["enum"] == ["plan_execute", "react"], field  # a valid body is accepted


@pytest.mark.parametrize("kind", ["hybrid", "auto"])
async def test_a_loop_kind_not_built_yet_is_refused(client: httpx.AsyncClient, kind: str) -> None:
    made = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "execution_loop": kind}
    )
    problem = assert_problem(made, 422, "validation_error")
    assert problem["errors"][0]["field"] == "execution_loop"
    assert "not available yet" in problem["errors"][0]["message"]

    agent_id = await make_agent(client, {"name": "q", "model": SCRIPT})
    patched = await client.patch(f"/v1/agents/{agent_id}", json={"execution_loop": kind})
    assert_problem(patched, 422, "validation_error")
    unknown = await client.post(
        "/v1/agents", json={"name": "p", "model": SCRIPT, "execution_loop": "tree_of_thought"}
    )
    assert_problem(unknown, 422, "validation_error")
