"""Merging a task's branch into the base branch, one merge per repository at a time: rebase
the branch onto the base inside the task's own worktree, then move the base branch in one
atomic step. Nothing is checked out in anyone else's working tree, except where the base
branch is checked out (see `_publish`).

Two steps, so the engine can run semantic checks between them: `rebase()` answers READY
(or CONFLICT, ALREADY_MERGED), `publish()` moves the base. `merge()` does both under one
hold of the lock, with an optional check. A READY result may wait for a person: publish
refuses it (BASE_MOVED, BRANCH_MOVED) if the base or the branch moved since.

Merge commits by default (MergeMode.MERGE_COMMIT, made with `commit-tree`, no checkout):
after the rebase the base could simply fast-forward, but a merge commit per task keeps the
task as one unit on the base's first-parent history (`git log --first-parent` lists the
merged tasks, `git revert -m 1` undoes one), its message naming the task, while the
rebase keeps that history free of criss-cross merges. FAST_FORWARD is there for linear
history."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from app.core.crashpoints import crash_point
from app.workspaces.repo.conflicts import ConflictFile, ConflictLimits, collect_conflicts
from app.workspaces.repo.errors import GitError, WorktreeDirty
from app.workspaces.repo.merge_lock import MergeLock, MergeStage
from app.workspaces.repo.recovery import repair
from app.workspaces.repo.repository import Repository, real_path


class MergeMode(StrEnum):
    MERGE_COMMIT = "merge_commit"  # a merge commit on the base: the task as one unit
    FAST_FORWARD = "fast_forward"  # the base moves to the rebased branch: linear history


class MergeStatus(StrEnum):
    """A merge's outcome. Only MERGED changed the base branch."""

    READY = "ready"  # rebased onto the base, checks may run; `publish` moves the base
    MERGED = "merged"  # the base branch now holds the branch's work
    ALREADY_MERGED = "already_merged"  # nothing to move: the base holds the branch's work
    CONFLICT = "conflict"  # textual conflicts (see `conflicts`); branch and base unchanged
    REJECTED = "rejected"  # the caller's check refused; the branch stays rebased
    BASE_MOVED = "base_moved"  # the base changed since the rebase: rebase again
    BRANCH_MOVED = "branch_moved"  # the branch changed since the rebase: rebase again
    BASE_CHECKED_OUT_DIRTY = "base_checked_out_dirty"  # see `detail`; nothing moved


@dataclass(frozen=True)
class MergeResult:
    status: MergeStatus
    worktree: Path
    branch: str
    base: str
    base_before: str  # the base branch's commit when the merge looked
    base_after: str  # its commit now (== base_before unless MERGED)
    head: str  # the branch's commit now (after a rebase, the rebased tip)
    conflicts: tuple[ConflictFile, ...] = ()
    stopped_at: str | None = None  # CONFLICT: the branch commit whose replay conflicted
    detail: str = ""


Check = Callable[[MergeResult], Awaitable[bool]]


@dataclass(frozen=True)
class MergePolicy:
    mode: MergeMode = MergeMode.MERGE_COMMIT
    lock_timeout_s: float = 60.0
    conflict_limits: ConflictLimits = field(default_factory=ConflictLimits)


