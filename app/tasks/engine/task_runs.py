"""Tasks executed by agents, kept in step with their runs.

A task assigned to an agent whose dependencies are all completed becomes a run on lane
`task:<id>`, and that lane's newest run then drives the task:

    run dispatched, running, waiting   task → in_progress (an agent run owns it)
    run completed                      task → in_review (the review gate)
    review rejected                    task → in_progress, and a rework run is dispatched
                                       with the reviewer's reason
    run failed or dead-lettered        task → failed, then → assigned while retries remain,
                                       which dispatches a new run
    run handed back at shutdown        task → interrupted; → in_progress when it runs again
    run cancelled                      task → cancelled
    run out of budget                  task stays: retry the run once there is room
    task cancelled                     its queued and active runs are cancelled

A run's input is the task, its acceptance criteria and the results of the tasks it
depends on (their newest completed runs'), so work downstream builds on work upstream. A
task being coordinated (the parent of a running coordination) is its coordinator's: sync
leaves it alone.

`assigned` therefore always means "no run works on this yet": a settled run behind an
assigned task is history, and the task is due a new run. Likewise a task `in_progress`
whose newest run completed and was rejected in review is due its rework run (it is never
sent back to review for work already rejected). A task whose workflow execution stopped
running gets no new run. Nor does a task while there is no room for it (`has_room`): its
column's strict WIP limit, its execution's `max_parallel_tasks`, or one of its `resources`
taken by a working task, or its project's workspace with every worktree in use; it waits
`assigned`, and a task leaving `in_progress` pulls the waiting ones (`_pull`), a worktree
freed by the merge queue its project's (`pull_project`).

Sync is best effort (a failure is logged, the agent is never blocked),
and convergent: each pass compares the task with its lane's newest run and walks only
allowed transitions, so a replayed event or the sweep after a restart end in the same
state. Passes over one task are serialised within the process; the bridge runs in the
serving process (`loopwright serve`), next to the TaskEngine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals import store as approval_store
from app.coordination import store as coordination_store
from app.core.errors import AppError
from app.core.states import TASK_TERMINAL, ApprovalDecision, RunStatus, StopReason, TaskStatus
from app.core.streams import RUNS_STREAM
from app.core.vocabulary import BoardColumn, Multitask, WipMode
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.runs.engine.runs import LaneBusy, RunCommands
from app.runs.schemas.runs import RunCreate, RunRead
from app.runtime.components import Loop, Wakes
from app.runtime.keyed_locks import KeyedLocks
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.engine.task_mutations import TransitionTask
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import boards, dispatch_limits
from app.tasks.store import task_runs as store
from app.tasks.store import tasks as task_store
from app.workflows import store as workflow_store
from app.workspaces import store as workspace_store

log = logging.getLogger(__name__)
Result = TypeVar("Result")

ACTOR = "task-runs"
BATCH = 500
T = TaskStatus
R = RunStatus

# How a task follows its newest run: (task status, run status) -> the transitions to walk.
_ROUTES: dict[tuple[TaskStatus, RunStatus], tuple[TaskStatus, ...]] = {
    (T.ASSIGNED, R.QUEUED): (T.IN_PROGRESS,),
    (T.ASSIGNED, R.RUNNING): (T.IN_PROGRESS,),
    (T.ASSIGNED, R.WAITING_ON_HUMAN): (T.IN_PROGRESS,),
    (T.INTERRUPTED, R.RUNNING): (T.ASSIGNED, T.IN_PROGRESS),
    (T.INTERRUPTED, R.WAITING_ON_HUMAN): (T.ASSIGNED, T.IN_PROGRESS),
    (T.IN_PROGRESS, R.COMPLETED): (T.IN_REVIEW,),
    (T.INTERRUPTED, R.COMPLETED): (T.ASSIGNED, T.IN_PROGRESS, T.IN_REVIEW),
    (T.IN_PROGRESS, R.FAILED): (T.FAILED,),
    (T.IN_PROGRESS, R.DEAD_LETTER): (T.FAILED,),
    (T.INTERRUPTED, R.FAILED): (T.ASSIGNED, T.FAILED),
    (T.INTERRUPTED, R.DEAD_LETTER): (T.ASSIGNED, T.FAILED),
    (T.IN_PROGRESS, R.CANCELLED): (T.CANCELLED,),
    (T.INTERRUPTED, R.CANCELLED): (T.ASSIGNED, T.CANCELLED),
}
# A run in these states no longer works its task.
_DONE = frozenset({R.COMPLETED, R.FAILED, R.DEAD_LETTER, R.CANCELLED})


def sync_route(task: TaskStatus, run: RunStatus) -> tuple[TaskStatus, ...]:
    """The transitions that bring a task in line with its newest run: none when it is in
    line, or when the run's state says nothing new (queued for a retry, timed out)."""
    return _ROUTES.get((task, run), ())


