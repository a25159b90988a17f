"""A merge killed in the middle, through the real service: a `loopwright serve` merges an
approved task's worktree and dies there (SIGKILL, by the test-only hook
`LOOPWRIGHT_CRASH_AT`) after the rebase, about to move the base branch, or just after
moving it. The repository is consistent after the kill (`git fsck`, no rebase left in
progress, the base branch at its old commit or at the merge's, nothing else), and a fresh
`serve` recovers at start-up and completes the merge: the worktree `merged`, the base
holding the task's work and a person's commit made meanwhile, one merge commit for the
task on its first-parent history. Another workspace's repository gone by then does not
hold that recovery back."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.sse import SseReader
from tests.workspaces.conftest import assert_consistent, commit_file, make_repo, sh_git

pytestmark = pytest.mark.e2e

TITLE = "Add the feature"
FEATURE = "def feature():\n    return 42\n"
# point -> whether the base branch holds the merge when the process dies
POINTS = {"merge_rebased": False, "merge_publishing": False, "merge_published": True}


def _until(http: httpx.Client, path: str, params: dict[str, str], found: Any) -> Any:
    """Polls `path` until `found(body)` answers something; that answer."""
    deadline = time.monotonic() + 60
    while True:
        body = http.get(path, params=params).json()
        answer = found(body)
        if answer:
            return answer
        assert time.monotonic() < deadline, body
        time.sleep(0.1)  # watching other processes; nothing to inject


def _worktree(
    http: httpx.Client, task_id: str, status: str | None = None, *, removed: bool | None = None
) -> dict[str, Any]:
    """The task's worktree once it has this status (and its directory is removed, or not)."""

    def found(page: dict[str, Any]) -> dict[str, Any] | None:
        items = page["items"]
        if not items or status not in (None, items[0]["status"]):
            return None
        return items[0] if removed in (None, items[0]["removed"]) else None

    result: dict[str, Any] = _until(http, "/v1/worktrees", {"task_id": task_id}, found)
    return result


def _statuses(url: str, worktree_id: str) -> list[str]:
    """The statuses the worktree moved to, in order, as its events told them (until its
    directory was removed)."""

    async def read() -> list[str]:
        statuses: list[str] = []
        async with (
            httpx.AsyncClient(base_url=url) as client,
            asyncio.timeout(30),
            client.stream("GET", "/v1/worktrees/events", params={"last_event_id": 0}) as stream,
        ):
            reader = SseReader(stream)
            while True:
                [message] = await reader.take(1)
                if message.data["worktree"]["id"] != worktree_id:
                    continue
                if message.event == "worktree.transitioned":
                    statuses.append(message.data["to"])
                elif message.event == "worktree.removed":
                    return statuses

    return asyncio.run(read())


def _start_merging(http: httpx.Client, repo: Path) -> tuple[str, dict[str, Any], str]:
    """A task whose agent writes a file in its worktree, in review; a person's commit on
    main meanwhile (so the merge replays the task's work onto it); the review approved.
    The task's id, its worktree, and main's commit before the merge."""
    workspace = {"repository": str(repo), "base_branch": "main"}
    assert http.put("/v1/projects/atlas/workspace", json=workspace).status_code == 201
    write = {"name": "write_file", "input": {"path": "feature.py", "content": FEATURE}}
    script = [
        {"tool_calls": [write]},
        {"text": "the feature is written"},
    ]
    agent = scripted_agent(http, "ann", script, tools=["write_file"])
    task = http.post(
        "/v1/tasks", json={"title": TITLE, "project": "atlas", "assigned_to": agent["id"]}
    )
    assert task.status_code == 201, task.text
    task_id = str(task.json()["id"])

    def pending(page: dict[str, Any]) -> dict[str, Any] | None:
        return next((a for a in page["items"] if a["kind"] == "task_review"), None)

    review = _until(http, "/v1/approvals", {"task_id": task_id, "status": "pending"}, pending)
    worktree = _worktree(http, task_id)
    commit_file(repo, "c.txt", "a person's change\n", "A person's commit")
    if sh_git(repo, "branch", "--show-current") != "main":  # made on a detached checkout
        sh_git(repo, "update-ref", "refs/heads/main", "HEAD")
    base_before = sh_git(repo, "rev-parse", "main")
    approved = http.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert approved.status_code == 200, approved.text
    return task_id, worktree, base_before


