"""budgets: limits on an agent's or a project's LLM spending a day or a month, the
reservations of calls in flight, the alerts sent once per threshold and period, the
model downgrade a run was given under budget pressure, and agents' personalities (which
the system prompt renders to its model tier's profile)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("model_downgrade", postgresql.JSONB(), nullable=True))
    op.add_column("agents", sa.Column("personality", postgresql.JSONB(), nullable=True))
    op.create_table(
        "budgets",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("period", sa.Text(), nullable=False),
        sa.Column("limit_usd", sa.Numeric(24, 9), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("scope IN ('agent', 'project')", name=op.f("ck_budgets_scope")),
        sa.CheckConstraint("period IN ('day', 'month')", name=op.f("ck_budgets_period")),
        sa.CheckConstraint("limit_usd > 0", name=op.f("ck_budgets_limit_usd")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_budgets_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budgets")),
        sa.UniqueConstraint(
            "scope", "subject", "period", name=op.f("uq_budgets_scope_subject_period")
        ),
    )
    op.create_table(
        "budget_reservations",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("amount_usd", sa.Numeric(24, 9), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("amount_usd >= 0", name=op.f("ck_budget_reservations_amount_usd")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_reservations")),
    )
    op.create_index(op.f("ix_budget_reservations_run_id"), "budget_reservations", ["run_id"])
    op.create_index(
        op.f("ix_budget_reservations_agent_id_day"), "budget_reservations", ["agent_id", "day"]
    )
    op.create_index(
        op.f("ix_budget_reservations_project_day"), "budget_reservations", ["project", "day"]
    )
    op.create_table(
        "budget_alerts",
        sa.Column("budget_id", sa.Text(), nullable=False),
        sa.Column("period_start", sa.Date(), nullable=False),
        sa.Column("threshold", sa.SmallInteger(), nullable=False),
        sa.Column(
            "sent_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["budget_id"],
            ["budgets.id"],
            name=op.f("fk_budget_alerts_budget_id_budgets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "budget_id", "period_start", "threshold", name=op.f("pk_budget_alerts")
        ),
    )


def downgrade() -> None:
    op.drop_table("budget_alerts")
    op.drop_table("budget_reservations")
    op.drop_table("budgets")
    op.drop_column("runs", "model_downgrade")
    op.drop_column("agents", "personality")
