"""The service gives its run workers the task tools over its own TaskEngine: a scripted
agent that lists `create_task` puts a task on the board that the tasks API then shows,
made by the run. It runs on the shared server: its task is found in a project of its own."""

from __future__ import annotations

import httpx

from tests.support.factories import unique


async def test_a_run_creates_a_task_that_the_tasks_api_shows(client: httpx.AsyncClient) -> None:
    project = unique("planning")
    follow_up = {"title": "Follow up", "priority": "low", "project": project}
    create = {"name": "create_task", "input": follow_up}
    agent = await client.post(
        "/v1/agents",
        json={
            "name": "planner",
            "tools": ["create_task"],
            "model": {
                "provider": "scripted",
                "name": "scripted",
                "script": [{"tool_calls": [create]}, {"text": "planned"}],
            },
        },
    )
    assert agent.status_code == 201, agent.text
    started = await client.post("/v1/runs", json={"agent_id": agent.json()["id"], "input": "go"})
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    waited = await client.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})
    assert waited.json()["status"] == "completed", waited.text

    [task] = (await client.get("/v1/tasks", params={"project": project})).json()["items"]
    assert (task["title"], task["priority"], task["status"]) == ("Follow up", "low", "created")
    assert task["created_by"] == f"run:{run_id}"
    trail = (await client.get(f"/v1/tasks/{task['id']}/transitions")).json()
    assert [(t["to_status"], t["actor"]) for t in trail] == [("created", f"run:{run_id}")]
