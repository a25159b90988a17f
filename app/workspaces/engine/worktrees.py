"""A task's worktree: made the first time one of its runs uses a file tool (a run that
never touches a file costs no checkout), kept across its retries and rework, committed
when the task goes to review (so its reviewer sees the diff), and looked up by the tools
from the run they serve.

The row comes first, under the task's unique index, then the directory: `add_worktree`
is safe to repeat, so a crash between the two is repaired by the next use. A workspace
holds at most `max_worktrees` worktrees in use; a task's first one past that waits
(`WorkspaceFull`, which the tools answer as a transient failure)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import ProblemCode, Unavailable
from app.core.ids import new_id
from app.core.vocabulary import WorktreeStatus
from app.runs.store import runs as run_store
from app.runtime.keyed_locks import KeyedLocks
from app.tasks.store import tasks as task_store
from app.workspaces import store
from app.workspaces.engine import changes
from app.workspaces.engine.repos import Repos, branch_of
from app.workspaces.repo.repository import DiffStat, Repository
from app.workspaces.schemas import WorkspaceRead, WorktreeRead

# Where a task's runs may change files: before its merge, or while a conflict is resolved.
WRITABLE = frozenset({WorktreeStatus.ACTIVE, WorktreeStatus.CONFLICT})


class WorkspaceFull(Unavailable):
    """Every worktree the workspace allows is in use; one frees when its task's work is
    merged or ends."""

    code = ProblemCode.WORKSPACE_FULL

    def __init__(self, project: str, limit: int) -> None:
        super().__init__(f"workspace {project!r} has its {limit} worktrees in use")


@dataclass(frozen=True)
class Opened:
    """A worktree ready for the tools: its row, its workspace and its directory."""

    worktree: WorktreeRead
    workspace: WorkspaceRead
    repo: Repository

    @property
    def root(self) -> Path:
        return Path(self.worktree.path)

    @property
    def writable(self) -> bool:
        return self.worktree.status in WRITABLE


class Worktrees:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        repos: Repos,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sessionmaker = sessionmaker
        self._repos = repos
        self._clock = clock
        self._locks = KeyedLocks()  # one pass over a task at a time

    @property
    def repos(self) -> Repos:
        return self._repos

    async def of_run(self, run_id: str) -> Opened | None:
        """The worktree of the task the run works on; None for a run of no task, or of a
        task whose project has no workspace."""
        async with self._sessionmaker() as session:
            run = await run_store.get_run(session, run_id)
        task_id = run.metadata.get("task_id") if run is not None else None
        return await self.of_task(task_id) if isinstance(task_id, str) else None

    async def of_task(self, task_id: str) -> Opened | None:
        async with self._locks.hold(task_id):
            async with self._sessionmaker() as session:
                task = await task_store.get_task(session, task_id)
                if task is None or task.project is None:
                    return None
                workspace = await store.get_workspace(session, task.project)
                if workspace is None:
                    return None
                worktree = await store.worktree_of_task(session, task_id)
            repo = await self._repos.open(workspace.repository)
            if worktree is None:
                worktree = await self._create(task_id, workspace, repo)
            if not worktree.removed and not await _is_dir(worktree.path):
                await repo.add_worktree(Path(worktree.path), worktree.branch, workspace.base_branch)
            return Opened(worktree, workspace, repo)

    async def _create(
        self, task_id: str, workspace: WorkspaceRead, repo: Repository
    ) -> WorktreeRead:
        base_sha = await repo.branch_head(workspace.base_branch)
        if base_sha is None:
            raise Unavailable(f"branch {workspace.base_branch!r} is gone from the repository")
        root = self._repos.worktrees_root(repo, workspace.project)
        values: dict[str, Any] = {
            "id": new_id("wt"),
            "project": workspace.project,
            "task_id": task_id,
            "branch": branch_of(task_id),
            "path": str(root / task_id),
            "status": WorktreeStatus.ACTIVE,
            "base_sha": base_sha,
        }
        async with self._sessionmaker() as session, session.begin():
            await store.lock_workspace(session, workspace.project)  # counts stay exact
            found = await store.worktree_of_task(session, task_id)
            if found is not None:  # another process made it first
                return found
            if await store.worktrees_in_use(session, workspace.project) >= workspace.max_worktrees:
                raise WorkspaceFull(workspace.project, workspace.max_worktrees)
            made = await changes.insert(session, values, self._clock())
            assert made is not None  # the task's row was looked for under the lock
        await asyncio.to_thread(os.makedirs, root, exist_ok=True)
        return made

    async def commit(self, opened: Opened, message: str) -> WorktreeRead | None:
        """Commit what the task's runs changed and record the branch's diff against the
        base; None when the row changed meanwhile (the next pass commits again)."""
        worktree, repo = opened.worktree, opened.repo
        if worktree.removed or not await _is_dir(worktree.path):
            return worktree
        await repo.commit_all(opened.root, message)
        head = await repo.branch_head(worktree.branch)
        stat = await repo.diff_stat(opened.workspace.base_branch, worktree.branch)
        if head == worktree.head_sha and worktree.diff is not None:
            return worktree
        async with self._sessionmaker() as session, session.begin():
            return await changes.update(
                session, self._clock(), worktree, head_sha=head, diff=diff_document(stat)
            )


async def _is_dir(path: str) -> bool:
    return await asyncio.to_thread(os.path.isdir, path)


def diff_document(stat: DiffStat) -> dict[str, Any]:
    return {
        "files": [
            {"path": f.path, "insertions": f.insertions, "deletions": f.deletions}
            for f in stat.files
        ],
        "insertions": stat.insertions,
        "deletions": stat.deletions,
    }
