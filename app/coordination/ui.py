"""A task's coordination in the dashboard (`/ui/coordinations/{id}`): its parent task, its
phases' results, its subtasks wave by wave (each with its child task's status and agent),
the coordinator's own runs and how it settled, kept live by its event stream and the tasks'.

Reads go straight to the store, as the API's do; the coordination is started and moved by
the API and the coordinator alone."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.agents.store import agents as agent_store
from app.coordination import store as coordination_store
from app.coordination.schemas import CoordinationRead, SubtaskState
from app.core.streams import TASK_STREAM, coordination_stream
from app.core.vocabulary import CoordinationTopology
from app.dashboard.deps import DbDep, ViewerDep
from app.dashboard.page import Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import tasks as task_store

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router)  # no link in the bar: a coordination is reached from its task


@dataclass(frozen=True)
class SubtaskRow:
    """A subtask as its wave's table shows it: its title in the decomposition, its child
    task as it is now (None once deleted) and the agent routing chose (None: unroutable)."""

    state: SubtaskState
    title: str
    task: TaskRead | None
    agent: tuple[str, str] | None  # id and name


@dataclass(frozen=True)
class Wave:
    number: int
    topology: CoordinationTopology | None  # None before the topology phase
    subtasks: list[SubtaskRow]


@router.get("/coordinations/{coordination_id}")
async def coordination_page(
    coordination_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> HTMLResponse:
    """Kept live by following the coordination's stream (its phases, subtasks started, runs
    made, its end) and the tasks' (the subtasks' statuses), each from where it stood when
    the page was read."""
    # Both positions before the rows: an event committed in between is then both on the
    # page and replayed, never in neither.
    since = await event_store.last_seq(db, coordination_stream(coordination_id))
    tasks_since = await event_store.last_seq(db, TASK_STREAM)
    coordination = await coordination_store.get_coordination(db, coordination_id)
    if coordination is None:
        missing = {"section": "tasks", "what": f"coordination {coordination_id}"}
        return render(request, "not_found.html", viewer, missing, status_code=404)
    context = {
        "section": "tasks",
        **await _view(db, coordination),
        "stream": f"/v1/coordinations/{coordination.id}/events?last_event_id={since}",
        "events": events.COORDINATION,
        "task_stream": f"/v1/tasks/events?last_event_id={tasks_since}",
        "task_events": events.TASKS,
    }
    return render(request, "coordination.html", viewer, context)


@router.get("/coordinations/{coordination_id}/live")
async def coordination_live(
    coordination_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> Response:
    """The part of the page that its events change: all of it but the crumbs."""
    coordination = await coordination_store.get_coordination(db, coordination_id)
    if coordination is None:
        return Response(status_code=404)
    return render(request, "_coordination_live.html", viewer, await _view(db, coordination))


async def _view(db: DbDep, coordination: CoordinationRead) -> dict[str, object]:
    """The coordination, its parent task (None once deleted), its subtasks by wave, and the
    names of the agents it names."""
    by_id = {
        task.id: task
        for task in await task_store.get_tasks(db, [s.task_id for s in coordination.subtasks])
    }
    named = [s.agent_id for s in coordination.subtasks if s.agent_id]
    if coordination.orchestrator_agent_id:
        named.append(coordination.orchestrator_agent_id)
    names = await agent_store.names(db, named)
    drafts = coordination.decomposition.subtasks if coordination.decomposition else []
    waves: dict[int, list[SubtaskRow]] = {}
    for state in sorted(coordination.subtasks, key=lambda s: (s.wave, s.index)):
        title = drafts[state.index].title if state.index < len(drafts) else f"#{state.index}"
        agent = (
            (state.agent_id, names.get(state.agent_id, state.agent_id)) if state.agent_id else None
        )
        row = SubtaskRow(state, title, by_id.get(state.task_id), agent)
        waves.setdefault(state.wave, []).append(row)
    topologies = coordination.wave_topologies
    return {
        "coordination": coordination,
        "parent": await task_store.get_task(db, coordination.parent_task_id),
        "waves": [
            Wave(n, topologies[n] if n < len(topologies) else coordination.topology, rows)
            for n, rows in sorted(waves.items())
        ],
        "drafts": drafts,
        "names": names,
    }
