"""Coordinations: a parent task decomposed into subtasks and dispatched in waves, with the
phase it is in and each phase's result; at most one running per parent task; a task's
coordination to start once it is ready

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# The vocabularies as 0018 knows them; a later change to one is a migration of its own.
_STATUSES = "'running', 'completed', 'failed', 'cancelled'"
_PHASES = "'decompose', 'route', 'topology', 'validate', 'dispatch', 'roll_up', 'update_parent'"
_TOPOLOGIES = "'auto', 'sas', 'centralized', 'decentralized', 'context_dependent'"
_OUTCOMES = "'completed', 'failed', 'cancelled'"


def upgrade() -> None:
    op.create_table(
        "coordinations",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("parent_task_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("topology", sa.Text(), nullable=True),
        sa.Column(
            "wave_topologies",
            postgresql.JSONB(),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("request", postgresql.JSONB(), nullable=False),
        sa.Column("decomposition", postgresql.JSONB(), nullable=True),
        sa.Column(
            "subtasks", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
        sa.Column("orchestrator_agent_id", sa.Text(), nullable=True),
        sa.Column(
            "runs", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column(
            "phase_results",
            postgresql.JSONB(),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(f"status IN ({_STATUSES})", name=op.f("ck_coordinations_status")),
        sa.CheckConstraint(f"phase IN ({_PHASES})", name=op.f("ck_coordinations_phase")),
        sa.CheckConstraint(f"topology IN ({_TOPOLOGIES})", name=op.f("ck_coordinations_topology")),
        sa.CheckConstraint(f"outcome IN ({_OUTCOMES})", name=op.f("ck_coordinations_outcome")),
        sa.ForeignKeyConstraint(
            ["parent_task_id"],
            ["tasks.id"],
            name=op.f("fk_coordinations_parent_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_coordinations")),
    )
    op.create_index(op.f("ix_coordinations_parent_task_id"), "coordinations", ["parent_task_id"])
    op.create_index(
        "uq_coordinations_parent_task_id_running",
        "coordinations",
        ["parent_task_id"],
        unique=True,
        postgresql_where=sa.text("status = 'running'"),
    )

    op.add_column("tasks", sa.Column("coordination", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("tasks", "coordination")
    op.drop_table("coordinations")  # its indexes and constraints go with it
