"""Putting a repository back in order after a merge was interrupted (a crash, a kill -9,
a git error): run `recover()` at start-up; a merge that takes the lock and finds a dead
holder's journal runs the same `repair()` first.

Why the base branch is never half-merged: a merge changes the base branch in one step,
`git update-ref refs/heads/BASE NEW OLD` (or `git merge --ff-only` where the base is
checked out, which ends with the same ref update). Git writes the new value to
`BASE.lock` (created with O_EXCL) and renames it over the ref: a rename is atomic, and the
old value is compared under that lock. So the ref holds OLD or NEW, never anything else,
and NEW is a complete commit whose objects were written before it. Everything else a
merge touches is the task's own branch and worktree (a rebase in progress: aborted here)
and lock files of a killed git (removed here once stale)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.workspaces.repo.merge_lock import Journal, MergeLock, MergeStage
from app.workspaces.repo.repository import Repository, real_path

STALE_LOCK_S = 10.0  # git holds a lock file for milliseconds; one this old is a dead git's


class BaseState(StrEnum):
    """Where an interrupted merge left the base branch (always one whole commit)."""

    UNCHANGED = "unchanged"  # where the merge found it: the merge had not moved it
    MERGED = "merged"  # the merge's result: it had moved it, the retry reports merged
    MOVED = "moved"  # neither: someone moved it since (the merge never writes a third value)


@dataclass(frozen=True)
class RecoveryReport:
    interrupted: Journal | None  # the journal of the merge that did not finish, if any
    aborted_rebases: tuple[Path, ...] = ()  # worktrees whose rebase in progress was undone
    removed_lock_files: tuple[Path, ...] = ()  # a killed git's `*.lock` files
    base_state: BaseState | None = None  # None when the merge had not read the base yet


async def recover(
    repo: Repository,
    *,
    managed_root: Path | None = None,
    lock_timeout_s: float = 60.0,
    stale_lock_s: float = STALE_LOCK_S,
) -> RecoveryReport:
    """Take the merge lock (waiting for a live merge to finish) and repair. Worktrees under
    `managed_root` are the service's own: a rebase found in progress in one is aborted too
    (pass it only where no agent runs, e.g. at start-up)."""
    async with MergeLock(repo.common_dir, timeout_s=lock_timeout_s) as lock:
        return await repair(
            repo, lock.left_behind, managed_root=managed_root, stale_lock_s=stale_lock_s
        )


async def repair(
    repo: Repository,
    journal: Journal | None,
    *,
    managed_root: Path | None = None,
    stale_lock_s: float = STALE_LOCK_S,
) -> RecoveryReport:
    """Undo what the journal's merge left half-done. Call it holding the merge lock."""
    await repo.git.run("worktree", "prune", cwd=repo.path)
    removed: list[Path] = []
    suspects: list[Path] = []
    if journal is not None and journal.worktree:
        suspects.append(Path(journal.worktree))
    if managed_root is not None:
        root = real_path(managed_root)
        suspects += [
            w.path
            for w in await repo.list_worktrees()
            if real_path(w.path) != repo.path and real_path(w.path).is_relative_to(root)
        ]
    aborted: list[Path] = []
    for worktree in dict.fromkeys(suspects):
        git_dir = await _git_dir(repo, worktree)
        if git_dir is None or not _rebasing(git_dir):
            continue
        removed += _remove_stale(git_dir / "index.lock", stale_lock_s)
        await _abort_rebase(repo, worktree, git_dir)
        aborted.append(worktree)
    state: BaseState | None = None
    if journal is not None and journal.base and journal.base_before:
        if journal.stage is MergeStage.PUBLISHING:
            removed += _remove_stale(
                repo.common_dir / "refs" / "heads" / f"{journal.base}.lock", stale_lock_s
            )
            if journal.synced_worktree:
                synced = await _git_dir(repo, Path(journal.synced_worktree))
                if synced is not None:
                    removed += _remove_stale(synced / "index.lock", stale_lock_s)
        head = await repo.branch_head(journal.base)
        state = (
            BaseState.UNCHANGED
            if head == journal.base_before
            else BaseState.MERGED
            if head is not None and head == journal.merged
            else BaseState.MOVED
        )
    return RecoveryReport(journal, tuple(aborted), tuple(removed), state)


async def _git_dir(repo: Repository, worktree: Path) -> Path | None:
    try:
        result = await repo.git.run("rev-parse", "--absolute-git-dir", cwd=worktree, check=False)
    except OSError:  # the worktree's directory is gone
        return None
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def _rebasing(git_dir: Path) -> bool:
    return (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()


async def _abort_rebase(repo: Repository, worktree: Path, git_dir: Path) -> None:
    """`rebase --abort` puts the branch and files back. A rebase killed while writing its
    state may not abort; then forget it (`--quit`) and check the branch out again: the
    branch ref itself only moves when a rebase finishes."""
    head_name = ""
    for state in ("rebase-merge", "rebase-apply"):
        name_file = git_dir / state / "head-name"
        if name_file.is_file():
            head_name = name_file.read_text().strip()
    result = await repo.git.run("rebase", "--abort", cwd=worktree, check=False)
    if result.returncode == 0:
        return
    await repo.git.run("rebase", "--quit", cwd=worktree, check=False)
    if head_name.startswith("refs/heads/"):
        branch = head_name.removeprefix("refs/heads/")
        await repo.git.run("checkout", "--force", "--quiet", branch, "--", cwd=worktree)


def _remove_stale(lock_file: Path, stale_lock_s: float) -> list[Path]:
    try:
        age = time.time() - lock_file.stat().st_mtime
    except FileNotFoundError:
        return []
    if age < stale_lock_s:
        return []  # perhaps a live git's (a person's, in their checkout): not ours to take
    lock_file.unlink(missing_ok=True)
    return [lock_file]
