"""Workflow kinds (sequential, parallel, kanban, agile_kanban) with the board and sprint
defaults a template renders into a definition, the project a definition's executions go
to by default, and a sprint's optional move to in_review at its end date

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# The vocabulary as 0022 knows it; a later change to it is a migration of its own.
_KINDS = "'sequential', 'parallel', 'kanban', 'agile_kanban'"


def upgrade() -> None:
    op.add_column(
        "workflows",
        sa.Column("kind", sa.Text(), server_default="sequential", nullable=False),
    )
    op.create_check_constraint(op.f("ck_workflows_kind"), "workflows", f"kind IN ({_KINDS})")
    op.add_column("workflows", sa.Column("board", postgresql.JSONB(), nullable=True))
    op.add_column("workflows", sa.Column("project", sa.Text(), nullable=True))
    op.add_column(
        "sprints",
        sa.Column("auto_transition", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("sprints", "auto_transition")
    op.drop_column("workflows", "project")
    op.drop_column("workflows", "board")
    op.drop_constraint(op.f("ck_workflows_kind"), "workflows", type_="check")
    op.drop_column("workflows", "kind")
