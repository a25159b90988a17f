"""Workspaces through the real service, on real git repositories: scripted agents change
files in their tasks' worktrees with the file tools, their approved work is merged into
the base branch in the order the reviews approved it; overlapping edits conflict and go
to a person, who resolves them in the worktree; a merge that would break a call site is
held until a person accepts it; escapes and commands outside the allowlist are refused.

On the shared server each test's workspace is its own project's (`project()`): it reads
its own worktrees, its own tasks' events, and the merge counter as a difference."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.approvals.test_approvals_api import requested
from tests.support.api import assert_problem
from tests.support.factories import agent_body, create_task, make_agent, project, unique
from tests.support.sse import SseReader
from tests.workspaces.conftest import commit_file, make_repo, sh_git

TIMEOUT_S = 30
# The project of the modules that still run on a server of their own (`own_server`).
ATLAS = "atlas"


def writer(name: str, *calls: dict[str, Any], tools: list[str] | None = None) -> dict[str, Any]:
    """An agent whose run makes these tool calls, one turn each, then says it is done (a
    name of its own: `name` with a suffix)."""
    turns = [{"tool_calls": [call]} for call in calls] + [{"text": f"{name} is done"}]
    return agent_body(*turns, name=unique(name), tools=tools or ["write_file"])


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "input": {"path": path, "content": content}}


async def workspace(
    client: httpx.AsyncClient, repo: Path, *, project: str = ATLAS, **fields: Any
) -> dict[str, Any]:
    """The project's workspace, made on `repo`."""
    body = {"repository": str(repo), "base_branch": "main", **fields}
    response = await client.put(f"/v1/projects/{project}/workspace", json=body)
    assert response.status_code == 201, response.text
    found: dict[str, Any] = response.json()
    return found


async def task_for(
    client: httpx.AsyncClient, agent: dict[str, Any], title: str, *, project: str = ATLAS
) -> str:
    """A task of the project assigned to a new agent made from the body `agent`."""
    agent_id = (await make_agent(client, **agent))["id"]
    task = await create_task(client, title=title, project=project, assigned_to=agent_id)
    return str(task["id"])


async def approve_review(client: httpx.AsyncClient, task_id: str) -> None:
    review = await requested(client, task_id)
    answer = await client.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert answer.status_code == 200, answer.text


