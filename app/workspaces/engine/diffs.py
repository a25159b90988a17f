"""A worktree's diff (`GET /v1/worktrees/{id}/diff`, the dashboard's worktree page): what
its branch changed since it left the base branch, read from the repository when asked.

A merged branch has nothing left against the base (the base holds it), so a worktree
merged by a merge commit whose second parent is still its branch shows what that merge
brought: the diff between the merge's parents. A conflicting one's branch was reset to the
base (its work laid on it in the worktree, the conflicts marked), so it shows its work as
last committed (`head_sha`). A branch deleted by hand, a workspace removed or a repository
moved away leave nothing to read: a problem says which."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from app.core.errors import Conflict, ProblemCode
from app.core.vocabulary import WorktreeStatus
from app.workspaces.engine.repos import Repos
from app.workspaces.repo.errors import NotARepository
from app.workspaces.repo.repository import Repository
from app.workspaces.schemas import DiffFile, DiffSource, WorkspaceRead, WorktreeDiff, WorktreeRead

DIFF_LIMIT_BYTES = 512 * 1024  # the default cut of a diff's text
MAX_DIFF_LIMIT_BYTES = 4 * 1024 * 1024


class DiffGap(StrEnum):
    """Why a worktree's diff cannot be read."""

    BRANCH_GONE = "branch_gone"  # its branch is no longer in the repository
    WORKSPACE_GONE = "workspace_gone"  # its project has no workspace: no repository known
    REPOSITORY_GONE = "repository_gone"  # the workspace's path is not a git repository now


class WorktreeDiffUnavailable(Conflict):
    """The worktree's diff cannot be read from its repository."""

    code = ProblemCode.WORKTREE_DIFF_UNAVAILABLE

    def __init__(self, worktree: WorktreeRead, reason: DiffGap, detail: str) -> None:
        super().__init__(f"worktree {worktree.id}: {detail}")
        self.reason = reason
        self.branch = worktree.branch

    def extensions(self) -> dict[str, Any]:
        return {"reason": self.reason.value, "branch": self.branch}


async def worktree_diff(
    repos: Repos,
    worktree: WorktreeRead,
    workspace: WorkspaceRead | None,
    limit_bytes: int = DIFF_LIMIT_BYTES,
) -> WorktreeDiff:
    """The worktree's committed work against its base, the text cut at `limit_bytes`."""
    if workspace is None:
        raise WorktreeDiffUnavailable(
            worktree,
            DiffGap.WORKSPACE_GONE,
            f"project {worktree.project!r} has no workspace now, so no repository to read",
        )
    try:
        repo = await repos.open(workspace.repository)
    except NotARepository as exc:
        raise WorktreeDiffUnavailable(worktree, DiffGap.REPOSITORY_GONE, str(exc)) from None
    head = await repo.branch_head(worktree.branch)
    if head is None:
        raise WorktreeDiffUnavailable(
            worktree,
            DiffGap.BRANCH_GONE,
            f"its branch {worktree.branch!r} is no longer in {workspace.repository}",
        )
    source, base = DiffSource.BRANCH, f"refs/heads/{workspace.base_branch}"
    merged_onto = await _merged_onto(repo, worktree, head)
    recorded = worktree.head_sha
    if merged_onto is not None:
        source, base = DiffSource.MERGE, merged_onto
    elif worktree.status is WorktreeStatus.CONFLICT and recorded and recorded != head:
        source, head = DiffSource.BEFORE_CONFLICT, recorded
    stat = await repo.diff_stat_since(base, head)
    text = await repo.diff_text(base, head, limit_bytes)
    return WorktreeDiff(
        worktree_id=worktree.id,
        branch=worktree.branch,
        base_branch=workspace.base_branch,
        base=base,
        head=head,
        source=source,
        files=[
            DiffFile(
                path=f.path,
                insertions=f.insertions,
                deletions=f.deletions,
                binary=f.binary,
                old_path=f.old_path,
            )
            for f in stat.files
        ],
        insertions=stat.insertions,
        deletions=stat.deletions,
        text=text.text,
        size_bytes=text.size_bytes,
        limit_bytes=limit_bytes,
        truncated=text.truncated,
    )


async def _merged_onto(repo: Repository, worktree: WorktreeRead, head: str) -> str | None:
    """For a worktree merged by a merge commit of its branch as it is now, the commit that
    merge was made on (its first parent); None otherwise (a fast-forward, or the branch
    moved since)."""
    merged_sha = worktree.merge.merged_sha if worktree.merge is not None else None
    if worktree.status is not WorktreeStatus.MERGED or merged_sha is None:
        return None
    if await repo.second_parent(merged_sha) != head:
        return None
    return f"{merged_sha}^1"
