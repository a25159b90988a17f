"""Workspaces (`/v1/projects/{project}/workspace`, `/v1/workspaces`) and the worktrees of
their tasks (`/v1/worktrees`): where agents change a repository's code, and how it is
merged back."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.core.fields import Name
from app.core.vocabulary import (
    MAX_WORKTREES,
    ConflictEscalation,
    MergeOrder,
    MergeOutcome,
    SemanticCheck,
    WorktreeStatus,
)
from app.events.schemas import PersistedEvent, Stamped

# A branch name's characters; git's own rules (`check-ref-format`) are checked when the
# workspace is set, against the repository.
BranchName = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")
]
# A program `run_command` may run: a name looked up on PATH, never a path.
ProgramName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,63}$")]


class WorkspaceSet(BaseModel):
    """A project's workspace: its tasks' runs work on `repository` in worktrees of their own,
    branched from `base_branch`, and their approved work is merged back in order."""

    model_config = ConfigDict(extra="forbid")

    repository: str = Field(
        min_length=1,
        max_length=4_096,
        description="The absolute path of a git repository on the service's machine.",
        examples=["/srv/repos/atlas"],
    )
    base_branch: BranchName = Field("main", description="Where worktrees branch and merge.")
    max_worktrees: int = Field(
        4, ge=1, le=MAX_WORKTREES, description="Worktrees at once; more tasks wait `ready`."
    )
    merge_order: MergeOrder = Field(
        MergeOrder.COMPLETION,
        description="`completion`: as tasks are approved; `priority`: the most urgent "
        "approved task first; `manual`: when `POST /v1/worktrees/{id}/merge` asks.",
    )
    escalation: ConflictEscalation = Field(
        ConflictEscalation.PERSON,
        description="Who resolves a merge that conflicts: a person (an approval of kind "
        "`merge`), or `review_agent_id` in a run given the conflict.",
    )
    review_agent_id: Name | None = Field(None, description="The agent `agent` escalates to.")
    cleanup_after_merge: bool = Field(
        True, description="Remove a worktree's directory once it is merged (its branch stays)."
    )
    commands: list[ProgramName] = Field(
        default_factory=list,
        max_length=100,
        description="The programs `run_command` may run (by name; no shell).",
        examples=[["pytest", "python", "ruff"]],
    )
    command_timeout_s: int = Field(120, ge=1, le=3_600)
    output_limit_bytes: int = Field(65_536, ge=1_024, le=4 * 1024 * 1024)
    semantic_checks: bool = Field(
        True,
        description="Check merged Python files for semantic conflicts (missing names, "
        "broken call sites, duplicate definitions, conflicting imports) before a merge "
        "reaches the base branch.",
    )

    @field_validator("repository")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError("must be an absolute path")
        if "\x00" in path:
            raise ValueError("must not hold a NUL character")
        return path

    @field_validator("commands")
    @classmethod
    def _each_once(cls, commands: list[str]) -> list[str]:
        repeated = sorted({c for c in commands if commands.count(c) > 1})
        if repeated:
            raise ValueError(f"names a program more than once: {', '.join(repeated)}")
        return commands


class WorkspaceRead(WorkspaceSet):
    project: str
    worktrees_in_use: int = Field(description="Its worktrees not yet merged or ended.")
    version: int
    created_at: datetime
    updated_at: datetime


class FileChange(BaseModel):
    path: str
    insertions: int
    deletions: int


class DiffStat(BaseModel):
    """What a worktree's branch changes against the base it was made from."""

    files: list[FileChange]
    insertions: int
    deletions: int


class ConflictFile(BaseModel):
    path: str
    hunks: list[str] = Field(description="Each conflicting hunk, with its conflict markers.")


class SemanticIssue(BaseModel):
    check: SemanticCheck
    path: str
    line: int | None
    name: str
    message: str


class MergeResult(BaseModel):
    """The last attempt to merge a worktree's branch."""

    outcome: MergeOutcome
    merged_sha: str | None = Field(None, description="The base branch after the merge.")
    conflicts: list[ConflictFile] = Field(default_factory=list)
    issues: list[SemanticIssue] = Field(default_factory=list)
    skipped: list[str] = Field(
        default_factory=list, description="Files the semantic checks left out, and why."
    )
    detail: str | None = None
    accepted_by: str | None = Field(
        None, description="Who accepted its semantic issues: it merges without the checks."
    )
    escalation_run_id: str | None = Field(
        None, description="The review agent's run given the conflict (escalation `agent`)."
    )
    agent_attempts: int = Field(0, description="Review agent runs so far for this merge.")
    at: datetime


class WorktreeRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(examples=["wt_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    project: str
    task_id: str
    branch: str
    path: str
    status: WorktreeStatus
    base_sha: str
    head_sha: str | None
    diff: DiffStat | None
    merge: MergeResult | None
    approval_id: str | None = Field(description="The open escalation, if any.")
    removed: bool = Field(description="Its directory was cleaned up (its branch stays).")
    queued_at: datetime | None
    merged_at: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime


class DiffFile(FileChange):
    binary: bool = Field(False, description="A binary file: no line counts.")
    old_path: str | None = Field(None, description="Where a renamed or copied file came from.")


class DiffSource(StrEnum):
    """What a worktree's diff shows."""

    BRANCH = "branch"  # its branch's commits since it left the base branch
    MERGE = "merge"  # merged: what its merge commit brought to the base branch
    # In conflict: its committed work as it was before the merge was tried (its branch now
    # holds nothing of its own: the work is laid on the base in the worktree, marked).
    BEFORE_CONFLICT = "before_conflict"


class WorktreeDiff(BaseModel):
    """A worktree's committed work as a unified diff (`GET /v1/worktrees/{id}/diff`)."""

    worktree_id: str
    branch: str
    base_branch: str
    source: DiffSource
    base: str = Field(
        description="What the work is compared with (from where they parted: `git diff "
        "base...head`): `refs/heads/<base_branch>`, or for a merge its merge commit's "
        "first parent (the base before the merge).",
        examples=["refs/heads/main"],
    )
    head: str = Field(description="The commit of the work: its branch's, or as recorded.")
    files: list[DiffFile] = Field(description="Each file changed, in the diff's order.")
    insertions: int
    deletions: int
    text: str = Field(description="`git diff base...head`, cut at `limit_bytes` on a line.")
    size_bytes: int = Field(description="The whole diff's size.")
    limit_bytes: int
    truncated: bool = Field(description="`text` is the diff's start: it was over the limit.")


class WorktreeEventType(StrEnum):
    """Events of `GET /v1/worktrees/events`."""

    CREATED = "worktree.created"  # a task's first file tool call made it
    COMMITTED = "worktree.committed"  # its task's changes committed: a new diff
    TRANSITIONED = "worktree.transitioned"  # its status moved (queued, merged, conflict, ...)
    REMOVED = "worktree.removed"  # its directory was cleaned up


class WorktreeEventData(Stamped):
    worktree: WorktreeRead = Field(description="The worktree after the change.")
    from_: WorktreeStatus | None = Field(
        None, alias="from", description="`worktree.transitioned`: the status it left."
    )
    to: WorktreeStatus | None = Field(
        None, description="`worktree.transitioned`: the status it reached."
    )


class WorktreeEvent(PersistedEvent):
    """One event of `GET /v1/worktrees/events`."""

    event: WorktreeEventType
    data: WorktreeEventData
