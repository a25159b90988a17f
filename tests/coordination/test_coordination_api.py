"""Coordinations through the real service: `POST /v1/tasks/{id}/coordinate` with a
client's DAG or a scripted decomposer, in each topology; waves and their concurrency;
`fail_fast`; reviews by a person or accepted by the coordinator; the refusals; and the
coordination's event stream.

Routing chooses from every agent of the (shared) server: a test's agents make a `Crew`,
their names its own and a skill only they have, which each of its subtasks requires."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.approvals.test_approvals_api import requested
from tests.support.api import assert_problem
from tests.support.factories import (
    create_task,
    create_workflow,
    make_agent,
    project,
    settle,
    start_run,
    unique,
)
from tests.support.sse import SseReader

TIMEOUT_S = 30


class Crew:
    """A test's own agents: each name given the crew's suffix, and each agent the crew's
    skill, which the crew's subtasks require: routing then picks only among them."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.skill = unique("crew")

    def name(self, name: str) -> str:
        """The crew's agent called `name` (its name on the server)."""
        return f"{name}-{self.skill}"

    async def agent(self, name: str, *turns: Any, **fields: Any) -> str:
        """A scripted agent of the crew (`<name> did it` when no turn is given); its id."""
        made = await make_agent(
            self.client,
            *(turns or [{"text": f"{name} did it"}]),
            name=self.name(name),
            skills=[self.skill],
            **fields,
        )
        return str(made["id"])

    def subtask(self, title: str, *depends_on: int | str, **fields: Any) -> dict[str, Any]:
        """A subtask only the crew's agents can take."""
        return subtask(title, *depends_on, required_skills=[self.skill], **fields)


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


async def quarterly_report(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """A parallel parent and its coordination just started: two researchers for wave 0
    (revenue, costs), a summary of both in wave 1, and the lead's synthesis."""
    crew = Crew(client)
    await crew.agent("ann", role="researcher")
    await crew.agent("bob", role="researcher")
    await crew.agent("lead", {"text": "the synthesis"}, role="lead")
    parent = await create_task(
        client,
        title="Quarterly report",
        task_structure="parallel",
        acceptance_criteria=["covers revenue and costs"],
    )
    decomposition = {
        "subtasks": [
            crew.subtask("Revenue", role="researcher", key="revenue"),
            crew.subtask("Costs", role="researcher"),
            crew.subtask("Summary", "revenue", 1, role="researcher"),
        ]
    }
    made = await coordinate(
        client,
        parent["id"],
        decomposition=decomposition,
        options={"orchestrator": crew.name("lead"), "auto_accept": True},
    )
    return parent, made


async def test_a_centralized_coordination_runs_its_waves_then_synthesises(
    client: httpx.AsyncClient,
) -> None:
    parent, made = await quarterly_report(client)
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
    # Dispatch lasted as long as its subtasks' work and the synthesis: all of it but a
    # few quick passes.
    durations = {r["phase"]: r["duration_ms"] for r in done["phase_results"]}
    total = datetime.fromisoformat(done["updated_at"]) - datetime.fromisoformat(done["created_at"])
    assert durations["dispatch"] >= max(durations.values())
    assert sum(durations.values()) <= total.total_seconds() * 1000 + 1
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
    crew = Crew(client)
    await crew.agent("ann")
    parent = await create_task(client, title="Fix the bug")
    made = await coordinate(
        client, parent["id"], decomposition={"subtasks": [crew.subtask("Reproduce")]}
    )
    child = f"task_{made['id'].removeprefix('coord_')}_0"
    review = await requested(client, child)  # its review, once asked
    assert (await client.post(f"/v1/approvals/{review['id']}/approve", json={})).status_code == 200
    done = await settled(client, made["id"])
    assert (done["status"], done["topology"]) == ("completed", "sas")
    assert (await task(client, parent["id"]))["status"] == "in_review"
    assert done["runs"] == []  # sas: the backbone's work is the result, no synthesis


async def test_refusals_name_the_field_and_leave_nothing(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    await crew.agent("ann")
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
            f"/v1/tasks/{parent['id']}/coordinate",
            json={"options": {"decomposer": unique("nobody")}},
        ),
        422,
        "validation_error",
    )
    assert_problem(
        await client.post(
            "/v1/tasks/task_none/coordinate", json={"options": {"decomposer": crew.name("ann")}}
        ),
        404,
        "not_found",
    )
    assigned = await create_task(client, title="Mine", assigned_to=crew.name("bob"))
    assert_problem(
        await client.post(
            f"/v1/tasks/{assigned['id']}/coordinate",
            json={"options": {"decomposer": crew.name("ann")}},
        ),
        409,
        "invalid_transition",
    )
    assert (await client.get(f"/v1/tasks/{parent['id']}/coordinations")).json() == []
    assert_problem(await client.get("/v1/coordinations/coord_none"), 404, "not_found")


