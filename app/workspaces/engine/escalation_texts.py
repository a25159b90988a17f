"""What a merge that does not go through says to whoever resolves it: a person's question
and the summary beside it (an approval of kind `merge`), or the review agent's brief."""

from __future__ import annotations

from app.core.vocabulary import MergeOutcome
from app.workspaces.schemas import MergeResult, WorkspaceRead, WorktreeRead


def question(worktree: WorktreeRead, result: MergeResult) -> str:
    if result.outcome is MergeOutcome.SEMANTIC_ISSUES:
        count = len(result.issues)
        issues = "1 semantic issue" if count == 1 else f"{count} semantic issues"
        return (
            f"Merge {worktree.branch} despite {issues}? "
            "Approve to merge it as it is, reject to drop it."
        )
    return (
        f"{worktree.branch} does not merge ({result.outcome.value}). Resolve it in its "
        "worktree, then approve to merge; reject to drop it."
    )


def summary(worktree: WorktreeRead, workspace: WorkspaceRead, result: MergeResult) -> str:
    lines = [f"Worktree {worktree.path}, branch {worktree.branch} onto {workspace.base_branch}."]
    if result.detail:
        lines.append(result.detail)
    lines += [f"Conflict in {c.path}" for c in result.conflicts]
    lines += [f"{i.check.value} {i.path}:{i.line or '?'} {i.message}" for i in result.issues]
    return "\n".join(lines)


def conflict_brief(worktree: WorktreeRead, workspace: WorkspaceRead, result: MergeResult) -> str:
    hunks = "\n\n".join(f"{c.path}:\n" + "\n".join(c.hunks) for c in result.conflicts)
    # Tried again with markers left (an earlier run's, or a person's), the merge has no
    # hunks to give, only the files that still hold them.
    hunks = hunks or result.detail or ""
    return (
        f"The work of task {worktree.task_id} (branch {worktree.branch}) conflicts with "
        f"{workspace.base_branch}. Its worktree (your file tools' root) now holds that "
        "work laid on the base, the conflicts marked in these files (diff3 markers: the "
        "base's side, the common ancestor's, the task's). Edit each file so that it keeps "
        "both sides' intent and no marker remains; run the tests if you can. The merge "
        f"is tried again when you finish.\n\n{hunks}"
    )
