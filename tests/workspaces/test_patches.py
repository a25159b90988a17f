"""apply_patch: confined paths first, then `git apply --check`, then `git apply`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.workspaces.repo.errors import PatchFailure, PatchRejected
from app.workspaces.repo.git import GitRunner
from app.workspaces.repo.patches import apply_patch, patch_paths
from app.workspaces.repo.repository import Repository
from tests.workspaces.conftest import sh_git

MAX = 1_000_000

GOOD = """\
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 a.txt line 1
-a.txt line 2
+a.txt line two
 a.txt line 3
diff --git a/notes/new.md b/notes/new.md
new file mode 100644
--- /dev/null
+++ b/notes/new.md
@@ -0,0 +1 @@
+fresh
"""


@pytest.fixture
async def worktree(repo: Repository, tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    await repo.add_worktree(path, "task", "main")
    return path


async def test_a_good_patch_applies_once_and_again_is_no_change(
    worktree: Path, runner: GitRunner
) -> None:
    applied = await apply_patch(runner, worktree, GOOD, max_bytes=MAX)
    assert (applied.files, applied.changed) == (("a.txt", "notes/new.md"), True)
    assert (worktree / "a.txt").read_text().splitlines()[1] == "a.txt line two"
    assert (worktree / "notes" / "new.md").read_text() == "fresh\n"
    replayed = await apply_patch(runner, worktree, GOOD, max_bytes=MAX)
    assert (replayed.files, replayed.changed) == (("a.txt", "notes/new.md"), False)
    assert sh_git(worktree, "status", "--porcelain") == "M a.txt\n?? notes/"


async def test_a_patch_that_does_not_apply_says_why_and_changes_nothing(
    worktree: Path, runner: GitRunner
) -> None:
    stale = GOOD.replace("-a.txt line 2", "-a.txt line 22")
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, stale, max_bytes=MAX)
    assert caught.value.reason is PatchFailure.DOES_NOT_APPLY
    assert "patch does not apply" in caught.value.detail
    assert sh_git(worktree, "status", "--porcelain") == ""  # not even the new file
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, "not a patch at all\n", max_bytes=MAX)
    assert caught.value.reason is PatchFailure.EMPTY
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, GOOD, max_bytes=10)
    assert caught.value.reason is PatchFailure.DOES_NOT_APPLY


@pytest.mark.parametrize(
    "patch",
    [
        GOOD.replace("a/a.txt", "a/../outside.txt").replace("b/a.txt", "b/../outside.txt"),
        GOOD.replace("b/notes/new.md", "b/.git/hooks/post-checkout"),
        "diff --git a/a.txt b/x\nsimilarity index 100%\nrename from a.txt\nrename to ../x\n",
    ],
    ids=["traversal", "git-dir", "rename-out"],
)
async def test_a_patch_naming_a_path_outside_is_refused(
    worktree: Path, runner: GitRunner, patch: str
) -> None:
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, patch, max_bytes=MAX)
    assert caught.value.reason in (PatchFailure.UNSAFE_PATH, PatchFailure.DOES_NOT_APPLY)
    assert sh_git(worktree, "status", "--porcelain") == ""


async def test_a_patch_through_an_escaping_link_or_making_one_is_refused(
    worktree: Path, runner: GitRunner, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", worktree / "out")
    through = GOOD.replace("notes/new.md", "out/planted.md")
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, through, max_bytes=MAX)
    assert caught.value.reason is PatchFailure.UNSAFE_PATH
    assert "symlink_escape" in caught.value.detail
    assert not (tmp_path / "outside" / "planted.md").exists()
    link = (
        "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
        "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    with pytest.raises(PatchRejected) as caught:
        await apply_patch(runner, worktree, link, max_bytes=MAX)
    assert caught.value.reason is PatchFailure.SYMLINK


def test_paths_are_read_with_the_hunk_counts_and_unquoted() -> None:
    # A removed line reading `--- …` inside a hunk is content, not a header.
    patch = (
        "--- a/sql/schema.sql\n+++ b/sql/schema.sql\n@@ -1,2 +1,1 @@\n"
        "--- ../../etc/passwd\n keep\n"
        'diff --git "a/t\\303\\251st" "b/t\\303\\251st"\n'
        '--- "a/t\\303\\251st"\n+++ "b/t\\303\\251st"\n@@ -1 +1 @@\n-x\n+y\n'
        "diff --git a/old b/new\nrename from old name\nrename to new name\n"
    )
    assert patch_paths(patch) == [
        "sql/schema.sql",
        "sql/schema.sql",
        "tést",
        "tést",
        "old name",
        "new name",
    ]
