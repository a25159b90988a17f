"""`GET /v1/worktrees/{id}/diff` through the service, on a real repository: a task's
committed work as a unified diff with each file's stat, cut at a limit; once merged, what
the merge brought to the base; a problem naming why when its branch or workspace is gone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.support.api import assert_problem
from tests.support.factories import project
from tests.workspaces.conftest import commit_file, make_repo, sh_git
from tests.workspaces.test_workspaces_api import (
    TIMEOUT_S,
    approve_review,
    task_for,
    until_status,
    workspace,
    write,
    writer,
)


async def committed(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    """The task's worktree once its work is committed (its task in review)."""
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            page = (await client.get("/v1/worktrees", params={"task_id": task_id})).json()
            if page["items"] and page["items"][0]["head_sha"]:
                return dict(page["items"][0])
            await asyncio.sleep(0.05)


async def test_the_diff_of_a_task_in_review_then_of_its_merge(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own)
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    edited = "".join(["a new first line\n", *lines[1:]])
    calls = [write("a.txt", edited), write("notes/new.md", "# New\n\nA note.\n")]
    task_id = await task_for(client, writer("ann", *calls), "Edit", project=own)
    worktree = await committed(client, task_id)
    commit_file(repo, "b.txt", "the base moved on\n")  # not the task's: not in its diff

    response = await client.get(f"/v1/worktrees/{worktree['id']}/diff")
    assert response.status_code == 200, response.text
    diff = response.json()
    assert diff["worktree_id"] == worktree["id"]
    assert (diff["branch"], diff["base_branch"], diff["base"]) == (
        f"loopwright/{task_id}",
        "main",
        "refs/heads/main",
    )
    assert (diff["head"], diff["source"], diff["truncated"]) == (
        worktree["head_sha"],
        "branch",
        False,
    )
    assert diff["files"] == [
        {"path": "a.txt", "insertions": 1, "deletions": 1, "binary": False, "old_path": None},
        {
            "path": "notes/new.md",
            "insertions": 3,
            "deletions": 0,
            "binary": False,
            "old_path": None,
        },
    ]
    assert (diff["insertions"], diff["deletions"]) == (4, 1)
    text = diff["text"]
    assert text.startswith("diff --git a/a.txt b/a.txt\n")
    assert "-a.txt line 1\n+a new first line\n" in text
    assert "+++ b/notes/new.md\n@@ -0,0 +1,3 @@\n+# New\n+\n+A note.\n" in text
    assert "b.txt" not in text
    assert diff["size_bytes"] == len(text.encode()) and diff["limit_bytes"] == 512 * 1024

    await approve_review(client, task_id)
    merged = await until_status(client, task_id, "merged", removed=True)
    after = (await client.get(f"/v1/worktrees/{worktree['id']}/diff")).json()
    # The branch is in main now; its diff is what its merge commit brought.
    assert after["source"] == "merge"
    assert after["base"] == f"{merged['merge']['merged_sha']}^1"
    assert after["files"] == diff["files"] and after["text"] == text


async def test_a_diff_over_the_limit_is_cut_on_a_line(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own)
    big = "".join(f"line {n} of a long file\n" for n in range(200))
    worktree = await committed(
        client, await task_for(client, writer("ann", write("big.txt", big)), "Big", project=own)
    )
    url = f"/v1/worktrees/{worktree['id']}/diff"
    cut = (await client.get(url, params={"limit_bytes": 1024})).json()
    assert cut["truncated"] is True and cut["size_bytes"] > 4_000
    assert len(cut["text"].encode()) <= 1024 and cut["text"].endswith(" of a long file\n")
    assert cut["files"] == [
        {"path": "big.txt", "insertions": 200, "deletions": 0, "binary": False, "old_path": None}
    ]
    assert_problem(await client.get(url, params={"limit_bytes": 10}), 422, "validation_error")


async def test_a_diff_with_nothing_to_read_it_from_is_a_problem(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    assert_problem(await client.get("/v1/worktrees/wt_nope/diff"), 404, "not_found")
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own)
    task_id = await task_for(client, writer("ann", write("x.txt", "x\n")), "X", project=own)
    worktree = await committed(client, task_id)
    url = f"/v1/worktrees/{worktree['id']}/diff"
    await approve_review(client, task_id)
    await until_status(client, task_id, "merged", removed=True)

    sh_git(repo, "branch", "-D", worktree["branch"])  # by hand, after the merge
    gone = assert_problem(await client.get(url), 409, "worktree_diff_unavailable")
    assert (gone["reason"], gone["branch"]) == ("branch_gone", worktree["branch"])
    assert worktree["branch"] in gone["detail"]

    assert (await client.delete(f"/v1/projects/{own}/workspace")).status_code == 204
    unknown = assert_problem(await client.get(url), 409, "worktree_diff_unavailable")
    assert unknown["reason"] == "workspace_gone"
