"""Coordinations through the real service: `POST /v1/tasks/{id}/coordinate` with a
client's DAG or a scripted decomposer, in each topology; waves and their concurrency;
`fail_fast`; reviews by a person or accepted by the coordinator; the refusals; and the
coordination's event stream."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.api.test_runs_api import make_agent
from tests.support.api import assert_problem, create_task
from tests.support.sse import SseReader

TIMEOUT_S = 30


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "name": "s", "script": list(turns)}


async def agent(client: httpx.AsyncClient, name: str, *turns: Any, **fields: Any) -> str:
    script = scripted(*(turns or [{"text": f"{name} did it"}]))
    return await make_agent(client, {"name": name, "model": script, **fields})


def subtask(title: str, *depends_on: int | str, **fields: Any) -> dict[str, Any]:
    return {
        "title": title,
        "acceptance_criteria": [f"{title} is done"],
        "depends_on": list(depends_on),
        **fields,
    }


async def coordinate(client: httpx.AsyncClient, task_id: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/tasks/{task_id}/coordinate", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["Location"].endswith(f"/v1/coordinations/{response.json()['id']}")
    made: dict[str, Any] = response.json()
    return made


async def settled(client: httpx.AsyncClient, coordination_id: str) -> dict[str, Any]:
    """The coordination once it settles, read from its event stream."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream(
            "GET", f"/v1/coordinations/{coordination_id}/events", params={"last_event_id": 0}
        ) as stream,
    ):
        reader = SseReader(stream)
        while True:
            [message] = await reader.take(1)
            if str(message.event) in {
                "coordination.completed",
                "coordination.failed",
                "coordination.cancelled",
            }:
                break
    body: dict[str, Any] = (await client.get(f"/v1/coordinations/{coordination_id}")).json()
    return body


