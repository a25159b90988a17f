"""Sprint commands: the one writer of a sprint's row, its backlog and its status.

Each command is one short transaction: lock the sprint's row, check the caller's version,
check the status (the machine in `core/states.py`, or the planning gate of the backlog),
write, bump the version, append the event to the `sprints` stream; then wake the stream's
readers. Two sprints of a project racing to become active both pass the look-up; the
partial unique index `uq_sprints_project_active` lets the first commit win, and the other
is refused with `sprint_already_active`. Two sprints taking one task at once end the same
way on `uq_sprint_tasks_task_id_open` (`task_in_another_sprint`). The sprint clock
(`sprints/engine/sprint_clock.py`) moves sprints through `transition` as a person does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import (
    Conflict,
    FieldError,
    NotFound,
    ProblemCode,
    ValidationFailed,
    VersionConflict,
)
from app.core.ids import new_id
from app.core.states import TASK_TERMINAL, SprintStatus, check_sprint_transition
from app.core.streams import SPRINTS_STREAM
from app.db import idempotency
from app.db.errors import constraint_name
from app.db.idempotent_create import CreateKey, keyed_create
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.sprints.schemas.sprints import (
    MAX_SPRINT_TASKS,
    SprintCreate,
    SprintEventType,
    SprintPatch,
    SprintRead,
    SprintTasksAdd,
)
from app.sprints.store import sprints as store

CREATE_SCOPE = "sprints.create"
ONE_ACTIVE_INDEX = "uq_sprints_project_active"
ONE_OPEN_SPRINT_INDEX = "uq_sprint_tasks_task_id_open"


class SprintAlreadyActive(Conflict):
    """The project has an active sprint already; move it on before starting another."""

    code = ProblemCode.SPRINT_ALREADY_ACTIVE

    def __init__(self, project: str, active_sprint_id: str | None) -> None:
        self.project = project
        self.active_sprint_id = active_sprint_id
        which = f" ({active_sprint_id})" if active_sprint_id else ""
        super().__init__(
            f"project {project!r} has an active sprint{which}: a project runs one sprint at a time"
        )

    def extensions(self) -> dict[str, Any]:
        return {"project": self.project, "active_sprint_id": self.active_sprint_id}


class SprintLocked(Conflict):
    """The sprint's status does not allow this change: its backlog and dates change only
    while it is planning, and a completed sprint does not change."""

    code = ProblemCode.SPRINT_LOCKED

    def __init__(self, sprint: SprintRead, what: str) -> None:
        self.sprint_id = sprint.id
        self.status = sprint.status
        super().__init__(f"sprint {sprint.id} is {sprint.status.value}: {what}")

    def extensions(self) -> dict[str, Any]:
        return {"sprint_id": self.sprint_id, "sprint_status": self.status.value}


class TaskInAnotherSprint(Conflict):
    """A task is in another sprint that is not completed; a task is in one at a time."""

    code = ProblemCode.TASK_IN_ANOTHER_SPRINT

    def __init__(self, task_id: str, sprint_id: str | None) -> None:
        self.task_id = task_id
        self.sprint_id = sprint_id
        where = f"sprint {sprint_id}" if sprint_id else "another sprint"
        super().__init__(
            f"task {task_id} is in {where}, which is not completed: remove it there first"
        )

    def extensions(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "sprint_id": self.sprint_id}


def sprint_event(
    kind: SprintEventType, sprint: SprintRead, actor: str, **extra: Any
) -> event_store.NewEvent:
    data = {"sprint": sprint.model_dump(mode="json"), "actor": actor, **extra}
    return event_store.NewEvent(kind.value, data)


class SprintCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    def now(self) -> datetime:
        """The service's time as sprints see it (a burn-up's "today")."""
        return self._clock()

    async def create_keyed(
        self,
        body: SprintCreate,
        actor: str,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[SprintRead, bool]:
        """The sprint (`planning`, no tasks), and whether this is a replay of the key's first
        create (answered with the sprint as it is now)."""
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=now, retention=self._idempotency_retention
            )
            if create.replay is not None:
                replay = await store.get_sprint(session, create.replay.resource_id)
                if replay is not None:
                    return replay, True
            sprint = await self.create_in(session, body, actor)
            await create.remember(sprint.id)
        self.announce()
        return sprint, False

    async def create_in(
        self,
        session: AsyncSession,
        body: SprintCreate,
        actor: str,
        *,
        auto_transition: bool | None = None,
    ) -> SprintRead:
        """A sprint made `planning` in the caller's transaction (its row and its
        `sprint.created` event); `announce` once that has committed. `auto_transition`
        sets the sprint clock's column (None: the column's default)."""
        now = self._clock()
        values = body.model_dump() | {
            "id": new_id("sprint"),
            "status": SprintStatus.PLANNING.value,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        if auto_transition is not None:
            values["auto_transition"] = auto_transition
        sprint = await store.insert_sprint(session, values)
        await self._record(session, [sprint_event(SprintEventType.CREATED, sprint, actor)])
        return sprint

    def announce(self) -> None:
        """After a commit that wrote sprint events: wake the stream's readers."""
        published(self._bus, [Written(SPRINTS_STREAM)])

    async def update(
        self, sprint_id: str, body: SprintPatch, actor: str, *, expected_version: int | None
    ) -> SprintRead:
        changes = body.model_dump(exclude_unset=True)
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, sprint_id, expected_version)
            if current.status is SprintStatus.COMPLETED:
                raise SprintLocked(current, "a completed sprint does not change")
            dates = {"start_date", "end_date"} & changes.keys()
            if dates and current.status is not SprintStatus.PLANNING:
                raise SprintLocked(current, "its dates change only while it is planning")
            start = changes.get("start_date", current.start_date)
            end = changes.get("end_date", current.end_date)
            if end < start:
                field = "end_date" if "end_date" in changes else "start_date"
                other = "start_date" if field == "end_date" else "end_date"
                bound = "before" if field == "end_date" else "after"
                raise ValidationFailed.field(field, f"must not be {bound} {other}")
            sprint = await self._write(session, current, changes, actor, SprintEventType.UPDATED)
        published(self._bus, [Written(SPRINTS_STREAM)])
        return sprint

    async def add_tasks(
        self, sprint_id: str, body: SprintTasksAdd, actor: str, *, expected_version: int | None
    ) -> SprintRead:
        """Commit tasks of the sprint's project to it, while it is planning."""
        wanted = {t.task_id: t.story_points for t in body.tasks}
        try:
            async with self._sessionmaker() as session, session.begin():
                current = await self._planning(session, sprint_id, expected_version)
                await self._check_tasks(session, current, body)
                elsewhere = await store.open_sprints_of(session, wanted)
                for task_id, other in elsewhere.items():
                    if other != current.id:
                        raise TaskInAnotherSprint(task_id, other)
                new = wanted.keys() - {t.task_id for t in current.tasks}
                if len(current.tasks) + len(new) > MAX_SPRINT_TASKS:
                    raise ValidationFailed.field(
                        "tasks", f"a sprint holds at most {MAX_SPRINT_TASKS} tasks"
                    )
                await store.put_tasks(session, current.id, wanted, self._clock())
                sprint = await self._write(
                    session, current, {}, actor, SprintEventType.TASKS_CHANGED
                )
        except IntegrityError as exc:  # another sprint took one of them meanwhile
            if constraint_name(exc) != ONE_OPEN_SPRINT_INDEX:
                raise
            async with self._sessionmaker() as session:
                elsewhere = await store.open_sprints_of(session, wanted)
            taken = sorted((t, s) for t, s in elsewhere.items() if s != sprint_id)
            if not taken:
                raise TaskInAnotherSprint("?", None) from None
            raise TaskInAnotherSprint(*taken[0]) from None
        published(self._bus, [Written(SPRINTS_STREAM)])
        return sprint

    async def remove_task(
        self, sprint_id: str, task_id: str, actor: str, *, expected_version: int | None
    ) -> SprintRead:
        async with self._sessionmaker() as session, session.begin():
            current = await self._planning(session, sprint_id, expected_version)
            if not await store.remove_task(session, current.id, task_id):
                raise NotFound("sprint task", task_id)
            sprint = await self._write(session, current, {}, actor, SprintEventType.TASKS_CHANGED)
        published(self._bus, [Written(SPRINTS_STREAM)])
        return sprint

    async def transition(
        self, sprint_id: str, to: SprintStatus, actor: str, *, expected_version: int | None
    ) -> SprintRead:
        """One step along the lifecycle. Becoming active needs the project to have no
        active sprint; completing fixes the velocity record and frees its tasks."""
        project: str | None = None
        try:
            async with self._sessionmaker() as session, session.begin():
                current = await self._current(session, sprint_id, expected_version)
                project = current.project
                check_sprint_transition(current.status, to)
                values: dict[str, Any] = {"status": to.value}
                if to is SprintStatus.ACTIVE:
                    active = await store.active_sprint(session, current.project)
                    if active is not None:
                        raise SprintAlreadyActive(current.project, active)
                if to is SprintStatus.COMPLETED:
                    committed, completed = store.points(current.tasks)
                    values |= {
                        "committed_points": committed,
                        "completed_points": completed,
                        "completed_at": self._clock(),
                    }
                    await store.close_backlog(session, current.id)
                sprint = await self._write(
                    session,
                    current,
                    values,
                    actor,
                    SprintEventType.TRANSITIONED,
                    **{"from": current.status.value, "to": to.value},
                )
        except IntegrityError as exc:  # another sprint of the project became active first
            if constraint_name(exc) != ONE_ACTIVE_INDEX or project is None:
                raise
            async with self._sessionmaker() as session:
                active = await store.active_sprint(session, project)
            raise SprintAlreadyActive(project, active) from None
        published(self._bus, [Written(SPRINTS_STREAM)])
        return sprint

    # -- shared steps --------------------------------------------------------------------

    async def _current(
        self, session: AsyncSession, sprint_id: str, expected_version: int | None
    ) -> SprintRead:
        """The sprint, locked for this transaction, at the version the caller expects."""
        current = await store.get_sprint(session, sprint_id, lock=True)
        if current is None:
            raise NotFound("sprint", sprint_id)
        if expected_version is not None and expected_version != current.version:
            raise VersionConflict(expected_version, current.version)
        return current

    async def _planning(
        self, session: AsyncSession, sprint_id: str, expected_version: int | None
    ) -> SprintRead:
        current = await self._current(session, sprint_id, expected_version)
        if current.status is not SprintStatus.PLANNING:
            raise SprintLocked(current, "tasks join or leave its backlog only while it is planning")
        return current

    @staticmethod
    async def _check_tasks(session: AsyncSession, sprint: SprintRead, body: SprintTasksAdd) -> None:
        """Each task exists, is of the sprint's project, and is still to be done."""
        found = await store.task_projects(session, [t.task_id for t in body.tasks])
        errors: list[FieldError] = []
        for i, item in enumerate(body.tasks):
            where = f"tasks[{i}].task_id"
            if item.task_id not in found:
                errors.append(FieldError(where, f"no task {item.task_id!r}"))
                continue
            project, status = found[item.task_id]
            if project != sprint.project:
                in_project = f"is in project {project!r}" if project else "has no project"
                errors.append(
                    FieldError(where, f"{in_project}, not the sprint's {sprint.project!r}")
                )
            elif status in TASK_TERMINAL:
                errors.append(FieldError(where, f"is {status.value}: there is nothing to commit"))
        if errors:
            raise ValidationFailed(errors)

    async def _write(
        self,
        session: AsyncSession,
        current: SprintRead,
        values: dict[str, Any],
        actor: str,
        kind: SprintEventType,
        **extra: Any,
    ) -> SprintRead:
        """Bump the version (the row is locked: the compare-and-set cannot miss), append
        the event; the caller wakes the stream's readers once it committed."""
        now = self._clock()
        changed = await store.update_sprint(
            session, current.id, read_version=current.version, values=values, now=now
        )
        if not changed:
            raise VersionConflict(current.version, current.version + 1)
        written = await store.get_sprint(session, current.id)
        assert written is not None  # locked above
        await self._record(session, [sprint_event(kind, written, actor, **extra)])
        return written

    async def _record(self, session: AsyncSession, events: list[event_store.NewEvent]) -> None:
        await event_store.append_events(session, SPRINTS_STREAM, events, self._clock())
