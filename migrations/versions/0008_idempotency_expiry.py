"""idempotency keys expire: an index for the sweep; spawned child runs' keys in a scope
of their own

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-21
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_idempotency_keys_created_at"), "idempotency_keys", ["created_at"], unique=False
    )
    # Keys `spawn_child_runs` made (runs with a parent) move to `runs.spawn`, which expires
    # with the parent run rather than with the clients' window.
    op.execute(
        "UPDATE idempotency_keys AS k SET scope = 'runs.spawn' FROM runs AS r "
        "WHERE k.scope = 'runs.create' AND r.id = k.resource_id AND r.parent_run_id IS NOT NULL"
    )


def downgrade() -> None:
    # A client key spelled like a spawn key would collide back in `runs.create`: the
    # client's stays.
    op.execute(
        "DELETE FROM idempotency_keys AS s WHERE s.scope = 'runs.spawn' AND EXISTS "
        "(SELECT 1 FROM idempotency_keys AS c WHERE c.scope = 'runs.create' AND c.key = s.key)"
    )
    op.execute("UPDATE idempotency_keys SET scope = 'runs.create' WHERE scope = 'runs.spawn'")
    op.drop_index(op.f("ix_idempotency_keys_created_at"), table_name="idempotency_keys")
