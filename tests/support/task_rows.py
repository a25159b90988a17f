"""Task rows for the store tests: a snapshot with the fields a new task has, and the JSON
form the store writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.states import TaskStatus
from app.tasks.schemas.tasks import TaskRead

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def new_task(task_id: str, **fields: Any) -> TaskRead:
    values: dict[str, Any] = {
        "id": task_id,
        "title": f"title of {task_id}",
        "created_by": "tester",
        "status": TaskStatus.CREATED,
        "retry_count": 0,
        "version": 1,
        "created_at": T0,
        "updated_at": T0,
    }
    return TaskRead.model_validate(values | fields)


def rows(*tasks_: TaskRead) -> list[dict[str, Any]]:
    """Snapshots in the JSON form the store writes."""
    return [t.model_dump(mode="json") for t in tasks_]