@pytest.mark.parametrize(
    ("point", "checked_out"),
    [*((point, True) for point in POINTS), ("merge_published", False)],
    ids=[*POINTS, "merge_published-base-not-checked-out"],
)
def test_a_merge_killed_midway_leaves_a_consistent_repository_and_completes_after_restart(
    point: str, checked_out: bool, database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    if not checked_out:  # then the base moves by `update-ref` alone
        sh_git(repo, "checkout", "-q", "--detach")
    env = {"LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2"}
    with Cluster(database_url, tmp_path, env) as cluster:
        doomed = cluster.server("doomed", {"LOOPWRIGHT_CRASH_AT": point}, workers=True)
        with httpx.Client(base_url=doomed.url, timeout=30) as http:
            task_id, worktree, base_before = _start_merging(http, repo)
        assert doomed.wait() == -9, f"{point} was not reached:\n{doomed.log()}"

        # What the kill left: a consistent repository, the base old or merged, never half.
        assert_consistent(repo, Path(worktree["path"]))
        branch = worktree["branch"]
        base_now = sh_git(repo, "rev-parse", "main")
        if POINTS[point]:
            assert sh_git(repo, "rev-parse", "main^1") == base_before
            assert sh_git(repo, "rev-parse", "main^2") == sh_git(repo, "rev-parse", branch)
        else:
            assert base_now == base_before

        healthy = cluster.server("healthy", workers=True)
        with httpx.Client(base_url=healthy.url, timeout=30) as http:
            merged = _worktree(http, task_id, "merged", removed=True)
            assert http.get(f"/v1/tasks/{task_id}").json()["status"] == "completed"
            metrics = http.get("/metrics").text
        statuses = _statuses(healthy.url, merged["id"])

    head = sh_git(repo, "rev-parse", "main")
    assert merged["merge"]["outcome"] == "merged"
    assert merged["merge"]["merged_sha"] == head
    assert sh_git(repo, "rev-parse", "main^1") == base_before  # laid on the person's commit
    assert sh_git(repo, "show", "main:feature.py") == FEATURE.strip()
    assert sh_git(repo, "show", "main:c.txt") == "a person's change"
    assert sh_git(repo, "log", "--first-parent", "--format=%s", "main").splitlines() == [
        TITLE,
        "A person's commit",
        "initial",
    ]
    if checked_out:
        assert (repo / "feature.py").read_text() == FEATURE  # the person's checkout moved along
    # The dead process's merge was queued again at start-up, and merged then.
    assert statuses == ["queued", "merging", "queued", "merging", "merged"]
    # The restarted process finished the merge (a merge already on the base is counted
    # as merged once more, never merged again).
    assert 'loopwright_merges_total{outcome="merged"} 1.0' in metrics
    assert merged["path"] not in sh_git(repo, "worktree", "list")
    assert sh_git(repo, "rev-parse", branch)  # its branch kept, for the record
    assert_consistent(repo)


def test_a_repository_gone_at_restart_does_not_hold_back_the_others_recovery(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    repo, gone = make_repo(tmp_path / "repo"), make_repo(tmp_path / "gone")
    with Cluster(database_url, tmp_path) as cluster:
        doomed = cluster.server("doomed", {"LOOPWRIGHT_CRASH_AT": "merge_publishing"}, workers=True)
        with httpx.Client(base_url=doomed.url, timeout=30) as http:
            # A project recovered before atlas (by name), whose repository goes away.
            other = {"repository": str(gone), "base_branch": "main"}
            assert http.put("/v1/projects/apollo/workspace", json=other).status_code == 201
            task_id, _, base_before = _start_merging(http, repo)
        assert doomed.wait() == -9, doomed.log()
        shutil.rmtree(gone)

        healthy = cluster.server("healthy", workers=True)
        with httpx.Client(base_url=healthy.url, timeout=30) as http:
            merged = _worktree(http, task_id, "merged", removed=True)

    assert merged["merge"]["merged_sha"] == sh_git(repo, "rev-parse", "main")
    assert sh_git(repo, "rev-parse", "main^1") == base_before
    assert sh_git(repo, "show", "main:feature.py") == FEATURE.strip()