async def events(client: httpx.AsyncClient, coordination_id: str) -> list[tuple[str, Any]]:
    """Every event of a settled coordination's stream, each checked against the docs."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream(
            "GET", f"/v1/coordinations/{coordination_id}/events", params={"last_event_id": 0}
        ) as stream,
    ):
        reader = SseReader(stream)
        found: list[tuple[str, Any]] = []
        while not found or not found[-1][0].startswith(
            ("coordination.completed", "coordination.failed", "coordination.cancelled")
        ):
            [message] = await reader.take(1)
            found.append((str(message.event), message.data))
    return found


async def task(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/v1/tasks/{task_id}")).json()
    return body


async def run(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}")).json()
    return body


async def lane_runs(client: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/runs", params={"lane": f"task:{task_id}", "limit": 100})
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_centralized_coordination_runs_its_waves_then_synthesises(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "ann", role="researcher")
    await agent(client, "bob", role="researcher")
    await agent(client, "lead", {"text": "the synthesis"}, role="lead")
    parent = await create_task(
        client,
        title="Quarterly report",
        task_structure="parallel",
        acceptance_criteria=["covers revenue and costs"],
    )
    decomposition = {
        "subtasks": [
            subtask("Revenue", role="researcher", key="revenue"),
            subtask("Costs", role="researcher"),
            subtask("Summary", "revenue", 1, role="researcher"),
        ]
    }
    made = await coordinate(
        client,
        parent["id"],
        decomposition=decomposition,
        options={"orchestrator": "lead", "auto_accept": True},
    )
    assert (made["status"], made["phase"]) == ("running", "decompose")

    done = await settled(client, made["id"])
    assert (done["status"], done["outcome"], done["topology"]) == (
        "completed",
        "completed",
        "centralized",
    )
    assert [r["phase"] for r in done["phase_results"]] == [
        "decompose",
        "route",
        "topology",
        "validate",
        "dispatch",
        "roll_up",
        "update_parent",
    ]
    assert done["phase_results"][0]["outcome"] == "skipped"  # the client gave the DAG
    assert [s["wave"] for s in done["subtasks"]] == [0, 0, 1]
    # The first wave spread over the two researchers; the orchestrator took none.
    agents = {s["agent_id"] for s in done["subtasks"][:2]}
    assert len(agents) == 2 and done["orchestrator_agent_id"] not in agents

    children = [await task(client, s["task_id"]) for s in done["subtasks"]]
    assert [c["status"] for c in children] == ["completed"] * 3
    assert all(c["parent_task_id"] == parent["id"] for c in children)
    assert children[2]["dependencies"] == [children[0]["id"], children[1]["id"]]
    # The summary's run was given what the subtasks it builds on answered.
    [summary_run] = await lane_runs(client, children[2]["id"])
    assert "Revenue" in summary_run["input"] and "did it" in summary_run["input"]

    [synthesis] = done["runs"]
    assert synthesis["purpose"] == "synthesis"
    synthesised = await run(client, synthesis["run_id"])
    assert (synthesised["status"], synthesised["lane"]) == ("completed", f"task:{parent['id']}")
    assert "Revenue" in synthesised["input"] and "covers revenue and costs" in synthesised["input"]
    finished = await task(client, parent["id"])
    assert finished["status"] == "completed"

    kinds = [kind for kind, _ in await events(client, made["id"])]
    assert kinds[0] == "coordination.started" and kinds[-1] == "coordination.completed"
    assert kinds.count("coordination.phase.completed") == 7
    assert kinds.count("coordination.subtask.started") == 3
    assert kinds.count("coordination.run.created") == 1


async def test_the_parent_waits_for_a_persons_review_without_auto_accept(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "ann")
    parent = await create_task(client, title="Fix the bug")
    made = await coordinate(
        client, parent["id"], decomposition={"subtasks": [subtask("Reproduce")]}
    )
    child = f"task_{made['id'].removeprefix('coord_')}_0"
    for _ in range(TIMEOUT_S * 10):
        if (await task(client, child))["status"] == "in_review":
            break
        await asyncio.sleep(0.1)
    approvals = (await client.get("/v1/approvals", params={"task_id": child})).json()["items"]
    [review] = [a for a in approvals if a["status"] == "pending"]
    assert (await client.post(f"/v1/approvals/{review['id']}/approve", json={})).status_code == 200
    done = await settled(client, made["id"])
    assert (done["status"], done["topology"]) == ("completed", "sas")
    assert (await task(client, parent["id"]))["status"] == "in_review"
    assert done["runs"] == []  # sas: the backbone's work is the result, no synthesis


async def test_refusals_name_the_field_and_leave_nothing(client: httpx.AsyncClient) -> None:
    await agent(client, "ann")
    parent = await create_task(client, title="Plan")
    cycle = {"subtasks": [subtask("A", 1), subtask("B", 0)]}
    problem = assert_problem(
        await client.post(f"/v1/tasks/{parent['id']}/coordinate", json={"decomposition": cycle}),
        422,
        "validation_error",
    )
    assert [e["field"] for e in problem["errors"]] == [
        "body.decomposition.subtasks[1].depends_on[0]"
    ]
    problem = assert_problem(
        await client.post(f"/v1/tasks/{parent['id']}/coordinate", json={}),
        422,
        "validation_error",
    )
    assert [e["field"] for e in problem["errors"]] == ["body.options.decomposer"]
    assert_problem(
        await client.post(
            f"/v1/tasks/{parent['id']}/coordinate", json={"options": {"decomposer": "nobody"}}
        ),
        422,
        "validation_error",
    )
    assert_problem(
        await client.post(
            "/v1/tasks/task_none/coordinate", json={"options": {"decomposer": "ann"}}
        ),
        404,
        "not_found",
    )
    assigned = await create_task(client, title="Mine", assigned_to="bob")
    assert_problem(
        await client.post(
            f"/v1/tasks/{assigned['id']}/coordinate", json={"options": {"decomposer": "ann"}}
        ),
        409,
        "invalid_transition",
    )
    assert (await client.get(f"/v1/tasks/{parent['id']}/coordinations")).json() == []
    assert_problem(await client.get("/v1/coordinations/coord_none"), 404, "not_found")
