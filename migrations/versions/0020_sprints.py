"""Sprints: a project's time-boxed backlog of tasks with story points, a strictly linear
lifecycle with at most one active sprint a project, and the velocity each records when it
completes

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# The vocabulary as 0020 knows it; a later change to it is a migration of its own.
_STATUSES = "'planning', 'active', 'in_review', 'retrospective', 'completed'"


def upgrade() -> None:
    op.create_table(
        "sprints",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("start_date", sa.Date(), nullable=False),
        sa.Column("end_date", sa.Date(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("committed_points", sa.Integer(), nullable=True),
        sa.Column("completed_points", sa.Integer(), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(f"status IN ({_STATUSES})", name=op.f("ck_sprints_status")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_sprints_version")),
        sa.CheckConstraint("end_date >= start_date", name=op.f("ck_sprints_dates")),
        sa.CheckConstraint(
            "CASE WHEN status = 'completed' THEN committed_points IS NOT NULL "
            "AND completed_points IS NOT NULL AND completed_at IS NOT NULL "
            "ELSE committed_points IS NULL AND completed_points IS NULL "
            "AND completed_at IS NULL END",
            name=op.f("ck_sprints_velocity"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sprints")),
    )
    op.create_index(op.f("ix_sprints_project_id"), "sprints", ["project", "id"])
    op.create_index(
        "uq_sprints_project_active",
        "sprints",
        ["project"],
        unique=True,
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_table(
        "sprint_tasks",
        sa.Column("sprint_id", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=False),
        sa.Column("story_points", sa.Integer(), nullable=False),
        sa.Column("open", sa.Boolean(), nullable=False),
        sa.Column(
            "added_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("story_points >= 0", name=op.f("ck_sprint_tasks_story_points")),
        sa.ForeignKeyConstraint(
            ["sprint_id"],
            ["sprints.id"],
            name=op.f("fk_sprint_tasks_sprint_id_sprints"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_sprint_tasks_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("sprint_id", "task_id", name=op.f("pk_sprint_tasks")),
    )
    op.create_index(op.f("ix_sprint_tasks_task_id"), "sprint_tasks", ["task_id"])
    op.create_index(
        "uq_sprint_tasks_task_id_open",
        "sprint_tasks",
        ["task_id"],
        unique=True,
        postgresql_where=sa.text("open"),
    )


def downgrade() -> None:
    op.drop_table("sprint_tasks")  # its indexes and constraints go with it
    op.drop_table("sprints")
