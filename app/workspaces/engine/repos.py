"""The repositories this process works on, opened once each, with one git runner (and so
one bound on git processes) for all of them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from app.core.config import WorkspaceSettings
from app.workspaces.repo.git import GitPolicy, GitRunner
from app.workspaces.repo.repository import Repository

WORKTREES_IN_GIT_DIR = "loopwright-worktrees"


class Repos:
    def __init__(self, settings: WorkspaceSettings) -> None:
        self._settings = settings
        self.git = GitRunner(
            GitPolicy(max_concurrent=settings.max_git_processes, timeout_s=settings.git_timeout_s)
        )
        self._open: dict[str, Repository] = {}

    async def open(self, path: str) -> Repository:
        """The repository at `path`; NotARepository when there is none."""
        found = self._open.get(path)
        if found is None:
            found = await Repository.open(Path(path), self.git)
            self._open[path] = found
        return found

    def worktrees_root(self, repo: Repository, project: str) -> Path:
        """Where the project's task worktrees are made."""
        if self._settings.worktrees_dir is None:
            return repo.common_dir / WORKTREES_IN_GIT_DIR
        # A project name may hold anything; its digest is a safe directory name.
        digest = hashlib.sha256(project.encode()).hexdigest()[:16]
        return self._settings.worktrees_dir / digest


def branch_of(task_id: str) -> str:
    return f"loopwright/{task_id}"
