"""idempotency keys expire: a key made by a run's tool call records its run (kept while
the run may run again), spawned child runs' keys get a scope of their own, and an index
per kind for the sweep

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Scopes of keys runs' tool calls make, and the clients' scope each shares a resource with.
_RUN_SCOPES = {"runs.spawn": "runs.create", "tasks.create_task": "tasks.create"}


def upgrade() -> None:
    op.add_column("idempotency_keys", sa.Column("run_id", sa.Text(), nullable=True))
    # Keys `spawn_child_runs` made (runs with a parent) move to `runs.spawn` and record the
    # parent, whose tool call made them: they are kept while it may run again.
    op.execute(
        "UPDATE idempotency_keys AS k SET scope = 'runs.spawn', run_id = r.parent_run_id "
        "FROM runs AS r "
        "WHERE k.scope = 'runs.create' AND r.id = k.resource_id AND r.parent_run_id IS NOT NULL"
    )
    op.create_index(
        "ix_idempotency_keys_client_created_at",
        "idempotency_keys",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("run_id IS NULL"),
    )
    op.create_index(
        "ix_idempotency_keys_run_created_at",
        "idempotency_keys",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_run_created_at", table_name="idempotency_keys")
    op.drop_index("ix_idempotency_keys_client_created_at", table_name="idempotency_keys")
    for run_scope, client_scope in _RUN_SCOPES.items():
        # A client's key spelled like a run's would collide back in the clients' scope: the
        # client's stays.
        op.execute(
            sa.text(
                "DELETE FROM idempotency_keys AS s WHERE s.scope = :run AND EXISTS "
                "(SELECT 1 FROM idempotency_keys AS c WHERE c.scope = :client AND c.key = s.key)"
            ).bindparams(run=run_scope, client=client_scope)
        )
        op.execute(
            sa.text("UPDATE idempotency_keys SET scope = :client WHERE scope = :run").bindparams(
                run=run_scope, client=client_scope
            )
        )
    op.drop_column("idempotency_keys", "run_id")
