"""One merge in a process of its own, for the crash tests: `python -m
tests.workspaces.merge_child REPO WORKTREE BRANCH BASE` prints the result's status. With
`LOOPWRIGHT_CRASH_AT` naming a merge step it dies there by SIGKILL instead."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from app.workspaces.repo.git import GitRunner
from app.workspaces.repo.merge import Merger
from app.workspaces.repo.repository import Repository


async def main(repo_path: str, worktree: str, branch: str, base: str) -> None:
    repo = await Repository.open(Path(repo_path), GitRunner())
    result = await Merger(repo).merge(Path(worktree), branch, base, f"Merge {branch}")
    print(result.status.value)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