async def transitions(client: httpx.AsyncClient, task_id: str) -> dict[str, str]:
    """When the task first reached each status."""
    trail = (await client.get(f"/v1/tasks/{task_id}/transitions")).json()
    found: dict[str, str] = {}
    for step in trail:
        found.setdefault(step["to_status"], step["at"])
    return found


async def test_decentralized_peers_revise_on_the_shared_thread_then_a_synthesis(
    client: httpx.AsyncClient,
) -> None:
    crew = Crew(client)
    await crew.agent("ann", {"text": "ann's view"})
    await crew.agent("bob", {"text": "bob's view"})
    await crew.agent("lead", {"text": "joined"})
    parent = await create_task(client, title="Pick a database")
    made = await coordinate(
        client,
        parent["id"],
        decomposition={"subtasks": [crew.subtask("Postgres case"), crew.subtask("MySQL case")]},
        options={
            "topology": "decentralized",
            "orchestrator": crew.name("lead"),
            "debate_rounds": 2,
            "auto_accept": True,
        },
    )
    done = await settled(client, made["id"])
    assert (done["status"], done["topology"]) == ("completed", "decentralized")
    purposes = [(r["purpose"], r["round"], r["index"]) for r in done["runs"]]
    assert purposes == [
        ("peer", 1, 0),
        ("peer", 1, 1),
        ("peer", 2, 0),
        ("peer", 2, 1),
        ("synthesis", None, None),
    ]
    peers = {(r["round"], r["index"]): await run(client, r["run_id"]) for r in done["runs"][:4]}
    # Each peer sees the other's result, continues its own subtask's conversation, on its
    # subtask's lane.
    first = peers[(1, 0)]
    assert "bob's view" in first["input"] and "round 1 of 2" in first["input"]
    child = done["subtasks"][0]["task_id"]
    [own_run, *_] = await lane_runs(client, child)
    assert first["lane"] == f"task:{child}"
    assert first["conversation_id"] in {
        r["conversation_id"] for r in await lane_runs(client, child)
    }
    assert own_run["status"] == "completed"
    synthesis = await run(client, done["runs"][-1]["run_id"])
    assert "Postgres case" in synthesis["input"] and "MySQL case" in synthesis["input"]
    assert (await task(client, parent["id"]))["status"] == "completed"


async def test_context_dependent_runs_the_backbone_on_one_agent_and_fans_out_between(
    client: httpx.AsyncClient,
) -> None:
    crew = Crew(client)
    for name in ("ann", "bob", "cid"):
        await crew.agent(name)
    parent = await create_task(client, title="Ship the feature", task_structure="mixed")
    made = await coordinate(
        client,
        parent["id"],
        decomposition={
            "subtasks": [
                crew.subtask("Design"),
                crew.subtask("Backend", 0),
                crew.subtask("Frontend", 0),
                crew.subtask("Test", 1, 2),
            ]
        },
        options={"auto_accept": True},
    )
    done = await settled(client, made["id"])
    assert (done["status"], done["topology"]) == ("completed", "context_dependent")
    assert done["wave_topologies"] == ["sas", "centralized", "sas"]
    backbone = done["orchestrator_agent_id"]
    agents = [s["agent_id"] for s in done["subtasks"]]
    assert agents[0] == agents[3] == backbone  # the sequential backbone: one agent
    assert agents[1] != agents[2]  # the wave that fans out spreads
    assert [r["purpose"] for r in done["runs"]] == ["synthesis"]  # one wave was centralized


