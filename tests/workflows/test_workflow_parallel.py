"""Parallel workflows through real HTTP and real agent runs: a 20-branch execution held to
`max_parallel_tasks`, exclusive resources across executions, a failed branch with and
without `fail_fast`, and the progress an execution and its events report.

Who overlapped whom is read from the tasks' recorded transitions (a task works from its
run's dispatch until it leaves `in_progress`) and from the runs' own start and finish."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import httpx

from tests.runs.test_runs_api import make_agent
from tests.workflows.test_workflow_executions_api import (
    activate,
    follow,
    settled,
    stream_events,
    until,
)
from tests.workflows.test_workflows_api import create as create_workflow

BUSY = {"text": "done", "latency_ms": 150}  # a model turn that keeps its run working a while
SLOW = {"text": "too late", "latency_ms": 20_000}
BROKEN = {"text": "never", "fault": {"status": 400, "message": "bad request"}}


async def agent(client: httpx.AsyncClient, name: str, turn: dict[str, Any]) -> str:
    model = {"provider": "scripted", "name": "s", "script": [turn]}
    return await make_agent(client, {"name": name, "model": model, "max_concurrent_tasks": 100})


def fan_out(branches: dict[str, dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """start -> each branch (a task node with this config) -> end."""
    nodes: list[dict[str, Any]] = [{"id": "s", "type": "start"}, {"id": "e", "type": "end"}]
    edges = []
    for node_id, config in branches.items():
        nodes.append({"id": node_id, "type": "task", "config": {"max_retries": 0, **config}})
        edges += [
            {"id": f"in-{node_id}", "source": "s", "target": node_id},
            {"id": f"out-{node_id}", "source": node_id, "target": "e"},
        ]
    return {"name": "Fan out", "nodes": nodes, "edges": edges, **fields}


async def tasks_of(client: httpx.AsyncClient, project: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"project": project, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/tasks", params=params)).json()
        found += page["items"]
        if not (cursor := page["next_cursor"]):
            return found


async def all_in(client: httpx.AsyncClient, project: str, status: str, count: int) -> None:
    """Until `count` tasks of the project are in `status`, woken by the tasks stream."""

    async def read() -> dict[str, Any]:
        return {"tasks": await tasks_of(client, project)}

    def check(current: dict[str, Any]) -> bool:
        return len([t for t in current["tasks"] if t["status"] == status]) == count

    await follow(client, "/v1/tasks/events", read, check)


async def approve_reviews(client: httpx.AsyncClient, task_ids: Iterable[str]) -> None:
    """Approve each task's review once the review gate has asked for it."""
    wanted = set(task_ids)

    async def read() -> dict[str, Any]:
        params: dict[str, str | int] = {"status": "pending", "kind": "task_review", "limit": 200}
        items = (await client.get("/v1/approvals", params=params)).json()["items"]
        return {"reviews": [a for a in items if a["task_id"] in wanted]}

    reviews = await follow(
        client, "/v1/approvals/events", read, lambda c: len(c["reviews"]) == len(wanted)
    )
    for review in reviews["reviews"]:
        approved = await client.post(f"/v1/approvals/{review['id']}/approve", json={})
        assert approved.status_code == 200, approved.text


Interval = tuple[datetime, datetime]


async def working_intervals(client: httpx.AsyncClient, task_id: str) -> list[Interval]:
    """When the task was `in_progress`, from its recorded transitions."""
    moves = (await client.get(f"/v1/tasks/{task_id}/transitions")).json()
    intervals, entered = [], None
    for move in moves:
        at = datetime.fromisoformat(move["at"])
        if move["to_status"] == "in_progress":
            entered = at
        elif move["from_status"] == "in_progress" and entered is not None:
            intervals.append((entered, at))
            entered = None
    assert entered is None, f"{task_id} is still in progress"
    return intervals


async def run_intervals(client: httpx.AsyncClient, task_id: str) -> list[Interval]:
    """When the task's runs worked, from their own start and finish."""
    runs = (await client.get("/v1/runs", params={"lane": f"task:{task_id}"})).json()["items"]
    return [
        (datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["finished_at"]))
        for r in runs
        if r["started_at"] is not None
    ]


