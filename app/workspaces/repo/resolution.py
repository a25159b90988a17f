"""Preparing a conflicting branch for whoever resolves it (a person, or a review agent):
its work is laid again on the base branch's tip as uncommitted changes, the conflicting
hunks marked in the files (diff3 style, the common ancestor's text included). Resolved
and committed, the branch is one commit on the base, and its next merge is clean.

The branch's earlier commits are left behind (the caller keeps their tip); a squash is
the price of a branch that merges after its resolution, since replaying those commits
would meet the same conflict again."""

from __future__ import annotations

from pathlib import Path

from app.workspaces.repo.repository import Repository


async def restage_on_base(repo: Repository, worktree: Path, branch_head: str, base: str) -> None:
    """Reset the worktree's branch to the base's tip and merge `branch_head`'s changes in
    without committing; conflicts stay marked in the files."""
    git = repo.git
    await git.run("reset", "--hard", "--quiet", f"refs/heads/{base}", cwd=worktree)
    # Exit 1 on conflicts, which is what is wanted here: the markers are the work to do.
    await git.run("merge", "--squash", "--no-commit", branch_head, cwd=worktree, check=False)


async def marked_files(repo: Repository, base: str, branch: str) -> list[str]:
    """Files whose change on `branch` still holds conflict markers (`git diff --check`)."""
    result = await repo.git.run(
        "diff", "--check", f"refs/heads/{base}...refs/heads/{branch}", cwd=repo.path, check=False
    )
    found = []
    for line in result.stdout.splitlines():
        path, _, problem = line.partition(":")
        if "conflict marker" in problem and path not in found:
            found.append(path)
    return found
