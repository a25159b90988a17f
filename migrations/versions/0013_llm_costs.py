"""llm costs: what LLM calls cost, by day, agent, project, task, provider and model

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_cost_days",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Numeric(24, 9), nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "day",
            "agent_id",
            "project",
            "task_id",
            "provider",
            "model",
            name=op.f("pk_llm_cost_days"),
        ),
    )


def downgrade() -> None:
    op.drop_table("llm_cost_days")