def run_input(
    task: TaskRead,
    feedback: str | None = None,
    upstream: Sequence[store.UpstreamResult] = (),
) -> str:
    """What the agent is asked: the task, its acceptance criteria, what the tasks it
    depends on answered (the work it builds on), and a reviewer's reasons when it is
    rework."""
    parts = [task.title]
    if task.description:
        parts.append(task.description)
    if task.acceptance_criteria:
        parts.append("It is done when:\n" + "\n".join(f"- {c}" for c in task.acceptance_criteria))
    for done in upstream:
        parts.append(f"The result of {done.title!r}, which this builds on:\n{done.result}")
    if feedback:
        parts.append(f"A reviewer sent this back for rework: {feedback}")
    return "\n\n".join(parts)


class TaskRuns:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        tasks: TaskEngine,
        runs: RunCommands,
        bus: EventBus,
        *,
        poll_interval_s: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sessionmaker = sessionmaker
        self._clock = clock
        self._tasks = tasks
        self._runs = runs
        # The runs board's new events, at each wake-up of its stream, else every poll
        # interval (what other processes' runs did).
        self.loop = Loop(
            "task-runs", self._follow, Wakes(poll_interval_s, (RUNS_STREAM,)), bus=bus, clock=clock
        )
        self._work: set[asyncio.Task[object]] = set()
        self._locks = KeyedLocks()  # one pass over a task at a time
        self._cursor: int | None = None  # the runs board is read after this event

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Follow the runs board from now on, after one sweep over what came before."""
        self._tasks.add_observer(self._on_task_change)
        self.loop.start()

    async def stop(self) -> None:
        """Call after the workers stopped and before the TaskEngine does: the runs they
        handed back are synced (their tasks become `interrupted`) before the bridge ends."""
        await self.loop.stop()
        pending = list(self._work)
        for job in pending:
            job.cancel()
        for job in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        while self._cursor is not None and await _best_effort(self._catch_up()):
            pass

    async def _on_task_change(self, result: MutationResult) -> None:
        """TaskEngine observer. It must not hold up the writer, so the work gets a task."""
        task = result.task
        if result.change is None:
            return
        came_from = result.change.before.status if result.change.before else None
        works: list[Awaitable[object]] = []
        if task.status is T.ASSIGNED or (task.status, came_from) == (T.IN_PROGRESS, T.IN_REVIEW):
            works.append(self.sync(task.id))  # ready, or sent back for rework
        if task.status is T.COMPLETED:
            works.append(self._sync_dependents(task.id))
        if task.status is T.CANCELLED:
            works.append(self._cancel_runs(task.id))
        if came_from is T.IN_PROGRESS and task.status is not T.IN_PROGRESS:
            works.append(self._pull(task))  # it made room: a task waiting for it may start
        if not works:
            return
        work = asyncio.gather(*works)
        job = asyncio.create_task(_best_effort(work))
        self._work.add(job)
        job.add_done_callback(self._work.discard)

    # -- one task --------------------------------------------------------------------

    async def sync(
        self, task_id: str, *, interrupted_run: str | None = None, feedback: str | None = None
    ) -> None:
        """Bring one task in line with its lane's newest run, dispatching a run when the
        task is an agent's, ready, and has none working on it."""
        async with self._locks.hold(task_id):
            async with self._sessionmaker() as session:
                task = await task_store.get_task(session, task_id)
                if task is None or task.status in TASK_TERMINAL:
                    return
                if await coordination_store.coordinated(session, task_id):
                    return  # its coordination moves it, and runs its synthesis on its lane
                run = await store.latest_run(session, task_id)
            if task.status is T.ASSIGNED and (run is None or run.status in _DONE):
                run = await self._dispatch(task, run, feedback)
                if run is None:
                    return
            if run is None:
                return
            if task.status is T.IN_PROGRESS and run.status is R.COMPLETED:
                rejection = await self._rejection(task.id, run.id)
                if rejection is not None:
                    await self._dispatch(task, run, rejection)
                    return
            if run.stop_reason is StopReason.BUDGET_EXHAUSTED:
                return  # the task stays where it is until the budget allows a retry
            if interrupted_run == run.id and run.status is R.QUEUED:
                route: tuple[TaskStatus, ...] = (
                    (T.INTERRUPTED,) if task.status is T.IN_PROGRESS else ()
                )
            else:
                route = sync_route(task.status, run.status)
            for target in route:
                task = await self._move(task, target, f"run {run.id} is {run.status.value}")
            if task.status is T.FAILED and task.retry_count < task.max_retries:
                task = await self._move(task, T.ASSIGNED, "retrying after a failed run")
                run = await self._dispatch(task, run, None)
                if run is not None:
                    await self._move(task, T.IN_PROGRESS, f"run {run.id} is queued")

    async def _dispatch(
        self, task: TaskRead, previous: RunRead | None, feedback: str | None
    ) -> RunRead | None:
        """A run for the task, or None when it may not start now: a person's task, one
        waiting on its dependencies or for room (its execution's branch limit, a resource
        another task holds), or one whose execution stopped."""
        try:
            async with self._sessionmaker() as session, session.begin():
                agent_id = await store.resolve_agent(session, task.assigned_to or "")
                if agent_id is None or await store.unfinished_dependencies(session, task):
                    return None  # a person's task, or one still waiting on others
                if await execution_stopped(session, task.id):
                    return None  # its workflow execution was cancelled, failed or completed
                if not await has_room(session, task):
                    return None  # it waits `assigned`; `_pull` syncs it when room is made
                upstream = await store.upstream_results(session, task)
                body = RunCreate(
                    agent_id=agent_id,
                    # Retries and rework continue the task's conversation.
                    conversation_id=previous.conversation_id if previous else None,
                    lane=store.task_lane(task.id),
                    input=run_input(task, feedback, upstream),
                    multitask=Multitask.REJECT,
                    metadata={"task_id": task.id},
                )
                created = await self._runs.create_in(session, body, key=None, now=self._clock())
        except LaneBusy:
            return None  # another process dispatched it
        self._runs.announce(created)
        log.info("task %s dispatched as run %s", task.id, created.run.id)
        return created.run

    async def _rejection(self, task_id: str, run_id: str) -> str | None:
        """The reviewer's reason when the review of this run rejected it (rework is due)."""
        async with self._sessionmaker() as session:
            review = await approval_store.latest_review(session, task_id)
        if review is None or review.decision is not ApprovalDecision.REJECTED:
            return None
        return review.reason if review.run_id == run_id else None

    async def _move(self, task: TaskRead, to: TaskStatus, why: str) -> TaskRead:
        mutation = TransitionTask(
            task.id, to, ACTOR, expected_version=task.version, reason=why, enforce_wip=False
        )
        return (await self._tasks.submit(mutation)).task

    async def _pull(self, task: TaskRead) -> None:
        """The task left `in_progress`, which makes room: the tasks that may have waited for
        that room are synced, oldest first, so the next ones start. Those are its project's
        ready tasks when a strict WIP limit holds the in_progress column, its workflow
        execution's when that has a branch limit, and those naming one of its resources."""
        async with self._sessionmaker() as session:
            waiting = []
            if task.resources or await dispatch_limits.execution_limit(session, task.id):
                waiting = await dispatch_limits.waiting_behind(session, task, limit=BATCH)
            if task.project is not None:
                waiting += await _wip_waiting(session, task.project)
        for task_id in sorted(set(waiting)):
            await _best_effort(self.sync(task_id))

    async def pull_project(self, project: str) -> None:
        """Room was made in the project (its workspace freed a worktree): its ready tasks
        are synced, oldest first, so those that waited start."""
        async with self._sessionmaker() as session:
            ready = await task_store.list_tasks(
                session,
                after_id=None,
                limit=BATCH,
                filters={"project": project, "status": T.ASSIGNED.value},
            )
        for task in ready:
            await _best_effort(self.sync(task.id))

    async def _sync_dependents(self, task_id: str) -> None:
        async with self._sessionmaker() as session:
            waiting = await store.dependents(session, task_id)
        for task in waiting:
            await _best_effort(self.sync(task.id))

    async def _cancel_runs(self, task_id: str) -> None:
        async with self._sessionmaker() as session:
            runs = await store.unsettled_runs(session, task_id)
        for run in runs:
            await _best_effort(self._runs.cancel(run.id))

    # -- catching up -----------------------------------------------------------------

    async def sweep(self) -> None:
        """After a restart or a missed event: every open task is synced once."""
        async with self._sessionmaker() as session:
            open_tasks = await store.tasks_in(
                session, [T.ASSIGNED, T.IN_PROGRESS, T.INTERRUPTED], limit=BATCH
            )
        for task in open_tasks:
            await _best_effort(self.sync(task.id))

    async def _follow(self) -> None:
        """One pass: the tasks of the runs board's new events synced. The first pass that
        reaches the database starts at the board's head, after one sweep over what came
        before (a pass that cannot read the head fails: the next one tries again)."""
        if self._cursor is None:
            self._cursor = await self._head()
            await _best_effort(self.sweep())
        while await self._catch_up():
            pass

    async def _head(self) -> int:
        async with self._sessionmaker() as session:
            return await event_store.last_seq(session, RUNS_STREAM)

    async def _catch_up(self) -> bool:
        """Sync the tasks of the runs board's new events; True when there may be more."""
        assert self._cursor is not None
        async with self._sessionmaker() as session:
            events = await event_store.read_events(
                session, RUNS_STREAM, after=self._cursor, limit=BATCH
            )
        for event in events:
            self._cursor = event.seq
            task_id = store.lane_task(str(event.data.get("lane", "")))
            if task_id is None:
                continue
            handed_back = event.type == "agent_run.interrupted"
            run_id = str(event.data["run_id"]) if handed_back else None
            await _best_effort(self.sync(task_id, interrupted_run=run_id))
        return len(events) == BATCH


