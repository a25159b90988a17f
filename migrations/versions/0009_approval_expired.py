"""approvals: an `expired` status with the decision its timeout policy made, and a
context summary a person decides from

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Named in full (the models' naming convention gives these names; `op.f` keeps them).
_STATUS = "ck_approvals_status"
_DECISION = "ck_approvals_decision"
_MATCHES = "ck_approvals_decision_matches_status"
_SUMMARY = "ck_approvals_summary_length"
_TIMEOUT_ACTOR = (
    "system:timeout"  # approvals/engine/approvals.py TIMEOUT_ACTOR: who settles an expiry
)


def upgrade() -> None:
    op.add_column("approvals", sa.Column("summary", sa.Text(), nullable=True))
    op.add_column("approvals", sa.Column("decision", sa.Text(), nullable=True))
    op.drop_constraint(op.f(_STATUS), "approvals", type_="check")  # `expired` is new
    # A decided approval's decision is its answer; one the expiry sweep decided (its actor
    # says so) becomes `expired`, keeping the policy's effect as its decision.
    op.execute("UPDATE approvals SET decision = status WHERE status IN ('approved', 'rejected')")
    op.execute(
        sa.text(
            "UPDATE approvals SET status = 'expired' "
            "WHERE decision IS NOT NULL AND decided_by = :actor"
        ).bindparams(actor=_TIMEOUT_ACTOR)
    )
    # Older approvals recorded no intent or result: their question (and a tool call's
    # arguments) is all there is to summarise.
    op.execute(
        "UPDATE approvals SET summary = left(question || CASE WHEN arguments IS NULL THEN '' "
        "ELSE E'\\nArguments: ' || arguments::text END, 1000)"
    )
    op.alter_column("approvals", "summary", nullable=False)
    op.create_check_constraint(
        op.f(_STATUS),
        "approvals",
        "status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')",
    )
    op.create_check_constraint(op.f(_DECISION), "approvals", "decision IN ('approved', 'rejected')")
    op.create_check_constraint(
        op.f(_MATCHES),
        "approvals",
        "(status IN ('pending', 'cancelled') AND decision IS NULL)"
        " OR (status IN ('approved', 'rejected') AND decision IS NOT DISTINCT FROM status)"
        " OR (status = 'expired' AND decision IS NOT NULL)",
    )
    op.create_check_constraint(op.f(_SUMMARY), "approvals", "char_length(summary) <= 1000")


def downgrade() -> None:
    op.drop_constraint(op.f(_SUMMARY), "approvals", type_="check")
    op.drop_constraint(op.f(_MATCHES), "approvals", type_="check")
    op.drop_constraint(op.f(_DECISION), "approvals", type_="check")
    op.drop_constraint(op.f(_STATUS), "approvals", type_="check")
    # Before 0009 an expiry was recorded as the decision its policy made (by the timeout
    # actor, which stays on the row).
    op.execute("UPDATE approvals SET status = decision WHERE status = 'expired'")
    op.create_check_constraint(
        op.f(_STATUS), "approvals", "status IN ('pending', 'approved', 'rejected', 'cancelled')"
    )
    op.drop_column("approvals", "decision")
    op.drop_column("approvals", "summary")
