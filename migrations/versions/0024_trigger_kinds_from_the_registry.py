"""Trigger kinds from the registry: `triggers.kind` no longer lists the kinds in a CHECK.
A kind is one module registered in `app/triggers/engine/kinds/` (or from outside `app/`),
and the commands refuse a name no kind is registered under before anything is written, so
the registry is the one list; a CHECK would need a migration for every kind, which a kind
defined outside `app/` cannot add to this linear history.

The checks that tie a column to a built-in kind stay: only a webhook has a secret, only a
schedule a next fire time (the scheduler reads every armed row).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_KIND = "ck_triggers_kind"
# The kinds as 0011 knew them; a downgrade fails while a trigger of another kind is stored.
_KINDS = "kind IN ('webhook', 'schedule', 'chain')"


def upgrade() -> None:
    op.drop_constraint(op.f(_KIND), "triggers", type_="check")


def downgrade() -> None:
    op.create_check_constraint(op.f(_KIND), "triggers", _KINDS)
