"""approvals: task reviews and gated tool calls waiting on a person

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_REVIEW = sa.text("kind = 'task_review'")
_PENDING_REVIEW = sa.text("kind = 'task_review' AND status = 'pending'")
_TOOL_CALL = sa.text("kind = 'tool_call'")
_PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("workflow_execution_id", sa.Text(), nullable=True),
        sa.Column("review_round", sa.Integer(), nullable=True),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=True),
        sa.Column("arguments", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("timeout_s", sa.Integer(), nullable=False),
        sa.Column("timeout_policy", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("escalations", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('task_review', 'tool_call')", name=op.f("ck_approvals_kind")),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'cancelled')",
            name=op.f("ck_approvals_status"),
        ),
        sa.CheckConstraint(
            "timeout_policy IN ('auto_approve', 'auto_deny', 'escalate')",
            name=op.f("ck_approvals_timeout_policy"),
        ),
        sa.CheckConstraint(
            "kind <> 'task_review' OR (task_id IS NOT NULL AND review_round IS NOT NULL)",
            name=op.f("ck_approvals_review_target"),
        ),
        sa.CheckConstraint(
            "kind <> 'tool_call' OR (run_id IS NOT NULL AND tool_call_id IS NOT NULL)",
            name=op.f("ck_approvals_tool_call_target"),
        ),
        sa.CheckConstraint("timeout_s > 0", name=op.f("ck_approvals_timeout_s")),
        sa.CheckConstraint("escalations >= 0", name=op.f("ck_approvals_escalations")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_approvals_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
    )
    op.create_index(
        "uq_approvals_review_round",
        "approvals",
        ["task_id", "review_round"],
        unique=True,
        postgresql_where=_REVIEW,
    )
    op.create_index(
        "uq_approvals_pending_review",
        "approvals",
        ["task_id"],
        unique=True,
        postgresql_where=_PENDING_REVIEW,
    )
    op.create_index(
        "uq_approvals_tool_call",
        "approvals",
        ["run_id", "tool_call_id"],
        unique=True,
        postgresql_where=_TOOL_CALL,
    )
    op.create_index(
        "ix_approvals_pending_expiry",
        "approvals",
        ["expires_at"],
        unique=False,
        postgresql_where=_PENDING,
    )


def downgrade() -> None:
    op.drop_index("ix_approvals_pending_expiry", table_name="approvals", postgresql_where=_PENDING)
    op.drop_index("uq_approvals_tool_call", table_name="approvals", postgresql_where=_TOOL_CALL)
    op.drop_index(
        "uq_approvals_pending_review", table_name="approvals", postgresql_where=_PENDING_REVIEW
    )
    op.drop_index("uq_approvals_review_round", table_name="approvals", postgresql_where=_REVIEW)
    op.drop_table("approvals")