async def has_room(session: AsyncSession, task: TaskRead) -> bool:
    """Whether a run may start for the task now: fewer of its project's other tasks work
    than the strict WIP limit of its in_progress column, fewer of its execution's other
    tasks than the execution's `max_parallel_tasks`, and no task that names one of its
    `resources` works (`tasks/store/dispatch_limits.py` says what "works" means).

    Across processes this is exact: the project's, the execution's and the resources'
    advisory locks are taken (in one order) before the counts, and held until the
    caller's transaction, which creates the run, commits; so a second dispatcher's count,
    made under the same locks, sees that run. Limits are checked only here: a run started
    some other way (a person's `POST /v1/runs` on the task's lane) is counted, never
    refused, and so is a task a person moves to `in_progress` (the TaskEngine checks that
    move against the WIP limit under its own lock)."""
    wip = await dispatch_limits.strict_wip_limit(session, task.project)
    execution = await dispatch_limits.execution_limit(session, task.id)
    keys = [dispatch_limits.resource_lock_key(r) for r in task.resources]
    if wip is not None and task.project is not None:
        keys.append(dispatch_limits.project_lock_key(task.project))
    if execution is not None:
        keys.append(dispatch_limits.execution_lock_key(execution[0]))
    if not keys:
        return await _worktree_room(session, task)
    await dispatch_limits.lock(session, keys)
    if wip is not None and task.project is not None:
        held = await dispatch_limits.working_in_project(session, task.project, other_than=task.id)
        if held >= wip:
            return False
    if execution is not None:
        execution_id, most = execution
        held = await dispatch_limits.working_in_execution(session, execution_id, other_than=task.id)
        if held >= most:
            return False
    if await dispatch_limits.holders(session, task.resources, other_than=task.id):
        return False
    return await _worktree_room(session, task)


