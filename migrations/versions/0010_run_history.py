"""run history: one row per boundary of a run replaces its messages, checkpoints and
tool-call ledger rows, and the events of its stream

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_KINDS = (
    "input",
    "llm_response",
    "tool_result",
    "compaction",
    "journal_update",
    "human_pause",
    "final",
    "note",
)
_RUN_STATUSES = (
    "queued",
    "running",
    "waiting_on_human",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
    "dead_letter",
)


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def upgrade() -> None:
    op.create_table(
        "run_history",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("messages", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.CheckConstraint(f"kind IN ({_quoted(_KINDS)})", name=op.f("ck_run_history_kind")),
        sa.CheckConstraint(
            f"status IN ({_quoted(_RUN_STATUSES)})", name=op.f("ck_run_history_status")
        ),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_run_history_seq")),
        sa.CheckConstraint(
            "(position IS NULL) = (messages IS NULL)",
            name=op.f("ck_run_history_messages_have_position"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_history_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_history")),
    )
    op.create_index(
        op.f("ix_run_history_conversation_id_position"),
        "run_history",
        ["conversation_id", "position"],
        unique=True,
        postgresql_where=sa.text("position IS NOT NULL"),
    )
    _move_forward(op.get_bind())
    op.drop_table("tool_calls")
    op.drop_index(op.f("ix_messages_conversation_id_position"), table_name="messages")
    op.drop_table("messages")
    op.drop_index(op.f("ix_checkpoints_run_id_id"), table_name="checkpoints")
    op.drop_table("checkpoints")
    op.drop_column("conversations", "message_count")


def downgrade() -> None:
    op.add_column(
        "conversations",
        sa.Column("message_count", sa.Integer(), nullable=False, server_default="0"),
    )
    op.alter_column("conversations", "message_count", server_default=None)
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("message_cursor", sa.Integer(), nullable=False),
        sa.Column("persisted_message_count", sa.Integer(), nullable=False),
        sa.Column("system_prompt_hash", sa.Text(), nullable=False),
        sa.Column(
            "completed_tool_call_ids", postgresql.JSONB(astext_type=sa.Text()), nullable=False
        ),
        sa.Column("loop_counters", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            f"kind IN ({_quoted(_KINDS[:-1])})",
            name=op.f("ck_checkpoints_kind"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_checkpoints_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
    )
    op.create_index(op.f("ix_checkpoints_run_id_id"), "checkpoints", ["run_id", "id"], unique=False)
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("content", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_messages_conversation_id_conversations"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_messages_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    op.create_index(
        op.f("ix_messages_conversation_id_position"),
        "messages",
        ["conversation_id", "position"],
        unique=True,
    )
    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("arguments", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("idempotent", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_tool_calls_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "tool_call_id", name=op.f("pk_tool_calls")),
    )
    _move_back(op.get_bind())
    op.drop_index(
        op.f("ix_run_history_conversation_id_position"),
        table_name="run_history",
        postgresql_where=sa.text("position IS NOT NULL"),
    )
    op.drop_table("run_history")


# -- the data --------------------------------------------------------------------------


def _move_forward(bind: Connection) -> None:
    """Existing runs' messages, checkpoints, ledger rows and run-stream events become
    history steps."""


def _move_back(bind: Connection) -> None:
    """History steps become messages, checkpoints, ledger rows and run-stream events."""
