"""triggers: webhooks in, schedules and chains, their fires, and accepted hook signatures

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("target", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("config", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "kind IN ('webhook', 'schedule', 'chain')", name=op.f("ck_triggers_kind")
        ),
        sa.CheckConstraint(
            "kind = 'webhook' OR secret IS NULL", name=op.f("ck_triggers_secret_of_webhook")
        ),
        sa.CheckConstraint(
            "kind = 'schedule' OR next_fire_at IS NULL",
            name=op.f("ck_triggers_next_fire_of_schedule"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_triggers_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_triggers")),
    )
    op.create_index(
        "ix_triggers_next_fire_at",
        "triggers",
        ["next_fire_at"],
        postgresql_where=sa.text("next_fire_at IS NOT NULL"),
    )
    op.create_table(
        "trigger_fires",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("trigger_id", sa.Text(), nullable=False),
        sa.Column("fire_key", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("execution_id", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("response", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint(
            "status IN ('started', 'skipped', 'failed')", name=op.f("ck_trigger_fires_status")
        ),
        sa.ForeignKeyConstraint(
            ["trigger_id"],
            ["triggers.id"],
            name=op.f("fk_trigger_fires_trigger_id_triggers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trigger_fires")),
        sa.UniqueConstraint(
            "trigger_id", "fire_key", name=op.f("uq_trigger_fires_trigger_id_fire_key")
        ),
    )
    op.create_index(
        op.f("ix_trigger_fires_trigger_id_fired_at"), "trigger_fires", ["trigger_id", "fired_at"]
    )
    op.create_table(
        "hook_signatures",
        sa.Column("trigger_id", sa.Text(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["trigger_id"],
            ["triggers.id"],
            name=op.f("fk_hook_signatures_trigger_id_triggers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trigger_id", "signature", name=op.f("pk_hook_signatures")),
    )
    op.create_index(op.f("ix_hook_signatures_seen_at"), "hook_signatures", ["seen_at"])


def downgrade() -> None:
    op.drop_table("hook_signatures")
    op.drop_table("trigger_fires")
    op.drop_table("triggers")
