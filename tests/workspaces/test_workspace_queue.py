"""The merge queue through the real service, on real git repositories: a conflict escalated
to the workspace's review agent, whose run resolves it in the worktree (or, failing twice,
hands it to a person); the `manual` and `priority` merge orders; a workspace with all its
worktrees in use holding a task back until one is merged; a cancelled task's worktree
abandoned, its directory removed and its branch kept with its work; and a directory left
behind by a process that stopped mid-cleanup removed at the next start."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.approvals.test_approvals_api import requested
from tests.runs.test_runs_api import make_agent
from tests.support.api import assert_problem
from tests.support.factories import create_task
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader
from tests.workspaces.conftest import make_repo, sh_git
from tests.workspaces.test_workspaces_api import (
    TIMEOUT_S,
    approve_review,
    first_parent_log,
    task_for,
    until_status,
    workspace,
    worktree_of,
    write,
    writer,
)

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

Worktree = dict[str, Any]


@pytest.fixture
def settings(database_url: str) -> Settings:
    """The merge queue's interval beyond every wait here: what these tests see happens on
    the wake-ups of the boards' events (approvals, tasks, runs), never on the interval."""
    return make_settings(database_url, workspaces={"merge_interval_s": 3_600})


async def until(
    client: httpx.AsyncClient, task_id: str, wanted: Callable[[Worktree], bool]
) -> Worktree:
    """The task's worktree once `wanted` holds for it (the queue works in the background)."""
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            page = (await client.get("/v1/worktrees", params={"task_id": task_id})).json()
            if page["items"] and wanted(page["items"][0]):
                return dict(page["items"][0])
            await asyncio.sleep(0.05)


async def history(client: httpx.AsyncClient, worktree_id: str, last: str) -> list[Worktree]:
    """The worktree's transition events, oldest first, up to the one into `last`."""
    found: list[Worktree] = []
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream("GET", "/v1/worktrees/events", params={"last_event_id": 0}) as stream,
    ):
        reader = SseReader(stream)
        while not found or found[-1]["to"] != last:
            [message] = await reader.take(1)
            data = message.data
            if message.event == "worktree.transitioned" and data["worktree"]["id"] == worktree_id:
                found.append(data)
    return found


async def lane_runs(client: httpx.AsyncClient, lane: str) -> list[dict[str, Any]]:
    page = (await client.get("/v1/runs", params={"lane": lane})).json()
    return list(page["items"])  # oldest first


async def until_runs(client: httpx.AsyncClient, lane: str, statuses: list[str]) -> None:
    """Once the lane's runs have these statuses, oldest first."""
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            if [r["status"] for r in await lane_runs(client, lane)] == statuses:
                return
            await asyncio.sleep(0.05)


def first_lines(repo: Path) -> tuple[str, str, str]:
    """a.txt with its first line Ann's, Bob's, or both (the two tasks' edits conflict)."""
    rest = "".join((repo / "a.txt").read_text().splitlines(keepends=True)[1:])
    return (
        "ann's first line\n" + rest,
        "bob's first line\n" + rest,
        "ann's and bob's first line\n" + rest,
    )


async def conflicting_pair(client: httpx.AsyncClient, repo: Path) -> tuple[str, Worktree]:
    """Ann's edit merged, then Bob's of the same line approved: Bob's task id, and its
    worktree (its id and path; its status moves on in the background)."""
    ann, bob, _ = first_lines(repo)
    first = await task_for(client, writer("ann", write("a.txt", ann)), "Ann's edit")
    second = await task_for(client, writer("bob", write("a.txt", bob)), "Bob's edit")
    await approve_review(client, first)
    await until_status(client, first, "merged")
    await approve_review(client, second)
    return second, await worktree_of(client, second)


# -- escalation to the review agent ------------------------------------------------------