async def _worktree_room(session: AsyncSession, task: TaskRead) -> bool:
    """A task of a project with a workspace, and no worktree yet, waits while the
    workspace's worktrees are all in use (its first file tool call would make one). A
    best-effort gate: the worktree's creation counts again under the workspace's lock."""
    if task.project is None:
        return True
    workspace = await workspace_store.get_workspace(session, task.project)
    if workspace is None or workspace.worktrees_in_use < workspace.max_worktrees:
        return True
    return await workspace_store.worktree_of_task(session, task.id) is not None


async def _wip_waiting(session: AsyncSession, project: str) -> list[str]:
    """The project's ready tasks when a strict WIP limit holds its in_progress column."""
    limit = (await boards.limits_of(session, project)).get(BoardColumn.IN_PROGRESS)
    if limit is None or limit.mode is not WipMode.STRICT:
        return []
    ready = await task_store.list_tasks(
        session,
        after_id=None,
        limit=BATCH,
        filters={"project": project, "status": T.ASSIGNED.value},
    )
    return [t.id for t in ready]


async def execution_stopped(session: AsyncSession, task_id: str) -> bool:
    """True for a task of a workflow execution that is no longer running."""
    if await workflow_store.workflow_of_task(session, task_id) is None:
        return False  # not a workflow's task
    return not await workflow_store.running_executions_of_tasks(session, [task_id])


async def _best_effort(work: Awaitable[Result]) -> Result | None:
    """Sync never stops on a failed step: log it, go on; None when it failed."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except AppError as exc:
        log.warning("task/run sync step refused: %s", exc)
    except Exception:
        log.exception("task/run sync step failed")
    return None
