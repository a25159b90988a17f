"""hybrid (and `auto`, which may choose it) through the real service: a scripted agent
whose script plays the planner's `submit_plan` call first, then the executor's turns. A
plan has 3 to 7 steps, a step at most `max_turns_per_step` turns, each completed step a
checkpoint (on the plan and as `plan.checkpoint`), and with `allow_replan_on_completion`
the planner reviews the plan once every step is done."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.runs.test_plan_execute_api import (
    ECHO,
    plan_events,
    planned,
    run_to_end,
    submit,
    transcript,
)
from tests.runs.test_runs_api import make_agent, settle


def hybrid(*turns: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return planned(*turns, **settings) | {"execution_loop": "hybrid"}


def moves(*steps: int) -> list[tuple[str, Any]]:
    """The events of steps that start, complete and checkpoint, in order."""
    return [
        (event, i)
        for i in steps
        for event in ("plan.step.started", "plan.step.completed", "plan.checkpoint")
    ]


async def test_a_plan_of_three_steps_checkpoints_after_each(client: httpx.AsyncClient) -> None:
    run = await run_to_end(
        client,
        hybrid(submit("find", "fetch", "report"), ECHO, *({"text": t} for t in "ABC")),
    )
    assert run["status"] == "completed", run
    assert run["execution_loop"]["kind"] == "hybrid"
    assert run["stop_reason"] == "end_turn" and run["result"] == "C"
    plan = (await client.get(f"/v1/runs/{run['id']}")).json()["plan"]
    assert [(s["status"], s["result"]) for s in plan["steps"]] == [
        ("completed", "A"),
        ("completed", "B"),
        ("completed", "C"),
    ]
    assert plan["current_step"] is None and plan["review"] is None
    assert [c["step"] for c in plan["checkpoints"]] == [0, 1, 2]
    assert plan["checkpoints"][-1]["summary"].splitlines() == [
        "3 of 3 steps done.",
        "Step 1 (find): A",
        "Step 2 (fetch): B",
        "Step 3 (report): C",
    ]
    assert await plan_events(client, run["id"]) == [("plan.created", None), *moves(0, 1, 2)]


async def test_a_step_out_of_turns_fails_and_is_replanned(client: httpx.AsyncClient) -> None:
    run = await run_to_end(
        client,
        hybrid(
            submit("find", "fetch", "report"),
            {"text": "found"},
            ECHO,
            ECHO,  # step 2's two turns, no answer
            submit("fetch from the mirror", "report"),  # with the step kept: 3 in all
            {"text": "fetched"},
            {"text": "reported"},
            max_turns_per_step=2,
        ),
    )
    assert run["status"] == "completed", run
    assert run["result"] == "reported"
    plan = run["plan"]
    assert [(s["goal"], s["status"]) for s in plan["steps"]] == [
        ("find", "completed"),
        ("fetch from the mirror", "completed"),
        ("report", "completed"),
    ]
    assert plan["replans"] == 1
    assert await plan_events(client, run["id"]) == [
        ("plan.created", None),
        *moves(0),
        ("plan.step.started", 1),
        ("plan.step.failed", 1),
        ("plan.replanned", None),
        *moves(1, 2),
    ]
    texts = await transcript(client, run)
    assert "You have 2 turns for it." in texts
    assert "used its 2 turns (max_turns_per_step)" in texts


async def test_a_plan_of_the_wrong_size_is_asked_for_again_then_fails(
    client: httpx.AsyncClient,
) -> None:
    run = await run_to_end(client, hybrid(submit("a", "b"), submit(*"abcdefgh")))
    assert run["status"] == "failed", run
    assert run["stop_reason"] == "plan_invalid" and run["plan"] is None
    assert "8 were submitted; submit 3 to 7" in run["error"]["message"]
    assert "2 were submitted; submit 3 to 7" in await transcript(client, run)


@pytest.mark.parametrize("more", [True, False])
async def test_on_completion_the_planner_may_add_steps(
    client: httpx.AsyncClient, more: bool
) -> None:
    review = submit("send") if more else {"text": "the task is complete"}
    sent = [{"text": "sent"}] if more else []
    run = await run_to_end(
        client,
        hybrid(
            submit(*"abc"),
            *({"text": t} for t in "ABC"),
            review,
            *sent,
            allow_replan_on_completion=True,
        ),
    )
    assert run["status"] == "completed", run
    assert run["result"] == ("sent" if more else "C")
    plan = run["plan"]
    assert plan["review"] == "answered" and plan["replans"] == int(more)
    assert [s["goal"] for s in plan["steps"]] == ["a", "b", "c", *(["send"] if more else [])]
    replanned = [("plan.replanned", None), *moves(3)] if more else []
    assert await plan_events(client, run["id"]) == [
        ("plan.created", None),
        *moves(0, 1, 2),
        *replanned,
    ]
    assert "Every step of the plan is done" in await transcript(client, run)


async def _task_run(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    for _ in range(100):
        runs = (await client.get("/v1/runs", params={"lane": f"task:{task_id}"})).json()
        if runs["items"]:
            return await settle(client, runs["items"][0]["id"])
        await asyncio.sleep(0.1)
    raise AssertionError("the task got no run")


@pytest.mark.parametrize(
    ("complexity", "kind"), [("complex", "hybrid"), ("medium", "plan_execute")]
)
async def test_auto_runs_a_task_by_its_complexity(
    client: httpx.AsyncClient, complexity: str, kind: str
) -> None:
    agent = planned(submit(*"abc"), *({"text": t} for t in "ABC")) | {"execution_loop": "auto"}
    agent_id = await make_agent(client, agent)
    body = {"title": "t", "estimated_complexity": complexity, "assigned_to": agent_id}
    task = await client.post("/v1/tasks", json=body)
    assert task.status_code == 201, task.text
    run = await _task_run(client, task.json()["id"])
    assert run["status"] == "completed" and run["result"] == "C", run
    assert run["execution_loop"] == {"kind": kind, "reason": f"auto: {complexity} → {kind}"}
    checkpoints = [c["step"] for c in run["plan"]["checkpoints"]]
    assert checkpoints == ([0, 1, 2] if kind == "hybrid" else [])
