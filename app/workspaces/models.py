"""Workspaces: a project's git repository that agents change, each task in a
worktree of its own, merged back in order."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Boolean, CheckConstraint, DateTime, Index, Integer, Table, Text, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.vocabulary import MAX_WORKTREES, ConflictEscalation, MergeOrder, WorktreeStatus
from app.db.base import Base
from app.db.columns import now_column, one_of


class Workspace(Base):
    """A project's workspace settings: the repository, its base branch, how many worktrees
    may exist at once, the merge order, who resolves conflicts, and what `run_command` may
    run there."""

    __tablename__ = "workspaces"
    __table_args__ = (
        one_of("merge_order", MergeOrder),
        one_of("escalation", ConflictEscalation),
        CheckConstraint(f"max_worktrees BETWEEN 1 AND {MAX_WORKTREES}", name="max_worktrees"),
        CheckConstraint(
            "escalation <> 'agent' OR review_agent_id IS NOT NULL", name="review_agent"
        ),
        CheckConstraint("command_timeout_s > 0", name="command_timeout_s"),
        CheckConstraint("output_limit_bytes > 0", name="output_limit_bytes"),
        CheckConstraint("version >= 1", name="version"),
    )

    project: Mapped[str] = mapped_column(Text, primary_key=True)
    repository: Mapped[str] = mapped_column(Text)  # an absolute path the service reaches
    base_branch: Mapped[str] = mapped_column(Text)
    max_worktrees: Mapped[int] = mapped_column(Integer)
    merge_order: Mapped[str] = mapped_column(Text)
    escalation: Mapped[str] = mapped_column(Text)
    review_agent_id: Mapped[str | None] = mapped_column(Text)
    cleanup_after_merge: Mapped[bool] = mapped_column(Boolean, server_default=true())
    commands: Mapped[list[str]] = mapped_column(JSONB)  # run_command's allowlist
    command_timeout_s: Mapped[int] = mapped_column(Integer)
    output_limit_bytes: Mapped[int] = mapped_column(Integer)
    semantic_checks: Mapped[bool] = mapped_column(Boolean, server_default=true())
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class Worktree(Base):
    """A task's worktree: its branch from the base, where its runs change files, and the
    result of merging it. One per task (`task_id` unique): rework and retries continue on
    it. `task_id` and `project` are plain references: the record outlives the task."""

    __tablename__ = "worktrees"
    __table_args__ = (
        one_of("status", WorktreeStatus),
        CheckConstraint("version >= 1", name="version"),
        Index(None, "task_id", unique=True),
        Index(None, "project", "status"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    project: Mapped[str] = mapped_column(Text)
    task_id: Mapped[str] = mapped_column(Text)
    branch: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    base_sha: Mapped[str] = mapped_column(Text)  # the base branch when it was made
    head_sha: Mapped[str | None] = mapped_column(Text)  # its branch's last commit
    diff: Mapped[dict[str, Any] | None] = mapped_column(JSONB)  # its diff stat, per file
    merge: Mapped[dict[str, Any] | None] = mapped_column(JSONB)  # the last merge's result
    approval_id: Mapped[str | None] = mapped_column(Text)  # the escalation, when one is open
    removed: Mapped[bool] = mapped_column(Boolean, server_default="false")  # its directory
    queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    merged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


WORKSPACES = cast(Table, Workspace.__table__)
WORKTREES = cast(Table, Worktree.__table__)
