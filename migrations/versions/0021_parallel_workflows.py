"""Parallel workflows: a limit on an execution's task nodes working at once, fail-fast,
and exclusive resources a task declares (two tasks naming one key never run together)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_PARALLEL = ("workflows", "workflow_executions")


def upgrade() -> None:
    for table in _PARALLEL:
        op.add_column(table, sa.Column("max_parallel_tasks", sa.Integer(), nullable=True))
        op.add_column(
            table,
            sa.Column("fail_fast", sa.Boolean(), server_default=sa.false(), nullable=False),
        )
        op.create_check_constraint(
            op.f(f"ck_{table}_max_parallel_tasks"), table, "max_parallel_tasks >= 1"
        )
    op.add_column(
        "tasks",
        sa.Column(
            "resources", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
    )
    # Dispatch asks "which working task holds one of these keys" (`?|`).
    op.create_index(op.f("ix_tasks_resources"), "tasks", ["resources"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_index(op.f("ix_tasks_resources"), table_name="tasks")
    op.drop_column("tasks", "resources")
    for table in reversed(_PARALLEL):
        op.drop_constraint(op.f(f"ck_{table}_max_parallel_tasks"), table, type_="check")
        op.drop_column(table, "fail_fast")
        op.drop_column(table, "max_parallel_tasks")
