"""Sprints: a project's time-boxed backlog of tasks with story points, and the velocity
each one records when it completes."""

from __future__ import annotations

from datetime import date, datetime
from typing import cast

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    Table,
    Text,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import SprintStatus
from app.db.base import Base
from app.db.columns import now_column, one_of

# The velocity record (points committed and completed, and when) is there exactly when the
# sprint is completed: written by the transaction that completes it, never before.
VELOCITY_ON_COMPLETION = (
    "CASE WHEN status = 'completed' THEN committed_points IS NOT NULL "
    "AND completed_points IS NOT NULL AND completed_at IS NOT NULL "
    "ELSE committed_points IS NULL AND completed_points IS NULL AND completed_at IS NULL END"
)


class Sprint(Base):
    """One sprint of a project. At most one of a project's sprints is `active` (the partial
    unique index); its velocity (`committed_points`, `completed_points`) is written once,
    in the transaction that completes it, and is present exactly when it is completed."""

    __tablename__ = "sprints"
    __table_args__ = (
        one_of("status", SprintStatus),
        CheckConstraint("version >= 1", name="version"),
        CheckConstraint("end_date >= start_date", name="dates"),
        CheckConstraint(VELOCITY_ON_COMPLETION, name="velocity"),
        Index(
            "uq_sprints_project_active",
            "project",
            unique=True,
            postgresql_where=text("status = 'active'"),
        ),
        Index(None, "project", "id"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    project: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    goal: Mapped[str] = mapped_column(Text)
    start_date: Mapped[date] = mapped_column(Date)
    end_date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(Text)
    committed_points: Mapped[int | None] = mapped_column(Integer)
    completed_points: Mapped[int | None] = mapped_column(Integer)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # True: the sprint clock moves it from active to in_review once its end_date is past.
    auto_transition: Mapped[bool] = mapped_column(Boolean, server_default=false())
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class SprintTask(Base):
    """A task of a sprint's backlog with its story points. `open` is true until the
    sprint completes: a task is in at most one open sprint (the partial unique index), and
    may join a later sprint once its sprint is over (carried over). Deleting the task or
    the sprint deletes the row."""

    __tablename__ = "sprint_tasks"
    __table_args__ = (
        CheckConstraint("story_points >= 0", name="story_points"),
        Index(
            "uq_sprint_tasks_task_id_open",
            "task_id",
            unique=True,
            postgresql_where=text("open"),
        ),
        Index(None, "task_id"),
    )

    sprint_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sprints.id", ondelete="CASCADE"), primary_key=True
    )
    task_id: Mapped[str] = mapped_column(
        Text, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    story_points: Mapped[int] = mapped_column(Integer)
    open: Mapped[bool] = mapped_column(Boolean)
    added_at: Mapped[datetime] = now_column()


SPRINTS = cast(Table, Sprint.__table__)
SPRINT_TASKS = cast(Table, SprintTask.__table__)