class Merger:
    """The merges of one repository."""

    def __init__(self, repo: Repository, policy: MergePolicy | None = None) -> None:
        self.repo = repo
        self.policy = policy or MergePolicy()

    async def rebase(self, worktree: Path, branch: str, base: str) -> MergeResult:
        async with self._lock() as lock:
            return await self._rebase(lock, real_path(worktree), branch, base)

    async def publish(self, ready: MergeResult, message: str) -> MergeResult:
        if ready.status is not MergeStatus.READY:
            raise ValueError(f"only a ready merge can be published, not {ready.status}")
        async with self._lock() as lock:
            return await self._publish(lock, ready, message)

    async def merge(
        self, worktree: Path, branch: str, base: str, message: str, check: Check | None = None
    ) -> MergeResult:
        """Rebase, check, publish, under one hold of the lock. Safe to repeat after a crash
        at any point: a branch already merged answers ALREADY_MERGED."""
        async with self._lock() as lock:
            ready = await self._rebase(lock, real_path(worktree), branch, base)
            if ready.status is not MergeStatus.READY:
                return ready
            if check is not None and not await check(ready):
                return replace(ready, status=MergeStatus.REJECTED)
            return await self._publish(lock, ready, message)

    def _lock(self) -> MergeLock:
        return _RepairingLock(self.repo, self.policy.lock_timeout_s)

    async def _rebase(self, lock: MergeLock, worktree: Path, branch: str, base: str) -> MergeResult:
        git, repo = self.repo.git, self.repo
        base_sha = await _head(repo, base)
        branch_sha = await _head(repo, branch)
        on = await git.run("symbolic-ref", "--quiet", "--short", "HEAD", cwd=worktree, check=False)
        if on.stdout.strip() != branch:
            raise GitError(("git", "rebase"), 128, f"{worktree} is not on branch {branch}")
        dirty = await repo.changed_paths(worktree)
        if dirty:
            raise WorktreeDirty(worktree, dirty)
        result = MergeResult(
            MergeStatus.READY, worktree, branch, base, base_sha, base_sha, branch_sha
        )
        if await repo.is_ancestor(branch_sha, base_sha):
            return replace(result, status=MergeStatus.ALREADY_MERGED)
        lock.advance(
            stage=MergeStage.REBASING,
            worktree=str(worktree),
            branch=branch,
            base=base,
            base_before=base_sha,
            branch_before=branch_sha,
        )
        crash_point("merge_rebasing")
        # Onto the commit, not the name: what was checked is what is published.
        rebased = await git.run("rebase", "--quiet", base_sha, cwd=worktree, check=False)
        if rebased.returncode != 0:
            conflicts = await collect_conflicts(git, worktree, self.policy.conflict_limits)
            if not conflicts:
                raise GitError(("git", "rebase", base_sha), rebased.returncode, rebased.stderr)
            stopped = await git.run(
                "rev-parse", "--verify", "--quiet", "REBASE_HEAD", cwd=worktree, check=False
            )
            crash_point("merge_rebase_stopped")
            await git.run("rebase", "--abort", cwd=worktree)
            return replace(
                result,
                status=MergeStatus.CONFLICT,
                conflicts=conflicts,
                stopped_at=stopped.stdout.strip() or None,
                detail=f"{len(conflicts)} file(s) conflict with {base}",
            )
        head = await git.output("rev-parse", "HEAD", cwd=worktree)
        crash_point("merge_rebased")
        if head == base_sha:  # every commit was already in the base (dropped as empty)
            return replace(result, status=MergeStatus.ALREADY_MERGED, head=head)
        return replace(result, head=head)

    async def _publish(self, lock: MergeLock, ready: MergeResult, message: str) -> MergeResult:
        git, repo = self.repo.git, self.repo
        base_now = await _head(repo, ready.base)
        if base_now != ready.base_before:
            return replace(ready, status=MergeStatus.BASE_MOVED, base_after=base_now)
        if await _head(repo, ready.branch) != ready.head:
            return replace(ready, status=MergeStatus.BRANCH_MOVED)
        if self.policy.mode is MergeMode.FAST_FORWARD:
            merged = ready.head
        else:
            tree = await git.output("rev-parse", f"{ready.head}^{{tree}}", cwd=repo.path)
            merged = await git.output(
                "commit-tree",
                tree,
                "-p",
                ready.base_before,
                "-p",
                ready.head,
                "-m",
                message,
                cwd=repo.path,
            )
        checked_out = next(
            (w.path for w in await repo.list_worktrees() if w.branch == ready.base and not w.bare),
            None,
        )
        lock.advance(
            stage=MergeStage.PUBLISHING,
            worktree=str(ready.worktree),
            branch=ready.branch,
            base=ready.base,
            base_before=ready.base_before,
            branch_before=ready.head,
            merged=merged,
            synced_worktree=str(checked_out) if checked_out else None,
        )
        crash_point("merge_publishing")
        if checked_out is None:
            moved = await git.run(
                "update-ref",
                "-m",
                f"loopwright: merge {ready.branch}",
                f"refs/heads/{ready.base}",
                merged,
                ready.base_before,
                cwd=repo.path,
                check=False,
            )
            failure = moved.stderr
        else:
            # The base is someone's checked-out branch. Moving the ref alone would leave
            # that checkout's index and files at the old commit, showing the merge as
            # staged changes undone (and a `commit -a` there would revert it). So it is
            # moved as its owner would, `merge --ff-only` there: files, index, then the
            # ref (compare-and-set like update-ref); refused, changing nothing, when local
            # changes would be overwritten.
            moved = await git.run(
                "merge", "--ff-only", "--quiet", merged, cwd=checked_out, check=False
            )
            failure = moved.stderr
        base_after = await _head(repo, ready.base)
        if moved.returncode != 0:
            if base_after != ready.base_before:
                return replace(ready, status=MergeStatus.BASE_MOVED, base_after=base_after)
            if checked_out is not None:
                return replace(
                    ready,
                    status=MergeStatus.BASE_CHECKED_OUT_DIRTY,
                    detail=f"{ready.base} is checked out in {checked_out}: {failure.strip()}",
                )
            raise GitError(
                ("git", "update-ref", f"refs/heads/{ready.base}"), moved.returncode, failure
            )
        crash_point("merge_published")
        return replace(ready, status=MergeStatus.MERGED, base_after=base_after)


class _RepairingLock(MergeLock):
    """The merge lock, repairing what a dead holder left before the new holder starts."""

    def __init__(self, repo: Repository, timeout_s: float) -> None:
        super().__init__(repo.common_dir, timeout_s=timeout_s)
        self.repo = repo

    async def __aenter__(self) -> MergeLock:
        await super().__aenter__()
        try:
            if self.left_behind is not None:
                await repair(self.repo, self.left_behind)
        except BaseException as error:
            await self.__aexit__(type(error), error, error.__traceback__)
            raise
        return self


async def _head(repo: Repository, branch: str) -> str:
    sha = await repo.branch_head(branch)
    if sha is None:
        raise GitError(("git", "rev-parse", f"refs/heads/{branch}"), 128, f"no branch {branch}")
    return sha