async def worktree_of(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    page = (await client.get("/v1/worktrees", params={"task_id": task_id})).json()
    [found] = page["items"]
    return dict(found)


async def until_status(
    client: httpx.AsyncClient, task_id: str, wanted: str, *, removed: bool | None = None
) -> dict[str, Any]:
    """The task's worktree once it reaches this status (and its directory is removed, or
    not): the merge queue works in the background."""
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            page = (await client.get("/v1/worktrees", params={"task_id": task_id})).json()
            found = page["items"][0] if page["items"] else None
            if found and found["status"] == wanted and removed in (None, found["removed"]):
                return dict(found)
            await asyncio.sleep(0.05)


def first_parent_log(repo: Path) -> list[str]:
    return sh_git(repo, "log", "--first-parent", "--format=%s", "main").splitlines()


async def merges(client: httpx.AsyncClient, outcome: str) -> float:
    """The server's count of merges with this outcome so far."""
    metrics = (await client.get("/metrics")).text
    found = re.search(rf'^loopwright_merges_total{{outcome="{outcome}"}} (\S+)$', metrics, re.M)
    return float(found[1]) if found else 0.0


async def test_disjoint_edits_merge_cleanly_in_the_order_their_reviews_approved(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    made = await workspace(client, repo, project=own)
    assert (made["max_worktrees"], made["merge_order"], made["worktrees_in_use"]) == (
        4,
        "completion",
        0,
    )
    merged_before = await merges(client, "merged")
    alpha, beta = write("alpha.py", "A = 1\n"), write("docs/beta.md", "# Beta\n")
    first = await task_for(client, writer("ann", alpha), "Alpha", project=own)
    second = await task_for(client, writer("bob", beta), "Beta", project=own)
    # Both in review; the second approved first merges first.
    await approve_review(client, second)
    merged = await until_status(client, second, "merged", removed=True)
    await approve_review(client, first)
    await until_status(client, first, "merged")

    assert first_parent_log(repo)[:2] == ["Alpha", "Beta"]  # newest first
    assert sh_git(repo, "show", "main:alpha.py") == "A = 1"
    assert sh_git(repo, "show", "main:docs/beta.md") == "# Beta"
    assert sh_git(repo, "status", "--porcelain") == ""  # the person's checkout moved along
    assert merged["diff"]["files"] == [{"path": "docs/beta.md", "insertions": 1, "deletions": 0}]
    assert merged["merge"]["outcome"] == "merged"
    assert merged["merge"]["merged_sha"] == sh_git(repo, "rev-parse", "main~1")
    assert merged["path"] not in sh_git(repo, "worktree", "list")  # removed, and forgotten
    assert merged["branch"] == f"loopwright/{second}"
    got = (await client.get(f"/v1/projects/{own}/workspace")).json()
    assert got["worktrees_in_use"] == 0
    assert await merges(client, "merged") - merged_before == 2
    # Its stream told each step, in order (each checked against the documented schema).
    steps = [
        (kind, data.get("to"))
        for kind, data in await worktree_events(client, 2 * 6, tasks={first, second})
        if data["worktree"]["task_id"] == second
    ]
    assert steps == [
        ("worktree.created", None),
        ("worktree.committed", None),
        ("worktree.transitioned", "queued"),
        ("worktree.transitioned", "merging"),
        ("worktree.transitioned", "merged"),
        ("worktree.removed", None),
    ]


async def conflicting_edits(
    client: httpx.AsyncClient, repo: Path, ann_line: str, bob_line: str, *, project: str = ATLAS
) -> tuple[str, dict[str, Any]]:
    """Two tasks of the project replace a.txt's first line; the first's is merged. The
    second task, and its worktree once its merge conflicted."""
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    ann = "".join([f"{ann_line}\n", *lines[1:]])
    bob = "".join([f"{bob_line}\n", *lines[1:]])
    first = await task_for(
        client, writer("ann", write("a.txt", ann)), "Ann's edit", project=project
    )
    second = await task_for(
        client, writer("bob", write("a.txt", bob)), "Bob's edit", project=project
    )
    await approve_review(client, first)
    await until_status(client, first, "merged")
    await approve_review(client, second)
    return second, await until_status(client, second, "conflict")


async def test_overlapping_edits_conflict_and_a_person_resolves_them(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own)
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    second, conflict = await conflicting_edits(
        client, repo, "ann's first line", "bob's first line", project=own
    )

    assert conflict["merge"]["outcome"] == "conflict"
    [clash] = conflict["merge"]["conflicts"]
    assert clash["path"] == "a.txt" and "bob's first line" in clash["hunks"][0]
    approval = (await client.get(f"/v1/approvals/{conflict['approval_id']}")).json()
    assert (approval["kind"], approval["status"], approval["task_id"]) == (
        "merge",
        "pending",
        second,
    )
    assert "a.txt" in approval["summary"]
    # The worktree holds Bob's work laid on the new main, the conflict marked.
    marked = (Path(conflict["path"]) / "a.txt").read_text()
    assert "<<<<<<<" in marked and "ann's first line" in marked
    assert sh_git(repo, "show", "main:a.txt").startswith("ann's first line")

    # A person resolves it in the worktree and approves: it merges.
    (Path(conflict["path"]) / "a.txt").write_text("".join(["both first lines\n", *lines[1:]]))
    answer = await client.post(f"/v1/approvals/{approval['id']}/approve", json={})
    assert answer.status_code == 200, answer.text
    merged = await until_status(client, second, "merged")
    assert sh_git(repo, "show", "main:a.txt").startswith("both first lines\n")
    assert merged["approval_id"] is None


async def test_a_merge_that_breaks_a_call_site_is_held_until_a_person_accepts_it(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    commit_file(repo, "util.py", "def parse(text):\n    return text.split()\n")
    own = project()
    await workspace(client, repo, project=own)
    changed = "def parse(text, sep):\n    return text.split(sep)\n"
    first = await task_for(
        client, writer("ann", write("util.py", changed)), "Separator", project=own
    )
    caller = "import util\n\nWORDS = util.parse('a b')\n"
    second = await task_for(client, writer("bob", write("words.py", caller)), "Words", project=own)
    await approve_review(client, first)
    await until_status(client, first, "merged")
    before = sh_git(repo, "rev-parse", "main")
    await approve_review(client, second)
    held = await until_status(client, second, "held")

    [issue] = held["merge"]["issues"]
    assert (issue["check"], issue["path"], issue["line"]) == ("broken_call", "words.py", 3)
    assert sh_git(repo, "rev-parse", "main") == before  # nothing reached main
    answer = await client.post(f"/v1/approvals/{held['approval_id']}/approve", json={})
    assert answer.status_code == 200, answer.text
    merged = await until_status(client, second, "merged")
    assert merged["merge"]["accepted_by"] == "local"
    assert sh_git(repo, "show", "main:words.py").startswith("import util")


async def test_the_tools_refuse_escapes_and_programs_outside_the_allowlist(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "secret.txt").write_text("not yours")
    # The repository holds a symbolic link leading out of it (checked out in worktrees).
    (repo / "link").symlink_to(tmp_path)
    sh_git(repo, "add", "link")
    sh_git(repo, "commit", "-q", "-m", "a link out")
    own = project()
    await workspace(client, repo, project=own, commands=["ls"])
    calls = [  # never three refusals in a row: the loop guard would end the run
        {"name": "read_file", "input": {"path": "../secret.txt"}},
        {"name": "run_command", "input": {"argv": ["ls"]}},
        {"name": "read_file", "input": {"path": "/etc/hostname"}},
        {"name": "run_command", "input": {"argv": ["rm", "-rf", "."]}},
        {"name": "read_file", "input": {"path": "a.txt"}},
        {"name": "write_file", "input": {"path": "link/x.txt", "content": "x"}},
    ]
    tools = ["read_file", "write_file", "run_command"]
    task_id = await task_for(client, writer("eve", *calls, tools=tools), "Try", project=own)
    results = [str(r["content"]) for r in await tool_results(client, task_id, len(calls))]
    assert "refused: traversal" in results[0]
    assert "a.txt" in results[1] and "refused" not in results[1]
    assert "refused: absolute" in results[2]
    assert "refused: not_allowed" in results[3]
    assert "a.txt line 1" in results[4]
    assert "refused: symlink_escape" in results[5]
    assert not (tmp_path / "x.txt").exists() and (repo / "a.txt").exists()


async def test_settings_are_checked_against_the_repository(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    not_git = tmp_path / "plain"
    not_git.mkdir()
    own = project()
    url = f"/v1/projects/{own}/workspace"
    refused = await client.put(url, json={"repository": str(not_git)})
    assert assert_problem(refused, 422, "validation_error")["errors"][0]["field"] == "repository"
    refused = await client.put(url, json={"repository": str(repo), "base_branch": "nope"})
    assert assert_problem(refused, 422, "validation_error")["errors"][0]["field"] == "base_branch"
    refused = await client.put(url, json={"repository": "relative/path"})
    assert_problem(refused, 422, "validation_error")
    refused = await client.put(url, json={"repository": str(repo), "escalation": "agent"})
    assert "review_agent_id" in str(assert_problem(refused, 422, "validation_error"))
    assert_problem(await client.get(url), 404, "not_found")
    created = await client.put(url, json={"repository": str(repo), "commands": ["pytest"]})
    assert created.status_code == 201 and created.headers["ETag"] == '"1"'
    stale = await client.put(
        url, json={"repository": str(repo), "max_worktrees": 2}, headers={"If-Match": '"7"'}
    )
    assert_problem(stale, 409, "version_conflict")
    changed = await client.put(url, json={"repository": str(repo), "max_worktrees": 2})
    assert changed.status_code == 200 and changed.json()["version"] == 2
    [listed] = [w for w in (await client.get("/v1/workspaces")).json() if w["project"] == own]
    assert listed["max_worktrees"] == 2
    assert_problem(await client.get("/v1/worktrees/wt_nope"), 404, "not_found")
    assert (await client.delete(url)).status_code == 204
    assert_problem(await client.delete(url), 404, "not_found")


async def worktree_events(
    client: httpx.AsyncClient, count: int, *, tasks: set[str]
) -> list[tuple[str, dict[str, Any]]]:
    """The first `count` events of these tasks' worktrees, read from the stream's start."""
    found: list[tuple[str, dict[str, Any]]] = []
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream("GET", "/v1/worktrees/events", params={"last_event_id": 0}) as stream,
    ):
        reader = SseReader(stream)
        while len(found) < count:
            [message] = await reader.take(1)
            if message.data["worktree"]["task_id"] in tasks:
                found.append((str(message.event), message.data))
    return found


async def tool_results(client: httpx.AsyncClient, task_id: str, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            runs = (await client.get("/v1/runs", params={"lane": f"task:{task_id}"})).json()
            if runs["items"]:
                conversation = runs["items"][0]["conversation_id"]
                messages = (await client.get(f"/v1/conversations/{conversation}/messages")).json()
                results = [
                    block
                    for message in messages
                    for block in message["content"]
                    if block["type"] == "tool_result"
                ]
                if len(results) >= count:
                    return results
            await asyncio.sleep(0.05)
