"""Worktrees on their own branches: add (idempotent), commit, diff stat, list, remove."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.workspaces.repo.errors import GitError, NotARepository
from app.workspaces.repo.git import GitRunner
from app.workspaces.repo.repository import FileStat, Repository
from tests.workspaces.conftest import commit_file, sh_git


async def test_open_refuses_what_is_not_a_repository(tmp_path: Path, runner: GitRunner) -> None:
    with pytest.raises(NotARepository):
        await Repository.open(tmp_path, runner)
    with pytest.raises(NotARepository, match="No such file"):
        await Repository.open(tmp_path / "missing", runner)


async def test_worktree_lifecycle(repo: Repository, tmp_path: Path) -> None:
    path = tmp_path / "trees" / "run-1"
    base = sh_git(repo.path, "rev-parse", "main")
    tree = await repo.add_worktree(path, "lw/run-1", "main")
    assert (tree.path, tree.branch, tree.head) == (path.resolve(), "lw/run-1", base)
    assert (path / "a.txt").is_file()
    # Repeated (a retry after a crash): the same worktree, not an error.
    assert await repo.add_worktree(path, "lw/run-1", "main") == tree

    assert await repo.commit_all(path, "nothing") is None
    (path / "a.txt").write_text("changed\n")
    (path / "dir").mkdir()
    (path / "dir" / "new.bin").write_bytes(b"\0\1\2")
    (path / "c.txt").unlink()
    assert sorted(await repo.changed_paths(path)) == ["a.txt", "c.txt", "dir/new.bin"]
    sha = await repo.commit_all(path, "agent work")
    assert sha == sh_git(path, "rev-parse", "HEAD") and sha != base
    assert sh_git(path, "log", "-1", "--format=%s %an") == "agent work Loopwright"
    assert await repo.changed_paths(path) == []

    commit_file(repo.path, "b.txt", "moved on\n")  # the base's own later work: not counted
    stat = await repo.diff_stat("main", "lw/run-1")
    assert stat.files == (
        FileStat("a.txt", 1, 10),
        FileStat("c.txt", 0, 10),
        FileStat("dir/new.bin", 0, 0, binary=True),
    )
    assert (stat.files_changed, stat.insertions, stat.deletions) == (3, 1, 20)
    assert await repo.read_blob("lw/run-1", "a.txt") == b"changed\n"
    assert await repo.read_blob("lw/run-1", "c.txt") is None

    listed = {w.path: w.branch for w in await repo.list_worktrees()}
    assert listed == {repo.path: "main", path.resolve(): "lw/run-1"}
    (path / "a.txt").write_text("uncommitted, removed with it\n")
    assert await repo.remove_worktree(path) is True
    assert not path.exists()
    assert await repo.remove_worktree(path) is False
    assert [w.path for w in await repo.list_worktrees()] == [repo.path]
    assert await repo.branch_head("lw/run-1") == sha  # the branch outlives its worktree
    again = await repo.add_worktree(path, "lw/run-1", "main")  # and is checked out again
    assert again.head == sha
    await repo.remove_worktree(path)
    assert await repo.delete_branch("lw/run-1") is True
    assert await repo.delete_branch("lw/run-1") is False


async def test_diff_stat_follows_renames(repo: Repository, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    await repo.add_worktree(path, "renamer", "main")
    sh_git(path, "mv", "a.txt", "moved.txt")
    await repo.commit_all(path, "rename")
    stat = await repo.diff_stat("main", "renamer")
    assert stat.files == (FileStat("moved.txt", 0, 0, old_path="a.txt"),)


async def test_a_directory_removed_behind_gits_back_is_pruned(
    repo: Repository, tmp_path: Path
) -> None:
    path = tmp_path / "gone"
    await repo.add_worktree(path, "gone", "main")
    sh_git(repo.path, "worktree", "lock", str(path))  # as a crashed `worktree add` leaves it
    assert await repo.remove_worktree(path) is True
    await repo.add_worktree(tmp_path / "gone2", "gone2", "main")
    shutil.rmtree(tmp_path / "gone2")
    assert [w.prunable for w in await repo.list_worktrees()] == [False, True]
    assert await repo.remove_worktree(tmp_path / "gone2") is True
    assert [w.path for w in await repo.list_worktrees()] == [repo.path]


@pytest.mark.parametrize("name", ["-rf", "a..b", "has space", "ends.lock", ""])
async def test_branch_names_that_git_would_not_take_are_refused(
    repo: Repository, tmp_path: Path, name: str
) -> None:
    with pytest.raises(ValueError, match="not a valid branch name"):
        await repo.add_worktree(tmp_path / "x", name, "main")


async def test_a_worktree_path_holding_another_branch_is_an_error(
    repo: Repository, tmp_path: Path
) -> None:
    await repo.add_worktree(tmp_path / "wt", "one", "main")
    with pytest.raises(GitError, match="already a worktree, on one"):
        await repo.add_worktree(tmp_path / "wt", "two", "main")
