"""Workspaces: a project's git repository that agents change, each task in a worktree of
its own, merged back in order; and approvals of kind `merge` (a person resolves a merge)

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# The vocabularies as 0023 knows them; a later change to one is a migration of its own.
_ORDERS = "'completion', 'priority', 'manual'"
_ESCALATIONS = "'person', 'agent'"
_STATUSES = "'active', 'queued', 'merging', 'conflict', 'held', 'merged', 'rejected', 'abandoned'"
_KIND = "ck_approvals_kind"
_MERGE_TARGET = "ck_approvals_merge_target"


def _timestamps() -> list[sa.Column[object]]:
    return [
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "workspaces",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("repository", sa.Text(), nullable=False),
        sa.Column("base_branch", sa.Text(), nullable=False),
        sa.Column("max_worktrees", sa.Integer(), nullable=False),
        sa.Column("merge_order", sa.Text(), nullable=False),
        sa.Column("escalation", sa.Text(), nullable=False),
        sa.Column("review_agent_id", sa.Text(), nullable=True),
        sa.Column("cleanup_after_merge", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("commands", postgresql.JSONB(), nullable=False),
        sa.Column("command_timeout_s", sa.Integer(), nullable=False),
        sa.Column("output_limit_bytes", sa.Integer(), nullable=False),
        sa.Column("semantic_checks", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        *_timestamps(),
        sa.CheckConstraint(f"merge_order IN ({_ORDERS})", name=op.f("ck_workspaces_merge_order")),
        sa.CheckConstraint(
            f"escalation IN ({_ESCALATIONS})", name=op.f("ck_workspaces_escalation")
        ),
        sa.CheckConstraint(
            "max_worktrees BETWEEN 1 AND 8", name=op.f("ck_workspaces_max_worktrees")
        ),
        sa.CheckConstraint(
            "escalation <> 'agent' OR review_agent_id IS NOT NULL",
            name=op.f("ck_workspaces_review_agent"),
        ),
        sa.CheckConstraint("command_timeout_s > 0", name=op.f("ck_workspaces_command_timeout_s")),
        sa.CheckConstraint("output_limit_bytes > 0", name=op.f("ck_workspaces_output_limit_bytes")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_workspaces_version")),
        sa.PrimaryKeyConstraint("project", name=op.f("pk_workspaces")),
    )
    op.create_table(
        "worktrees",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=False),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("base_sha", sa.Text(), nullable=False),
        sa.Column("head_sha", sa.Text(), nullable=True),
        sa.Column("diff", postgresql.JSONB(), nullable=True),
        sa.Column("merge", postgresql.JSONB(), nullable=True),
        sa.Column("approval_id", sa.Text(), nullable=True),
        sa.Column("removed", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        *_timestamps(),
        sa.CheckConstraint(f"status IN ({_STATUSES})", name=op.f("ck_worktrees_status")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_worktrees_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worktrees")),
    )
    op.create_index(op.f("ix_worktrees_task_id"), "worktrees", ["task_id"], unique=True)
    op.create_index(op.f("ix_worktrees_project_status"), "worktrees", ["project", "status"])
    op.drop_constraint(op.f(_KIND), "approvals", type_="check")
    op.create_check_constraint(
        op.f(_KIND), "approvals", "kind IN ('task_review', 'tool_call', 'merge')"
    )
    op.create_check_constraint(
        op.f(_MERGE_TARGET), "approvals", "kind <> 'merge' OR task_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DELETE FROM approvals WHERE kind = 'merge'")
    op.drop_constraint(op.f(_MERGE_TARGET), "approvals", type_="check")
    op.drop_constraint(op.f(_KIND), "approvals", type_="check")
    op.create_check_constraint(op.f(_KIND), "approvals", "kind IN ('task_review', 'tool_call')")
    op.drop_index(op.f("ix_worktrees_project_status"), table_name="worktrees")
    op.drop_index(op.f("ix_worktrees_task_id"), table_name="worktrees")
    op.drop_table("worktrees")
    op.drop_table("workspaces")
