"""Sprint ceremonies: a trigger's run that facilitates a planning, a review or a
retrospective gets the sprint it is about in its template context, as
`GET /v1/sprints/{id}` shows it (`sprint`), and the project's velocity (`velocity`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import SprintStatus
from app.core.vocabulary import Ceremony
from app.sprints.store import sprints as store
from app.triggers.schemas import SprintCeremony

VELOCITY_WINDOW = 3  # completed sprints the ceremony's average spans

# The sprints a ceremony is about, the first found winning.
_ABOUT: dict[Ceremony, tuple[SprintStatus, ...]] = {
    Ceremony.PLANNING: (SprintStatus.PLANNING,),
    Ceremony.REVIEW: (SprintStatus.ACTIVE, SprintStatus.IN_REVIEW),
    Ceremony.RETROSPECTIVE: (SprintStatus.IN_REVIEW, SprintStatus.RETROSPECTIVE),
}


class NoSprintForCeremony(Exception):
    """The project has no sprint the ceremony could be about: the fire fails with this."""


async def ceremony_context(session: AsyncSession, about: SprintCeremony) -> dict[str, Any]:
    """`sprint` and `velocity` for the template context; `NoSprintForCeremony` when the
    project has no sprint in a status the ceremony is held in."""
    for status in _ABOUT[about.ceremony]:
        sprint_id = await store.newest_in(session, about.project, status)
        sprint = await store.get_sprint(session, sprint_id) if sprint_id else None
        if sprint is not None:
            velocity = await store.velocity_of(
                session, about.project, window=VELOCITY_WINDOW, limit=VELOCITY_WINDOW
            )
            return {
                "sprint": sprint.model_dump(mode="json"),
                "velocity": {
                    "average_completed": velocity.average_completed_points,
                    "average_committed": velocity.average_committed_points,
                    "sprints": [r.model_dump(mode="json") for r in velocity.records],
                },
            }
    statuses = " or ".join(s.value for s in _ABOUT[about.ceremony])
    raise NoSprintForCeremony(
        f"project {about.project!r} has no sprint {statuses} for a {about.ceremony.value}"
    )