async def test_a_conflict_goes_to_the_review_agent_whose_resolution_is_merged(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    *_, both = first_lines(repo)
    resolver = writer(
        "rex",
        {"name": "read_file", "input": {"path": "a.txt"}},
        write("a.txt", both),
        tools=["read_file", "write_file"],
    )
    reviewer = await make_agent(client, resolver)
    await workspace(client, repo, escalation="agent", review_agent_id=reviewer)
    second, worktree = await conflicting_pair(client, repo)

    merged = await until_status(client, second, "merged")

    steps = await history(client, worktree["id"], "merged")
    assert [s["to"] for s in steps] == [
        "queued",
        "merging",
        "conflict",
        "queued",
        "merging",
        "merged",
    ]
    conflict = steps[2]["worktree"]
    assert conflict["approval_id"] is None  # no person was asked
    assert conflict["merge"]["agent_attempts"] == 1
    [clash] = conflict["merge"]["conflicts"]
    assert clash["path"] == "a.txt"
    # The agent's run, on the worktree's lane, was given the conflict and found it marked
    # in its worktree (its file tools' root).
    [run] = await lane_runs(client, f"worktree:{worktree['id']}")
    assert run["id"] == conflict["merge"]["escalation_run_id"]
    assert (run["status"], run["agent_id"]) == ("completed", reviewer)
    assert run["metadata"] == {"task_id": second, "worktree_id": worktree["id"]}
    assert "a.txt" in run["input"] and "bob's first line" in run["input"]
    messages = (await client.get(f"/v1/conversations/{run['conversation_id']}/messages")).json()
    [seen, _] = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert "<<<<<<<" in str(seen["content"]) and "ann's first line" in str(seen["content"])
    # Its resolution reached main, once, on top of Ann's.
    assert sh_git(repo, "show", "main:a.txt") == both.strip()
    assert first_parent_log(repo)[:2] == ["Bob's edit", "Ann's edit"]
    assert merged["merge"]["outcome"] == "merged"
    assert (await client.get(f"/v1/tasks/{second}")).json()["status"] == "completed"


async def test_a_review_agent_that_leaves_the_markers_twice_hands_the_conflict_to_a_person(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    *_, both = first_lines(repo)
    idle = writer("rex", {"name": "read_file", "input": {"path": "a.txt"}}, tools=["read_file"])
    reviewer = await make_agent(client, idle)
    await workspace(client, repo, escalation="agent", review_agent_id=reviewer)
    second, worktree = await conflicting_pair(client, repo)
    ann_main = sh_git(repo, "rev-parse", "main")

    asked = await until(client, second, lambda w: w["approval_id"] is not None)

    assert asked["status"] == "conflict"
    assert asked["merge"]["agent_attempts"] == 2
    assert asked["merge"]["detail"] == "conflict markers remain in: a.txt"
    runs = await lane_runs(client, f"worktree:{worktree['id']}")
    assert [r["status"] for r in runs] == ["completed", "completed"]
    # Each run was told which files to resolve: the conflict, then the markers it left.
    assert all("a.txt" in r["input"] for r in runs), runs[1]["input"]
    approval = (await client.get(f"/v1/approvals/{asked['approval_id']}")).json()
    assert (approval["kind"], approval["status"], approval["task_id"]) == (
        "merge",
        "pending",
        second,
    )
    assert "conflict markers remain in: a.txt" in approval["summary"]
    assert sh_git(repo, "rev-parse", "main") == ann_main  # nothing marked reached main

    # The person resolves it in the worktree and approves: it merges.
    (Path(asked["path"]) / "a.txt").write_text(both)
    answer = await client.post(f"/v1/approvals/{approval['id']}/approve", json={})
    assert answer.status_code == 200, answer.text
    await until_status(client, second, "merged")
    assert sh_git(repo, "show", "main:a.txt") == both.strip()
    assert len(await lane_runs(client, f"worktree:{worktree['id']}")) == 2  # no third run


# -- merge orders --------------------------------------------------------------------------


async def test_manual_order_merges_only_what_a_person_asks_for(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    await workspace(client, repo, merge_order="manual")
    first = await task_for(client, writer("ann", write("ann.txt", "ann\n")), "Ann's file")
    second = await task_for(client, writer("bob", write("bob.txt", "bob\n")), "Bob's file")
    await approve_review(client, first)
    in_review = await worktree_of(client, second)
    refused = await client.post(f"/v1/worktrees/{in_review['id']}/merge")
    body = assert_problem(refused, 409, "worktree_not_mergeable")
    assert body["worktree_status"] == "active"
    await approve_review(client, second)
    await until_status(client, first, "queued")
    queued = await until_status(client, second, "queued")
    # A witness: a project after this one (the queue takes workspaces by name) in
    # completion order merges; the queue's pass over this one left both queued.
    other = make_repo(tmp_path / "other")
    witness = {"repository": str(other), "base_branch": "main"}
    assert (await client.put("/v1/projects/zeta/workspace", json=witness)).status_code == 201
    agent = await make_agent(client, writer("zed", write("z.txt", "z\n")))
    zeta = await create_task(client, title="Zed's file", project="zeta", assigned_to=agent)
    await approve_review(client, zeta["id"])
    await until_status(client, zeta["id"], "merged")
    assert (await worktree_of(client, first))["status"] == "queued"
    assert (await worktree_of(client, second))["status"] == "queued"
    assert first_parent_log(repo) == ["initial"]

    # A person merges the second first.
    answer = await client.post(f"/v1/worktrees/{queued['id']}/merge")
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["merge"]["outcome"]) == ("merged", "merged")
    again = await client.post(f"/v1/worktrees/{queued['id']}/merge")
    assert assert_problem(again, 409, "worktree_not_mergeable")["worktree_status"] == "merged"
    assert (await worktree_of(client, first))["status"] == "queued"
    ann = await worktree_of(client, first)
    assert (await client.post(f"/v1/worktrees/{ann['id']}/merge")).json()["status"] == "merged"
    assert first_parent_log(repo) == ["Ann's file", "Bob's file", "initial"]


async def test_priority_order_merges_the_most_urgent_approved_task_first(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    await workspace(client, repo, merge_order="manual")  # holds the queue while they wait

    async def task(title: str, priority: str) -> str:
        agent = await make_agent(client, writer(title, write(f"{title}.txt", f"{title}\n")))
        made = await create_task(
            client, title=title, project="atlas", assigned_to=agent, priority=priority
        )
        return str(made["id"])

    low, high, later = (
        await task("low", "low"),
        await task("high", "high"),
        await task("later", "low"),
    )
    await approve_review(client, low)  # approved first: first by completion
    await until_status(client, low, "queued")
    await approve_review(client, high)
    await until_status(client, high, "queued")
    await requested(client, later)

    body = {"repository": str(repo), "base_branch": "main", "merge_order": "priority"}
    changed = await client.put("/v1/projects/atlas/workspace", json=body)
    assert changed.status_code == 200, changed.text
    # The next approval wakes the queue: the most urgent goes first, then by approval, all
    # in that one wake-up (none waits for the interval, beyond this test's timeout).
    await approve_review(client, later)

    merged = [await until_status(client, t, "merged") for t in (high, low, later)]
    assert [at(m["merged_at"]) for m in merged] == sorted(at(m["merged_at"]) for m in merged)
    assert first_parent_log(repo) == ["later", "low", "high", "initial"]


# -- capacity ------------------------------------------------------------------------------


async def test_a_task_waits_for_a_worktree_while_the_workspace_has_none_free(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    await workspace(client, repo, max_worktrees=1)
    first = await task_for(client, writer("ann", write("ann.txt", "ann\n")), "Ann's file")
    review = await requested(client, first)  # its run made the one worktree, and is done
    second = await task_for(client, writer("bob", write("bob.txt", "bob\n")), "Bob's file")
    assert (await client.get(f"/v1/tasks/{second}")).json()["status"] == "assigned"
    got = (await client.get("/v1/projects/atlas/workspace")).json()
    assert (got["worktrees_in_use"], got["max_worktrees"]) == (1, 1)

    answer = await client.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert answer.status_code == 200, answer.text
    freed = await until_status(client, first, "merged")
    await requested(client, second)  # it ran once the first's worktree was freed

    [run] = await lane_runs(client, f"task:{second}")  # one run: never refused for room
    assert at(run["created_at"]) >= at(freed["merged_at"])
    trail = (await client.get(f"/v1/tasks/{second}/transitions")).json()
    started = next(s["at"] for s in trail if s["to_status"] == "in_progress")
    assert at(started) >= at(freed["merged_at"])
    assert (await worktree_of(client, second))["status"] == "active"
    assert sh_git(repo, "show", "main:ann.txt") == "ann"


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


# -- cleanup -------------------------------------------------------------------------------


async def test_a_cancelled_tasks_worktree_is_abandoned_its_directory_removed_its_branch_kept(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    await workspace(client, repo)
    # The agent writes a draft, then waits for a person before a call outside.
    ask = {"name": "http_request", "input": {"method": "POST", "url": "https://example.com/"}}
    agent = writer(
        "ann", write("draft.txt", "a draft\n"), ask, tools=["write_file", "http_request"]
    )
    task_id = await task_for(client, agent, "Draft")
    lane = f"task:{task_id}"
    await until_runs(client, lane, ["waiting_on_human"])
    active = await worktree_of(client, task_id)
    assert active["status"] == "active" and (Path(active["path"]) / "draft.txt").exists()

    cancelled = await client.post(f"/v1/tasks/{task_id}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    abandoned = await until_status(client, task_id, "abandoned", removed=True)

    assert not await asyncio.to_thread(Path(active["path"]).exists)
    assert active["path"] not in sh_git(repo, "worktree", "list")
    # Its branch stays, holding what the task had written when it was cancelled.
    assert sh_git(repo, "show", f"{abandoned['branch']}:draft.txt") == "a draft"
    subject = sh_git(repo, "log", "-1", "--format=%s", abandoned["branch"])
    assert subject == "Draft (abandoned: its task ended)"
    assert first_parent_log(repo) == ["initial"]  # nothing merged
    assert (await client.get("/v1/projects/atlas/workspace")).json()["worktrees_in_use"] == 0
    await until_runs(client, lane, ["cancelled"])


async def test_a_directory_a_stopped_process_left_after_recording_a_merge_is_removed_at_start(
    settings: Settings, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as client:
        await workspace(client, repo)
        task_id = await task_for(client, writer("ann", write("ann.txt", "ann\n")), "Ann's file")
        await approve_review(client, task_id)
        merged = await until_status(client, task_id, "merged", removed=True)
    # What a process that stopped between recording the merge and removing the worktree's
    # directory leaves: the row not marked removed, the directory still a git worktree.
    async with clean_db.begin() as connection:
        await connection.execute(
            text("UPDATE worktrees SET removed = false WHERE id = :id"), {"id": merged["id"]}
        )
    sh_git(repo, "worktree", "add", "-q", merged["path"], merged["branch"])

    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as client:
        swept = await until_status(client, task_id, "merged", removed=True)

    assert swept["version"] > merged["version"]
    assert not await asyncio.to_thread(Path(merged["path"]).exists)
    assert merged["path"] not in sh_git(repo, "worktree", "list")
    assert sh_git(repo, "rev-parse", "--verify", merged["branch"])  # its branch kept
