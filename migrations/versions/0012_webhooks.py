"""webhooks out: subscriptions, deliveries and their attempts, and the outbox trigger on
`events` that queues a delivery per subscription in the event's own transaction

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# The event types a webhook may subscribe to, as `WebhookEventType` listed them when this
# revision was written (a later revision that adds one replaces the trigger).
SUBSCRIBABLE = (
    "agent_run.completed",
    "agent_run.failed",
    "agent_run.dead_letter",
    "agent_run.waiting_on_human",
    "approval.requested",
    "approval.approved",
    "approval.rejected",
    "approval.expired",
    "workflow.execution.completed",
    "workflow.execution.failed",
    "workflow.execution.cancelled",
    "trigger.fired",
)

# `whd_` and a ULID, as `app.core.ids.new_id` makes them: 10 base32 digits of the
# milliseconds, then 16 of 80 random bits (two 40-bit halves of a random UUID's bytes).
DELIVERY_ID = """
CREATE FUNCTION webhook_delivery_id() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    digits CONSTANT text := '0123456789abcdefghjkmnpqrstvwxyz';
    millis bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    noise bytea := uuid_send(gen_random_uuid());
    high bigint := 0;
    low bigint := 0;
    id text := 'whd_';
BEGIN
    FOR i IN 0..4 LOOP
        high := (high << 8) | get_byte(noise, i);
        low := (low << 8) | get_byte(noise, i + 9);
    END LOOP;
    FOR i IN REVERSE 9..0 LOOP
        id := id || substr(digits, ((millis >> (5 * i)) & 31)::int + 1, 1);
    END LOOP;
    FOR i IN REVERSE 7..0 LOOP
        id := id || substr(digits, ((high >> (5 * i)) & 31)::int + 1, 1);
    END LOOP;
    FOR i IN REVERSE 7..0 LOOP
        id := id || substr(digits, ((low >> (5 * i)) & 31)::int + 1, 1);
    END LOOP;
    RETURN id;
END
$$
"""

# One delivery per enabled webhook subscribed to the event's type, written by the
# transaction that writes the event, and a NOTIFY that wakes the deliverers at its commit.
# A run's lifecycle event is written twice, to the runs board and to its lane's stream: the
# lane's copy is delivered (it has the event's details; the board's has none), with `lane`.
OUTBOX = """
CREATE FUNCTION webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    data jsonb := NEW.data;
BEGIN
    IF NEW.stream LIKE 'lane:%' THEN
        data := jsonb_build_object('lane', substr(NEW.stream, 6)) || data;
    END IF;
    INSERT INTO webhook_deliveries (
        id, webhook_id, event_type, stream, seq, payload, status, attempts,
        attempts_before_redeliver, next_attempt_at, created_at
    )
    SELECT d.id, d.webhook_id, NEW.type, NEW.stream, NEW.seq,
           jsonb_build_object(
               'id', d.id, 'type', NEW.type, 'stream', NEW.stream, 'seq', NEW.seq,
               'created_at',
               to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
               'data', data
           ),
           'pending', 0, 0, NEW.created_at, NEW.created_at
    FROM (
        SELECT webhook_delivery_id() AS id, w.id AS webhook_id
        FROM webhooks AS w
        WHERE w.enabled AND NEW.type = ANY (w.event_types)
    ) AS d;
    IF FOUND THEN
        PERFORM pg_notify('loopwright_events', '{"stream": "webhook-deliveries"}');
    END IF;
    RETURN NULL;
END
$$
"""


def _trigger(types: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{t}'" for t in types)
    return (
        "CREATE TRIGGER webhook_outbox AFTER INSERT ON events FOR EACH ROW "
        f"WHEN (NEW.type IN ({listed}) AND NEW.stream <> 'runs') "
        "EXECUTE FUNCTION webhook_outbox()"
    )


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("event_types", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("cardinality(event_types) > 0", name=op.f("ck_webhooks_event_types")),
        sa.CheckConstraint("version >= 1", name=op.f("ck_webhooks_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("webhook_id", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("attempts_before_redeliver", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_latency_ms", sa.Integer(), nullable=True),
        sa.Column("last_response", sa.Text(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'succeeded', 'dead_letter')",
            name=op.f("ck_webhook_deliveries_status"),
        ),
        sa.CheckConstraint(
            "attempts >= attempts_before_redeliver", name=op.f("ck_webhook_deliveries_attempts")
        ),
        sa.CheckConstraint(
            "attempts_before_redeliver >= 0",
            name=op.f("ck_webhook_deliveries_attempts_before_redeliver"),
        ),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_webhook_deliveries_webhook_id_webhooks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "webhook_id", "stream", "seq", name=op.f("uq_webhook_deliveries_webhook_id_stream_seq")
        ),
    )
    op.create_index(
        op.f("ix_webhook_deliveries_webhook_id_id"), "webhook_deliveries", ["webhook_id", "id"]
    )
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "webhook_delivery_attempts",
        sa.Column("delivery_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("succeeded", sa.Boolean(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("response_excerpt", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_delivery_attempts_delivery_id_webhook_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "delivery_id", "attempt", name=op.f("pk_webhook_delivery_attempts")
        ),
    )
    op.execute(DELIVERY_ID)
    op.execute(OUTBOX)
    op.execute(_trigger(SUBSCRIBABLE))


def downgrade() -> None:
    op.execute("DROP TRIGGER webhook_outbox ON events")
    op.execute("DROP FUNCTION webhook_outbox()")
    op.execute("DROP FUNCTION webhook_delivery_id()")
    op.drop_table("webhook_delivery_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
