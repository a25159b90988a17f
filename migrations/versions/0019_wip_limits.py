"""Kanban boards: WIP limits per project and column, strict or advisory

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# The vocabularies as 0019 knows them; a later change to one is a migration of its own.
_COLUMNS = "'backlog', 'ready', 'in_progress', 'review', 'done'"
_MODES = "'strict', 'advisory'"


def upgrade() -> None:
    op.create_table(
        "wip_limits",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("column", sa.Text(), nullable=False),
        sa.Column("limit", sa.Integer(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(f'"column" IN ({_COLUMNS})', name=op.f("ck_wip_limits_column")),
        sa.CheckConstraint(f"mode IN ({_MODES})", name=op.f("ck_wip_limits_mode")),
        sa.CheckConstraint('"limit" >= 1', name=op.f("ck_wip_limits_limit")),
        sa.PrimaryKeyConstraint("project", "column", name=op.f("pk_wip_limits")),
    )


def downgrade() -> None:
    op.drop_table("wip_limits")
