"""`loopwright workspace` and `loopwright worktrees`, run as a person runs them against a
real server and a real repository: a workspace set (then changed, keeping what was not
given), its tasks' worktrees listed and shown, a diff printed, a queued worktree merged
now, the next one held with its semantic issue; and the refusals' exits (the command
line's fault: 2; the server's: 6, its problem on one line)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.cli import cli
from tests.support.factories import project
from tests.workspaces.conftest import commit_file, make_repo, sh_git
from tests.workspaces.test_workspaces_api import (
    approve_review,
    task_for,
    until_status,
    write,
    writer,
)


async def test_a_workspace_and_its_worktrees_from_the_command_line(
    client: httpx.AsyncClient, base_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    commit_file(repo, "util.py", "def parse(text):\n    return text.split()\n")
    own = project()

    none = await cli(base_url, "workspace", own)
    assert none.code == 6 and none.err == (
        f"loopwright: project '{own}' has no workspace (loopwright workspace {own} --repo PATH)\n"
    )
    made = await cli(
        base_url,
        *("workspace", own, "--repo", str(repo), "--order", "manual"),
        *("--command", "pytest", "ruff", "--no-cleanup"),
    )
    assert made.code == 0, made
    assert made.out.splitlines() == [
        f"workspace {own}",
        f"repository {repo}, base branch main",
        "worktrees: 0 in use of 4 at most",
        "merge order: manual; conflicts go to a person; no cleanup after a merge; semantic checks",
        "commands: pytest, ruff (each up to 120 s, 65536 bytes of output)",
    ]
    changed = await cli(base_url, "workspace", own, "--max", "2")
    assert changed.code == 0, changed
    assert "worktrees: 0 in use of 2 at most" in changed.out
    assert "merge order: manual" in changed.out and "commands: pytest, ruff" in changed.out
    got = (await client.get(f"/v1/projects/{own}/workspace")).json()
    assert (got["version"], got["max_worktrees"], got["cleanup_after_merge"]) == (2, 2, False)

    # Two tasks approved under the manual order: both wait to be merged by hand.
    changed_util = "def parse(text, sep):\n    return text.split(sep)\n"
    first = await task_for(
        client, writer("ann", write("util.py", changed_util)), "Separator", project=own
    )
    caller = "import util\n\nWORDS = util.parse('a b')\n"
    second = await task_for(client, writer("bob", write("words.py", caller)), "Words", project=own)
    await approve_review(client, first)
    await approve_review(client, second)
    ann = await until_status(client, first, "queued")
    bob = await until_status(client, second, "queued")

    listed = await cli(base_url, "worktrees", "--project", own, "--status", "queued")
    assert listed.code == 0, listed
    header, *rows = listed.out.splitlines()
    assert header.split() == ["WORKTREE", "PROJECT", "TASK", "STATUS", "CHANGES", "BRANCH"]
    assert [row.split() for row in rows] == [
        [bob["id"], own, second, "queued", "+3", "-0", "in", "1", "file", bob["branch"]],
        [ann["id"], own, first, "queued", "+2", "-2", "in", "1", "file", ann["branch"]],
    ]
    nothing = await cli(base_url, "worktrees", "--project", own, "--status", "merged")
    assert nothing.out.startswith("no worktrees (")

    shown = await cli(base_url, "worktrees", "show", ann["id"])
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    assert lines[:3] == [
        f"worktree {ann['id']}  [queued]",
        f"project {own}, task {first}, branch {ann['branch']}",
        f"directory {ann['path']}",
    ]
    assert lines[5].split() == ["FILE", "ADDED", "REMOVED"]
    assert lines[6].split() == ["util.py", "2", "2"] and lines[7] == "total: +2 -2 in 1 file"

    diff = await cli(base_url, "worktrees", "diff", ann["id"])
    assert diff.code == 0 and diff.err == ""
    assert diff.out.startswith("diff --git a/util.py b/util.py\n")
    assert (
        "@@ -1,2 +1,2 @@\n-def parse(text):\n-    return text.split()\n+def parse(text, sep):\n"
        in diff.out
    )

    merged = await cli(base_url, "worktrees", "merge", ann["id"])
    assert merged.code == 0, merged
    assert merged.out == f"worktree {ann['id']}: merged as {sh_git(repo, 'rev-parse', 'main')}\n"
    again = await cli(base_url, "worktrees", "merge", ann["id"])
    assert again.code == 6
    assert again.err.startswith(f"loopwright: 409 worktree_not_mergeable: worktree {ann['id']}")

    # The second breaks a call site the first changed: held, exit 1, and why.
    held = await cli(base_url, "worktrees", "merge", bob["id"])
    assert held.code == 1, held
    assert held.out.startswith(f"worktree {bob['id']}: held\nlast merge: semantic_issues at ")
    assert "  broken_call words.py:3 util.parse: " in held.out
    approval = (await client.get(f"/v1/worktrees/{bob['id']}")).json()["approval_id"]
    assert held.out.endswith(f"escalated to a person: approval {approval}\n")
    detail = await cli(base_url, "worktrees", "show", bob["id"])
    assert f"escalated to a person: approval {approval} (loopwright approvals" in detail.out

    in_use = await cli(base_url, "workspace", own, "--remove")
    assert in_use.code == 6 and "409 workspace_in_use" in in_use.err


async def test_the_refusals_exit_with_the_problem(base_url: str, tmp_path: Path) -> None:
    own = project()  # no workspace
    for wrong in (
        ["workspace", own, "--max", "0"],
        ["workspace", own, "--order", "alphabetical"],
        ["workspace", own, "--remove", "--max", "2"],
        ["workspace", own, "--max", "2"],  # a new workspace needs its repository
        ["worktrees", "show"],
        ["worktrees", "list", "wt_x"],
        ["worktrees", "--status", "sleeping"],
        ["workspace"],
    ):
        refused = await cli(base_url, *wrong)
        assert refused.code == 2, (wrong, refused)
    norepo = await cli(base_url, "workspace", own, "--max", "2")
    assert norepo.err == "loopwright: --repo PATH is needed to make a workspace\n"

    plain = tmp_path / "plain"
    plain.mkdir()
    not_git = await cli(base_url, "workspace", own, "--repo", str(plain))
    assert not_git.code == 6 and not_git.err.startswith(
        "loopwright: 422 validation_error: repository: is not a git repository"
    )
    missing = await cli(base_url, "worktrees", "show", "wt_nope")
    assert missing.code == 6
    assert missing.err == "loopwright: 404 not_found: worktree 'wt_nope' does not exist\n"
    gone = await cli(base_url, "worktrees", "diff", "wt_nope")
    assert gone.code == 6 and "404 not_found" in gone.err
    nothing = await cli(base_url, "workspace", own, "--remove")
    assert nothing.code == 6 and "404 not_found" in nothing.err
