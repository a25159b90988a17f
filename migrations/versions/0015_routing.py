"""routing: an agent's manager (`reports_to`, for hierarchical routing) and a task's
routing request (routed automatically while it is `created`)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("reports_to", sa.Text(), nullable=True))
    op.create_foreign_key(
        op.f("fk_agents_reports_to_agents"),
        "agents",
        "agents",
        ["reports_to"],
        ["id"],
        ondelete="SET NULL",
    )
    op.add_column("tasks", sa.Column("routing", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("tasks", "routing")
    op.drop_constraint(op.f("fk_agents_reports_to_agents"), "agents", type_="foreignkey")
    op.drop_column("agents", "reports_to")