def most_at_once(intervals: Sequence[Interval]) -> int:
    """The most intervals open at one instant (one that ends as another starts: not both)."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, step in edges:  # at one instant, an end (-1) sorts before a start (+1)
        now += step
        most = max(most, now)
    return most


async def test_twenty_branches_never_run_more_than_three_at_once(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "worker", BUSY)
    branches = {f"b{i:02}": {"title": f"Branch {i}", "assigned_to": "worker"} for i in range(20)}
    workflow = await create_workflow(client, fan_out(branches, max_parallel_tasks=3))
    assert workflow["max_parallel_tasks"] == 3 and workflow["fail_fast"] is False
    execution = await activate(client, workflow["id"], project="fan")
    assert execution["max_parallel_tasks"] == 3
    assert execution["progress"] == {"done": 0, "total": 20, "running": 0, "failed": 0}

    await all_in(client, "fan", "in_review", 20)  # every branch ran; each waits for review
    ids = list(execution["node_tasks"].values())
    tasks_worked = [i for task_id in ids for i in await working_intervals(client, task_id)]
    runs_worked = [i for task_id in ids for i in await run_intervals(client, task_id)]
    assert len(tasks_worked) == len(runs_worked) == 20
    assert most_at_once(tasks_worked) == 3  # three at once, never a fourth
    assert most_at_once(runs_worked) <= 3
    current = await until(client, execution["id"], lambda e: e["progress"]["running"] == 20)
    assert current["progress"] == {"done": 0, "total": 20, "running": 20, "failed": 0}

    await approve_reviews(client, ids[:5])
    current = await until(client, execution["id"], lambda e: e["progress"]["done"] == 5)
    assert current["status"] == "running"
    await approve_reviews(client, ids[5:])
    done = await settled(client, execution["id"], "completed")
    assert done["progress"] == {"done": 20, "total": 20, "running": 0, "failed": 0}

    events = await stream_events(client, execution["id"])
    node_changes = [m.data["progress"] for m in events if m.event == "workflow.node.changed"]
    assert node_changes[-1] == done["progress"]
    assert [p["done"] for p in node_changes] == sorted(p["done"] for p in node_changes)
    assert events[-1].data["execution"]["progress"]["done"] == 20


async def test_an_activation_may_set_its_own_limit(client: httpx.AsyncClient) -> None:
    await agent(client, "worker", BUSY)
    branches = {f"b{i}": {"title": f"Branch {i}", "assigned_to": "worker"} for i in range(4)}
    workflow = await create_workflow(client, fan_out(branches))
    assert workflow["max_parallel_tasks"] is None
    execution = await activate(client, workflow["id"], project="one", max_parallel_tasks=1)
    assert execution["max_parallel_tasks"] == 1
    await all_in(client, "one", "in_review", 4)
    ids = execution["node_tasks"].values()
    assert most_at_once([i for t in ids for i in await working_intervals(client, t)]) == 1
    cleared = await client.patch(
        f"/v1/workflows/{workflow['id']}", json={"max_parallel_tasks": 2, "version": 1}
    )
    assert cleared.status_code == 200 and cleared.json()["max_parallel_tasks"] == 2
    unlimited = await client.patch(
        f"/v1/workflows/{workflow['id']}", json={"max_parallel_tasks": None, "version": 2}
    )
    assert unlimited.status_code == 200 and unlimited.json()["max_parallel_tasks"] is None


async def test_tasks_sharing_a_resource_never_overlap_even_across_executions(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "worker", BUSY)
    branches = {
        f"db{i}": {"title": f"Migrate {i}", "assigned_to": "worker", "resources": ["db"]}
        for i in range(3)
    } | {f"free{i}": {"title": f"Free {i}", "assigned_to": "worker"} for i in range(3)}
    workflow = await create_workflow(client, fan_out(branches))
    first = await activate(client, workflow["id"], project="res")
    second = await activate(client, workflow["id"], project="res")
    task = (await client.get(f"/v1/tasks/{first['node_tasks']['db0']}")).json()
    assert task["resources"] == ["db"]

    await all_in(client, "res", "in_review", 12)
    db_tasks = [e["node_tasks"][f"db{i}"] for e in (first, second) for i in range(3)]
    free_tasks = [e["node_tasks"][f"free{i}"] for e in (first, second) for i in range(3)]
    on_db = [i for t in db_tasks for i in await working_intervals(client, t)]
    assert len(on_db) == 6 and most_at_once(on_db) == 1
    assert most_at_once([i for t in db_tasks for i in await run_intervals(client, t)]) == 1
    free = [i for t in free_tasks for i in await working_intervals(client, t)]
    assert most_at_once(free) > 1  # the others are not held back


async def test_without_fail_fast_a_failed_branch_waits_for_its_siblings(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "worker", BUSY)
    await agent(client, "broken", BROKEN)
    branches = {
        "bad": {"title": "Breaks", "assigned_to": "broken"},
        "ok1": {"title": "Works 1", "assigned_to": "worker"},
        "ok2": {"title": "Works 2", "assigned_to": "worker"},
    }
    workflow = await create_workflow(client, fan_out(branches, max_parallel_tasks=2))
    execution = await activate(client, workflow["id"], project="iso")

    # The failure does not stop the siblings: both run (one after the failure freed room).
    await all_in(client, "iso", "in_review", 2)
    current = await until(client, execution["id"], lambda e: e["progress"]["failed"] == 1)
    assert current["status"] == "running"
    assert current["node_status"] | {"s": "", "e": ""} == {
        "s": "",
        "e": "",
        "bad": "failed",
        "ok1": "running",
        "ok2": "running",
    }
    await approve_reviews(client, [execution["node_tasks"]["ok1"], execution["node_tasks"]["ok2"]])
    failed = await settled(client, execution["id"], "failed")
    assert failed["progress"] == {"done": 2, "total": 3, "running": 0, "failed": 1}
    assert (failed["node_status"]["ok1"], failed["node_status"]["ok2"]) == ("completed",) * 2
    assert "bad" in failed["reason"]


async def test_with_fail_fast_a_failed_branch_cancels_its_siblings(
    client: httpx.AsyncClient,
) -> None:
    await agent(client, "slow", SLOW)
    await agent(client, "broken", BROKEN)
    branches = {
        "slow1": {"title": "Slow 1", "assigned_to": "slow"},
        "slow2": {"title": "Slow 2", "assigned_to": "slow"},
        "bad": {"title": "Breaks", "assigned_to": "broken"},
    }
    workflow = await create_workflow(client, fan_out(branches, fail_fast=True))
    execution = await activate(client, workflow["id"], project="ff")
    assert execution["fail_fast"] is True

    failed = await settled(client, execution["id"], "failed")
    assert failed["node_status"]["bad"] == "failed"
    assert (failed["node_status"]["slow1"], failed["node_status"]["slow2"]) == ("cancelled",) * 2
    await all_in(client, "ff", "cancelled", 2)  # their tasks too, through the TaskEngine
    for node in ("slow1", "slow2"):
        task_id = execution["node_tasks"][node]
        runs = (await client.get("/v1/runs", params={"lane": f"task:{task_id}"})).json()
        for run in runs["items"]:
            waited = await client.get(f"/v1/runs/{run['id']}/wait", params={"timeout_s": 10})
            assert waited.json()["status"] == "cancelled"
