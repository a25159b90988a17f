"""triggers: webhooks in, schedules and chains, their fires, accepted hook signatures, and
the chains' outbox filled by the database from `events`

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
        sa.Column("source_id", sa.Text(), nullable=True),
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
    op.create_index(
        "ix_trigger_fires_source_id",
        "trigger_fires",
        ["source_id"],
        postgresql_where=sa.text("source_id IS NOT NULL"),
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
    op.create_table(
        "chain_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chain_events")),
    )
    # A run settling (its copy on the runs board, not its lane's) or an execution
    # finishing is copied in its own transaction, while any chain trigger is enabled.
    op.execute(_CHAIN_SOURCE_FUNCTION)
    op.execute(_CHAIN_SOURCE_TRIGGER)


_CHAIN_SOURCE_FUNCTION = """
CREATE FUNCTION loopwright_chain_source() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM triggers WHERE kind = 'chain' AND enabled) THEN
        INSERT INTO chain_events (stream, seq, type, data, created_at)
        VALUES (NEW.stream, NEW.seq, NEW.type, NEW.data, NEW.created_at);
    END IF;
    RETURN NULL;
END
$$
"""
_CHAIN_SOURCE_TRIGGER = """
CREATE TRIGGER events_chain_source AFTER INSERT ON events FOR EACH ROW
WHEN ((NEW.stream = 'runs' AND NEW.type IN (
          'agent_run.completed', 'agent_run.failed', 'agent_run.cancelled',
          'agent_run.timed_out', 'agent_run.dead_letter'))
      OR NEW.type IN (
          'workflow.execution.completed', 'workflow.execution.failed',
          'workflow.execution.cancelled'))
EXECUTE FUNCTION loopwright_chain_source()
"""


def downgrade() -> None:
    op.execute("DROP TRIGGER events_chain_source ON events")
    op.execute("DROP FUNCTION loopwright_chain_source()")
    op.drop_table("chain_events")
    op.drop_table("hook_signatures")
    op.drop_table("trigger_fires")
    op.drop_table("triggers")
