"""Loop kinds: the loop an agent's runs use (`execution_loop`), plan_execute's settings,
the kind a run was given when it first started, and a plan_execute run's plan

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_LOOP = "ck_agents_execution_loop"


def upgrade() -> None:
    op.add_column(
        "agents",
        sa.Column("execution_loop", sa.Text(), server_default=sa.text("'react'"), nullable=False),
    )
    op.create_check_constraint(
        op.f(_LOOP),
        "agents",
        "execution_loop IN ('react', 'plan_execute', 'hybrid', 'auto')",
    )
    op.add_column(
        "agents",
        sa.Column(
            "plan_execute",
            postgresql.JSONB(),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )
    op.add_column("runs", sa.Column("execution_loop", postgresql.JSONB(), nullable=True))
    op.add_column("runs", sa.Column("plan", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "plan")
    op.drop_column("runs", "execution_loop")
    op.drop_column("agents", "plan_execute")
    op.drop_constraint(op.f(_LOOP), "agents", type_="check")
    op.drop_column("agents", "execution_loop")