async def test_a_scripted_decomposer_makes_the_dag(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    only_crew = {"required_skills": [crew.skill]}
    plan = {
        "subtasks": [
            {"key": "a", "title": "Outline", "acceptance_criteria": ["an outline"], **only_crew},
            {
                "title": "Draft",
                "acceptance_criteria": ["a draft"],
                "depends_on": ["a"],
                **only_crew,
            },
        ]
    }
    planner = await crew.agent(
        "planner",
        {"tool_calls": [{"name": "submit_decomposition", "input": plan}]},
        role="planner",
    )
    await crew.agent("writer", role="writer")
    parent = await create_task(client, title="Write the essay")
    made = await coordinate(
        client,
        parent["id"],
        options={
            "decomposer": crew.name("planner"),
            "orchestrator": crew.name("writer"),
            "auto_accept": True,
        },
    )
    done = await settled(client, made["id"])
    assert done["status"] == "completed", done
    assert done["phase_results"][0]["outcome"] == "ok"
    detail = done["phase_results"][0]["detail"]
    assert f"{crew.name('planner')} decomposed it into 2 subtasks" in detail
    assert [s["title"] for s in done["decomposition"]["subtasks"]] == ["Outline", "Draft"]
    costs = (await client.get("/v1/costs", params={"group_by": "agent"})).json()
    assert planner in str(costs)  # the decomposition's call


async def test_a_failing_decomposer_fails_the_coordination_and_leaves_the_parent(
    client: httpx.AsyncClient,
) -> None:
    crew = Crew(client)
    await crew.agent("planner", {"text": "I would rather not"}, {"text": "still no"})
    own = project()
    parent = await create_task(client, title="Write the essay", project=own)
    made = await coordinate(client, parent["id"], options={"decomposer": crew.name("planner")})
    done = await settled(client, made["id"])
    assert (done["status"], done["phase"]) == ("failed", "decompose")
    assert done["reason"].startswith("decomposition failed")
    assert (await task(client, parent["id"]))["status"] == "created"
    # No subtask was made: the parent is its project's only task (a child is in its).
    assert (await client.get("/v1/tasks", params={"project": own})).json()["items"] == [
        await task(client, parent["id"])
    ]


async def test_a_wave_runs_at_most_its_concurrency_at_once(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    for name in ("ann", "bob", "cid"):
        await crew.agent(name, {"text": "ok", "latency_ms": 300})
    three = {"subtasks": [crew.subtask("One"), crew.subtask("Two"), crew.subtask("Three")]}
    parent = await create_task(client, title="Three reviews", task_structure="parallel")
    made = await coordinate(
        client,
        parent["id"],
        decomposition=three,
        options={
            "max_concurrency_per_wave": 1,
            "auto_accept": True,
            "orchestrator": crew.name("ann"),
        },
    )
    done = await settled(client, made["id"])
    assert done["status"] == "completed"
    trails = [await transitions(client, s["task_id"]) for s in done["subtasks"]]
    assert len({s["agent_id"] for s in done["subtasks"]}) == 3  # three agents were free
    for before, after in itertools.pairwise(trails):
        assert after["assigned"] >= before["completed"]  # never two at once

    parent = await create_task(client, title="Three more", task_structure="parallel")
    made = await coordinate(
        client,
        parent["id"],
        decomposition=three,
        options={"auto_accept": True, "orchestrator": crew.name("ann")},
    )
    done = await settled(client, made["id"])
    trails = [await transitions(client, s["task_id"]) for s in done["subtasks"]]
    assert max(t["assigned"] for t in trails) < min(t["completed"] for t in trails)


# A 400 that is no context overflow: the model refuses the request, and no retry helps.
REFUSED = {
    "text": "never said",
    "fault": {"kind": "http", "status": 400, "message": "bad request", "times": 100},
}


async def failing_subtask(client: httpx.AsyncClient, **options: Any) -> dict[str, Any]:
    """A fails at once (its run fails; no retry left), C depends on it, B is slow."""
    crew = Crew(client)
    await crew.agent("broken", REFUSED, role="broken")
    await crew.agent("quick", {"text": "ok"}, role="quick")
    await crew.agent("slow", {"text": "ok", "latency_ms": 1500}, role="slow")
    parent = await create_task(client, title="Migrate", max_retries=0, task_structure="parallel")
    return await coordinate(
        client,
        parent["id"],
        decomposition={
            "subtasks": [
                crew.subtask("A", role="broken"),
                crew.subtask("B", role="slow"),
                crew.subtask("C", 0, role="quick"),
            ]
        },
        options={"orchestrator": crew.name("quick"), **options},
    )


async def test_fail_fast_cancels_the_rest_and_fails_the_parent(client: httpx.AsyncClient) -> None:
    made = await failing_subtask(client, fail_fast=True)
    done = await settled(client, made["id"])
    assert (done["status"], done["outcome"]) == ("failed", "failed")
    assert "fail_fast" in done["reason"]
    statuses = [(await task(client, s["task_id"]))["status"] for s in done["subtasks"]]
    assert statuses == ["failed", "cancelled", "cancelled"]
    assert (await task(client, done["parent_task_id"]))["status"] == "failed"


async def test_without_fail_fast_the_others_run_on(client: httpx.AsyncClient) -> None:
    made = await failing_subtask(client, auto_accept=False)
    b_task = f"task_{made['id'].removeprefix('coord_')}_1"
    review = await requested(client, b_task)  # its review, once asked
    assert (await client.post(f"/v1/approvals/{review['id']}/approve", json={})).status_code == 200
    done = await settled(client, made["id"])
    assert (done["status"], done["outcome"]) == ("failed", "failed")
    statuses = [(await task(client, s["task_id"]))["status"] for s in done["subtasks"]]
    assert statuses == ["failed", "completed", "cancelled"]  # C depended on A


async def test_cancelling_the_parent_calls_the_coordination_off(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    await crew.agent("slow", {"text": "ok", "latency_ms": 3000})
    parent = await create_task(client, title="Long job")
    made = await coordinate(
        client,
        parent["id"],
        decomposition={"subtasks": [crew.subtask("One"), crew.subtask("Two", 0)]},
    )
    child = f"task_{made['id'].removeprefix('coord_')}_0"
    for _ in range(TIMEOUT_S * 10):
        if (await task(client, child))["status"] == "in_progress":
            break
        await asyncio.sleep(0.1)
    assert (await client.post(f"/v1/tasks/{parent['id']}/cancel", json={})).status_code == 200
    done = await settled(client, made["id"])
    assert done["status"] == "cancelled" and "cancelled" in done["reason"]
    statuses = [(await task(client, s["task_id"]))["status"] for s in done["subtasks"]]
    assert statuses == ["cancelled", "cancelled"]
    [child_run] = await lane_runs(client, child)
    for _ in range(TIMEOUT_S * 10):  # the subtask's run is cancelled with its task
        if (await run(client, child_run["id"]))["status"] == "cancelled":
            break
        await asyncio.sleep(0.1)
    assert (await run(client, child_run["id"]))["status"] == "cancelled"


async def test_an_agent_coordinates_a_task_with_its_tool(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    await crew.agent("ann")
    await crew.agent("bob")
    parent = await create_task(client, title="Survey the market", task_structure="parallel")
    plan = {"subtasks": [crew.subtask("Europe"), crew.subtask("Asia")]}
    call = {
        "task_id": parent["id"],
        "decomposition": plan,
        "options": {"orchestrator": crew.name("ann")},
    }
    refused = {**call, "options": {"auto_accept": True}}
    lead = await crew.agent(
        "lead",
        {"tool_calls": [{"name": "coordinate_task", "input": refused}]},
        {"tool_calls": [{"name": "coordinate_task", "input": call}]},
        {"text": "started"},
        tools=["coordinate_task"],
        auto_approve=["coordinate_task"],
    )
    started = await start_run(client, lead, input="split it")
    done = await settle(client, started["id"])
    assert done["status"] == "completed", done
    conversation = started["conversation_id"]
    messages = (await client.get(f"/v1/conversations/{conversation}/messages")).json()
    results = [
        block
        for message in messages
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert results[0]["is_error"] and "auto_accept" in str(results[0]["content"])
    [made] = (await client.get(f"/v1/tasks/{parent['id']}/coordinations")).json()
    assert made["id"] in str(results[1]["content"]) and not results[1]["is_error"]
    assert made["request"]["options"]["auto_accept"] is False
    for _ in range(TIMEOUT_S * 10):  # its subtasks wait for their reviews: a person's
        children = [await task(client, s["task_id"]) for s in (await subtasks_of(client, made))]
        if children and all(c["status"] == "in_review" for c in children):
            break
        await asyncio.sleep(0.1)
    assert [c["status"] for c in children] == ["in_review", "in_review"]


async def subtasks_of(client: httpx.AsyncClient, made: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await client.get(f"/v1/coordinations/{made['id']}")).json()[
        "subtasks"
    ]
    return found


async def test_a_workflow_node_coordinates_its_task_once_its_dependencies_complete(
    client: httpx.AsyncClient,
) -> None:
    crew = Crew(client)
    await crew.agent("ann")
    await crew.agent("bob")
    coordination = {
        "decomposition": {"subtasks": [crew.subtask("Draft"), crew.subtask("Edit", 0)]},
        "options": {"auto_accept": True},
    }
    own = project()
    definition = {
        "project": own,
        "nodes": [
            {"id": "s", "type": "start"},
            {
                "id": "research",
                "type": "task",
                "config": {"title": "Research", "assigned_to": crew.name("ann")},
            },
            {
                "id": "report",
                "type": "task",
                "config": {"title": "Report", "coordination": coordination},
            },
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "research"},
            {"id": "e2", "source": "research", "target": "report"},
            {"id": "e3", "source": "report", "target": "e"},
        ],
    }
    created = await create_workflow(client, **definition)
    activated = await client.post(f"/v1/workflow-executions/activate/{created['id']}")
    execution = activated.json()
    listed = (await client.get("/v1/tasks", params={"project": own, "limit": 10})).json()
    tasks = {t["title"]: t for t in listed["items"]}
    report = tasks["Report"]
    assert report["status"] == "created" and report["coordination"]["options"]["auto_accept"]
    # Nothing is coordinated before the research is done; a person accepts it.
    assert (await client.get(f"/v1/tasks/{report['id']}/coordinations")).json() == []
    research = tasks["Research"]["id"]
    review = await requested(client, research)  # its review, once asked
    assert (await client.get(f"/v1/tasks/{report['id']}/coordinations")).json() == []
    assert (await client.post(f"/v1/approvals/{review['id']}/approve", json={})).status_code == 200
    for _ in range(TIMEOUT_S * 10):
        coordinations = (await client.get(f"/v1/tasks/{report['id']}/coordinations")).json()
        if coordinations:
            break
        await asyncio.sleep(0.1)
    [made] = coordinations
    done = await settled(client, made["id"])
    assert done["status"] == "completed"
    assert (await task(client, report["id"]))["status"] == "completed"
    for _ in range(TIMEOUT_S * 10):
        finished = (await client.get(f"/v1/workflow-executions/{execution['id']}")).json()
        if finished["status"] != "running":
            break
        await asyncio.sleep(0.1)
    assert finished["status"] == "completed"
    # Coordinated once: a settled coordination does not start another.
    assert len((await client.get(f"/v1/tasks/{report['id']}/coordinations")).json()) == 1


async def test_a_tasks_coordination_is_checked_when_it_is_made(
    client: httpx.AsyncClient,
) -> None:
    own = project()
    cycle = {"decomposition": {"subtasks": [subtask("A", 1), subtask("B", 0)]}}
    problem = assert_problem(
        await client.post("/v1/tasks", json={"title": "T", "project": own, "coordination": cycle}),
        422,
        "validation_error",
    )
    assert [e["field"] for e in problem["errors"]] == [
        "body.coordination.decomposition.subtasks[1].depends_on[0]"
    ]
    assert_problem(
        await client.post(
            "/v1/tasks",
            json={
                "title": "T",
                "project": own,
                "assigned_to": unique("ann"),
                "coordination": {"options": {}},
            },
        ),
        422,
        "validation_error",
    )
    bad_node = {
        "name": unique("Bad"),
        "project": own,
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "t", "type": "task", "config": {"title": "T", "coordination": cycle}},
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "t"},
            {"id": "e2", "source": "t", "target": "e"},
        ],
    }
    problem = assert_problem(
        await client.post("/v1/workflows", json=bad_node), 422, "validation_error"
    )
    assert "config.coordination.decomposition.subtasks[1].depends_on[0]" in str(problem)
    assert (await client.get("/v1/tasks", params={"project": own})).json()["items"] == []


async def test_no_routable_subtask_fails_validation_and_cancels_the_subtasks(
    client: httpx.AsyncClient,
) -> None:
    crew = Crew(client)
    await crew.agent("ann", role="writer")
    parent = await create_task(client, title="Launch", task_structure="parallel")
    made = await coordinate(
        client,
        parent["id"],
        decomposition={
            "subtasks": [
                crew.subtask("Fly", role="astronaut"),
                crew.subtask("Land", role="astronaut"),
            ]
        },
    )
    done = await settled(client, made["id"])
    assert (done["status"], done["phase"]) == ("failed", "validate")
    assert "no agent is of role 'astronaut'" in done["reason"]
    statuses = [(await task(client, s["task_id"]))["status"] for s in done["subtasks"]]
    assert statuses == ["cancelled", "cancelled"]  # nothing half-made is left open
    assert (await task(client, parent["id"]))["status"] == "created"  # as it was


@pytest.mark.parametrize(
    ("topology", "waves", "runs"),
    [
        ("sas", ["sas", "sas"], []),
        ("centralized", ["centralized", "centralized"], ["synthesis"]),
        ("decentralized", ["decentralized", "decentralized"], ["peer"] * 3 + ["synthesis"]),
        ("context_dependent", ["centralized", "sas"], ["synthesis"]),
    ],
)
async def test_a_scripted_decomposers_dag_in_each_topology(
    client: httpx.AsyncClient, topology: str, waves: list[str], runs: list[str]
) -> None:
    crew = Crew(client)
    plan = {
        "subtasks": [
            crew.subtask("Sources"),
            crew.subtask("Figures"),
            crew.subtask("Write-up", 0, 1),
        ]
    }
    submit = {"tool_calls": [{"name": "submit_decomposition", "input": plan}]}
    await crew.agent("planner", submit)
    for name in ("ann", "bob"):
        await crew.agent(name)
    parent = await create_task(client, title="A study")
    made = await coordinate(
        client,
        parent["id"],
        options={"topology": topology, "decomposer": crew.name("planner"), "auto_accept": True},
    )
    done = await settled(client, made["id"])
    assert (done["status"], done["topology"]) == ("completed", topology)
    assert done["wave_topologies"] == waves
    assert [r["purpose"] for r in done["runs"]] == runs
    statuses = [(await task(client, s["task_id"]))["status"] for s in done["subtasks"]]
    assert statuses == ["completed"] * 3
    if topology == "sas":
        assert len({s["agent_id"] for s in done["subtasks"]}) == 1
    assert (await task(client, parent["id"]))["status"] == "completed"
