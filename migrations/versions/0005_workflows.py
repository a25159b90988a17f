"""workflows: definitions, executions and the tasks they made

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    default = None if nullable else sa.text("now()")
    return sa.Column(name, sa.DateTime(timezone=True), server_default=default, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("nodes", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("edges", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("review_timeout_s", sa.Integer(), nullable=False),
        sa.Column("review_timeout_policy", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.CheckConstraint(
            "review_timeout_policy IN ('auto_approve', 'auto_deny', 'escalate')",
            name=op.f("ck_workflows_review_timeout_policy"),
        ),
        sa.CheckConstraint("review_timeout_s > 0", name=op.f("ck_workflows_review_timeout_s")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_workflows_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflows")),
    )
    op.create_table(
        "workflow_executions",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=False),
        sa.Column("workflow_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("context", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("node_status", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("waits_for", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _timestamp("finished_at", nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_workflow_executions_status"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_workflow_executions_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_executions")),
    )
    op.create_index(
        op.f("ix_workflow_executions_workflow_id_id"),
        "workflow_executions",
        ["workflow_id", "id"],
        unique=False,
    )
    op.create_index(
        op.f("ix_workflow_executions_status"), "workflow_executions", ["status"], unique=False
    )
    op.create_table(
        "workflow_execution_tasks",
        sa.Column("task_id", sa.Text(), nullable=False),
        sa.Column("execution_id", sa.Text(), nullable=False),
        sa.Column("node_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["workflow_executions.id"],
            name=op.f("fk_workflow_execution_tasks_execution_id_workflow_executions"),
        ),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_workflow_execution_tasks")),
    )
    op.create_index(
        op.f("ix_workflow_execution_tasks_execution_id"),
        "workflow_execution_tasks",
        ["execution_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_workflow_execution_tasks_execution_id"), table_name="workflow_execution_tasks"
    )
    op.drop_table("workflow_execution_tasks")
    op.drop_index(op.f("ix_workflow_executions_status"), table_name="workflow_executions")
    op.drop_index(op.f("ix_workflow_executions_workflow_id_id"), table_name="workflow_executions")
    op.drop_table("workflow_executions")
    op.drop_table("workflows")
