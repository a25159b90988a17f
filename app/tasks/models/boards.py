"""Kanban boards: each project's WIP limits, per column. A board's tasks are the tasks of
its project; its columns are task statuses (`app.core.states.COLUMN_STATUS`)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import CheckConstraint, Integer, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.vocabulary import BoardColumn, WipMode
from app.db.base import Base
from app.db.columns import now_column, one_of


class WipLimit(Base):
    """At most `limit` tasks of `project` in `column`: `strict` refuses a move past it,
    `advisory` lets it through with a warning. The TaskEngine locks a project's rows while
    it counts, so writers in any process take turns."""

    __tablename__ = "wip_limits"
    __table_args__ = (
        one_of("column", BoardColumn),
        one_of("mode", WipMode),
        CheckConstraint('"limit" >= 1', name="limit"),
    )

    project: Mapped[str] = mapped_column(Text, primary_key=True)
    column: Mapped[str] = mapped_column(Text, primary_key=True)
    limit: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = now_column()


WIP_LIMITS = cast(Table, WipLimit.__table__)
