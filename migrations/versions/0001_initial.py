"""tasks, transitions, events, idempotency keys

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_streams",
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream", name=op.f("pk_event_streams")),
    )
    op.create_table(
        "events",
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("stream", "seq", name=op.f("pk_events")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("request_hash", sa.Text(), nullable=False),
        sa.Column("resource_id", sa.Text(), nullable=False),
        sa.Column("response", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("scope", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_table(
        "task_transitions",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.Text(), nullable=False),
        sa.Column("from_status", sa.Text(), nullable=True),
        sa.Column("to_status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("task_version", sa.Integer(), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_transitions")),
    )
    op.create_index(
        op.f("ix_task_transitions_task_id_id"), "task_transitions", ["task_id", "id"], unique=False
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=True),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("assigned_to", sa.Text(), nullable=True),
        sa.Column("reviewers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("dependencies", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("artifacts_expected", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("acceptance_criteria", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("estimated_complexity", sa.Text(), nullable=False),
        sa.Column("task_structure", sa.Text(), nullable=False),
        sa.Column("coordination_topology", sa.Text(), nullable=False),
        sa.Column("budget_limit", sa.Float(), nullable=True),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("parent_task_id", sa.Text(), nullable=True),
        sa.Column("delegation_chain", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("retry_count", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "coordination_topology IN ('auto', 'sas', 'centralized', 'decentralized', 'context_dependent')",
            name=op.f("ck_tasks_coordination_topology"),
        ),
        sa.CheckConstraint(
            "estimated_complexity IN ('simple', 'medium', 'complex', 'epic')",
            name=op.f("ck_tasks_estimated_complexity"),
        ),
        sa.CheckConstraint(
            "priority IN ('critical', 'high', 'medium', 'low')", name=op.f("ck_tasks_priority")
        ),
        sa.CheckConstraint(
            "status IN ('created', 'assigned', 'in_progress', 'in_review', 'completed', 'blocked', 'failed', 'cancelled', 'interrupted')",
            name=op.f("ck_tasks_status"),
        ),
        sa.CheckConstraint(
            "task_structure IN ('sequential', 'parallel', 'mixed')",
            name=op.f("ck_tasks_task_structure"),
        ),
        sa.CheckConstraint(
            "type IN ('development', 'design', 'research', 'review', 'meeting', 'admin')",
            name=op.f("ck_tasks_type"),
        ),
        sa.CheckConstraint("max_retries >= 0", name=op.f("ck_tasks_max_retries")),
        sa.CheckConstraint("retry_count >= 0", name=op.f("ck_tasks_retry_count")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_tasks_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
    )
    op.create_index(op.f("ix_tasks_assigned_to"), "tasks", ["assigned_to"], unique=False)
    op.create_index(op.f("ix_tasks_priority"), "tasks", ["priority"], unique=False)
    op.create_index(op.f("ix_tasks_project"), "tasks", ["project"], unique=False)
    op.create_index(op.f("ix_tasks_status"), "tasks", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_tasks_status"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_project"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_priority"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_assigned_to"), table_name="tasks")
    op.drop_table("tasks")
    op.drop_index(op.f("ix_task_transitions_task_id_id"), table_name="task_transitions")
    op.drop_table("task_transitions")
    op.drop_table("idempotency_keys")
    op.drop_table("events")
    op.drop_table("event_streams")
