"""kill -9 during a merge, at each of its steps: the repository stays consistent (the base
branch holds its old commit or the merge's, nothing else), recovery finds and repairs
what the merge left, and the merge completes when tried again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.workspaces.repo.merge import Merger, MergeStatus
from app.workspaces.repo.merge_lock import LOCK_NAME, MergeStage
from app.workspaces.repo.recovery import BaseState, recover
from app.workspaces.repo.repository import Repository
from tests.workspaces.conftest import assert_consistent, commit_file, sh_git

ROOT = Path(__file__).resolve().parents[2]

# point -> (the journal's stage, where the base is after the kill)
POINTS = {
    "merge_rebasing": (MergeStage.REBASING, BaseState.UNCHANGED),
    "merge_rebased": (MergeStage.REBASING, BaseState.UNCHANGED),
    "merge_publishing": (MergeStage.PUBLISHING, BaseState.UNCHANGED),
    "merge_published": (MergeStage.PUBLISHING, BaseState.MERGED),
}


def _merge_in_a_child(
    repo: Path, worktree: Path, crash_at: str | None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LOOPWRIGHT_CRASH_AT", None)
    if crash_at:
        env["LOOPWRIGHT_CRASH_AT"] = crash_at
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.workspaces.merge_child",
            str(repo),
            str(worktree),
            "task",
            "main",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _setup(repo: Repository, tmp_path: Path, *, conflicting: bool) -> Path:
    """A task branch with two commits, and a later commit on the base that the rebase
    must replay them onto (on the same line of b.txt when `conflicting`)."""
    worktree = tmp_path / "task"
    await repo.add_worktree(worktree, "task", "main")
    commit_file(worktree, "a.txt", "a by the task\n")
    commit_file(worktree, "b.txt", "b by the task\n")
    commit_file(repo.path, "b.txt" if conflicting else "c.txt", "the base moved on\n")
    return worktree


@pytest.mark.parametrize(
    "checked_out", [True, False], ids=["base-checked-out", "base-not-checked-out"]
)
@pytest.mark.parametrize("point", list(POINTS))
async def test_a_merge_killed_at_each_step_recovers_and_completes(
    repo: Repository, tmp_path: Path, point: str, checked_out: bool
) -> None:
    worktree = await _setup(repo, tmp_path, conflicting=False)
    if not checked_out:  # then the base moves by update-ref alone
        sh_git(repo.path, "checkout", "-q", "--detach")
    base = sh_git(repo.path, "rev-parse", "main")

    killed = _merge_in_a_child(repo.path, worktree, point)

    assert killed.returncode == -signal.SIGKILL, killed.stderr
    stage, state = POINTS[point]
    after_kill = sh_git(repo.path, "rev-parse", "main")
    assert (after_kill == base) is (state is BaseState.UNCHANGED)
    if after_kill != base:  # the merge's commit, whole: the base and the rebased branch
        assert sh_git(repo.path, "rev-parse", "main^1") == base
        assert sh_git(repo.path, "rev-parse", "main^2") == sh_git(repo.path, "rev-parse", "task")
    assert (repo.common_dir / LOCK_NAME).read_text() != ""  # the dead holder's journal

    report = await recover(repo)

    assert report.interrupted is not None
    assert report.interrupted.stage is stage and report.interrupted.branch == "task"
    assert report.interrupted.base_before == base
    assert report.base_state is state
    assert report.aborted_rebases == ()
    assert (repo.common_dir / LOCK_NAME).read_text() == ""
    assert_consistent(repo.path, worktree)

    retried = _merge_in_a_child(repo.path, worktree, None)

    assert retried.returncode == 0, retried.stderr
    expected = MergeStatus.ALREADY_MERGED if state is BaseState.MERGED else MergeStatus.MERGED
    assert retried.stdout.strip() == expected.value
    merged = sh_git(repo.path, "rev-parse", "main")
    assert sh_git(repo.path, "rev-parse", "main^1") == base
    assert sh_git(repo.path, "rev-parse", "main^2") == sh_git(repo.path, "rev-parse", "task")
    assert sh_git(repo.path, "rev-list", "--count", f"{base}..task") == "2"  # both commits
    for name, text in [
        ("a.txt", "a by the task"),
        ("b.txt", "b by the task"),
        ("c.txt", "the base moved on"),
    ]:
        assert sh_git(repo.path, "show", f"{merged}:{name}") == text
    if checked_out:
        assert (repo.path / "c.txt").read_text() == "the base moved on\n"
        assert (repo.path / "a.txt").read_text() == "a by the task\n"
    assert_consistent(repo.path, worktree)


async def test_a_merge_killed_in_a_stopped_rebase_is_aborted_by_recovery(
    repo: Repository, tmp_path: Path
) -> None:
    worktree = await _setup(repo, tmp_path, conflicting=True)
    base = sh_git(repo.path, "rev-parse", "main")
    branch = sh_git(repo.path, "rev-parse", "task")

    killed = _merge_in_a_child(repo.path, worktree, "merge_rebase_stopped")

    assert killed.returncode == -signal.SIGKILL
    git_dir = Path(sh_git(worktree, "rev-parse", "--absolute-git-dir"))
    assert (git_dir / "rebase-merge").is_dir()  # the conflict is still on disk
    assert sh_git(repo.path, "rev-parse", "main") == base

    report = await recover(repo)

    assert report.aborted_rebases == (worktree.resolve(),)
    assert report.base_state is BaseState.UNCHANGED
    assert sh_git(repo.path, "rev-parse", "task") == branch
    assert sh_git(worktree, "symbolic-ref", "--short", "HEAD") == "task"
    assert_consistent(repo.path, worktree)
    retried = _merge_in_a_child(repo.path, worktree, None)
    assert retried.stdout.strip() == MergeStatus.CONFLICT.value
    assert sh_git(repo.path, "rev-parse", "main") == base
    assert_consistent(repo.path, worktree)


async def test_the_next_merge_repairs_what_a_dead_one_left_without_a_recovery_pass(
    repo: Repository, tmp_path: Path
) -> None:
    worktree = await _setup(repo, tmp_path, conflicting=True)
    base = sh_git(repo.path, "rev-parse", "main")
    assert _merge_in_a_child(repo.path, worktree, "merge_rebase_stopped").returncode == -9

    result = await Merger(repo).merge(worktree, "task", "main", "m")

    assert result.status is MergeStatus.CONFLICT and result.base_after == base
    assert [c.path for c in result.conflicts] == ["b.txt"]
    assert_consistent(repo.path, worktree)


async def test_recovery_removes_a_killed_gits_stale_lock_files(
    repo: Repository, tmp_path: Path
) -> None:
    worktree = await _setup(repo, tmp_path, conflicting=False)
    assert _merge_in_a_child(repo.path, worktree, "merge_publishing").returncode == -9
    # As a git killed inside `update-ref` would leave them (the machine went down).
    ref_lock = repo.common_dir / "refs" / "heads" / "main.lock"
    index_lock = repo.common_dir / "index.lock"
    for lock in (ref_lock, index_lock):
        lock.write_text("")
        old = time.time() - 60
        os.utime(lock, (old, old))

    report = await recover(repo)

    assert set(report.removed_lock_files) == {ref_lock, index_lock}
    assert not ref_lock.exists() and not index_lock.exists()
    assert (await Merger(repo).merge(worktree, "task", "main", "m")).status is MergeStatus.MERGED
    assert_consistent(repo.path, worktree)


async def test_recovery_leaves_a_fresh_lock_file_alone(repo: Repository, tmp_path: Path) -> None:
    worktree = await _setup(repo, tmp_path, conflicting=False)
    assert _merge_in_a_child(repo.path, worktree, "merge_publishing").returncode == -9
    ref_lock = repo.common_dir / "refs" / "heads" / "main.lock"
    ref_lock.write_text("")  # could be a person's git, this very moment
    report = await recover(repo)
    assert report.removed_lock_files == () and ref_lock.exists()


async def test_recovery_aborts_rebases_in_managed_worktrees_only(
    repo: Repository, tmp_path: Path
) -> None:
    managed = tmp_path / "managed"
    ours, theirs = managed / "ours", tmp_path / "theirs"
    for path in (ours, theirs):
        await repo.add_worktree(path, path.name, "main")
        commit_file(path, "a.txt", f"{path.name}\n")
    commit_file(repo.path, "a.txt", "base\n")
    for path in (ours, theirs):
        sh_git(path, "rebase", "main", check=False)  # stops on the conflict

    report = await recover(repo, managed_root=managed)

    assert report.interrupted is None and report.aborted_rebases == (ours.resolve(),)
    assert_consistent(repo.path, ours)
    assert sh_git(theirs, "status", "--porcelain") == "UU a.txt"  # not ours to touch
