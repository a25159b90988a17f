"""The execution observer: task changes move workflow executions.

The TaskEngine calls the observer after each committed mutation; it only notes the task
id and wakes its own loop, so the engine's writer never waits on workflow I/O. The loop
re-derives each affected running execution from the current task rows: node statuses,
then the execution's status, written with the version check in one transaction with
their events. Deriving from the rows (not from the event) makes a pass idempotent: a
duplicate, a late wake-up or the pass over every running execution at start-up (which
catches what happened while no process was watching) all converge on the same state.

    task status                                  node status
    created, assigned, blocked, interrupted      pending
    failed with a retry left                     pending (it will be reassigned)
    in_progress, in_review                       running
    completed                                    completed
    failed with no retry left                    failed     -> execution failed (below)
    cancelled, or deleted                        cancelled  -> execution cancelled
    every task node completed                               -> execution completed

A failed node isolates its failure: the other branches go on (pending ones still start,
unless they wait on the failed node), and the execution fails once none is running and
none pending can still start. With the definition's `fail_fast` it fails at once. Either
way, when the execution fails its open nodes become cancelled and so do its open tasks
(through the TaskEngine: whoever runs them stops; a task in review is left to its review).

Who wins: only a `running` execution is ever changed, under its row lock. A cancel
through the API and a pass of the observer therefore take turns; whichever commits
first ends the execution and the other finds it finished and leaves it alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import AppError
from app.core.requirements import Requirement, leaves, ready_nodes, still_possible
from app.core.states import ExecutionStatus, NodeStatus, TaskStatus
from app.core.streams import execution_stream
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.engine.task_mutations import UpdateTask
from app.tasks.schemas.tasks import TaskRead
from app.workflows import store
from app.workflows.engine import execution_transitions
from app.workflows.engine.workflows import cancel_open_tasks, execution_event, node_event
from app.workflows.schemas.workflows import ExecutionRead

log = logging.getLogger(__name__)

ACTOR = "workflow-observer"

_NODE_OF_TASK = {
    TaskStatus.CREATED: NodeStatus.PENDING,
    TaskStatus.ASSIGNED: NodeStatus.PENDING,
    TaskStatus.BLOCKED: NodeStatus.PENDING,
    TaskStatus.INTERRUPTED: NodeStatus.PENDING,
    TaskStatus.IN_PROGRESS: NodeStatus.RUNNING,
    TaskStatus.IN_REVIEW: NodeStatus.RUNNING,
    TaskStatus.COMPLETED: NodeStatus.COMPLETED,
    TaskStatus.CANCELLED: NodeStatus.CANCELLED,
}


def node_status_of(task: TaskRead | None) -> NodeStatus:
    if task is None:
        return NodeStatus.CANCELLED  # deleted under the execution
    if task.status is TaskStatus.FAILED:
        retry_left = task.retry_count < task.max_retries
        return NodeStatus.PENDING if retry_left else NodeStatus.FAILED
    return _NODE_OF_TASK[task.status]


def execution_status_of(
    node_status: Mapping[str, NodeStatus],
    waits_for: Mapping[str, Requirement],
    *,
    fail_fast: bool = False,
) -> ExecutionStatus:
    """The status of an execution whose task nodes (the keys of `waits_for`) stand so; the
    rules in order, the first that holds wins."""
    statuses = [node_status[n] for n in waits_for]
    failed = NodeStatus.FAILED in statuses
    if failed and (fail_fast or not _live(node_status, waits_for)):
        return ExecutionStatus.FAILED
    if NodeStatus.CANCELLED in statuses:
        return ExecutionStatus.CANCELLED
    if not failed and all(s is NodeStatus.COMPLETED for s in statuses):
        return ExecutionStatus.COMPLETED
    return ExecutionStatus.RUNNING


def _live(node_status: Mapping[str, NodeStatus], waits_for: Mapping[str, Requirement]) -> bool:
    """Whether a task node is running, or pending and able to start yet."""
    return any(
        node_status[n] in (NodeStatus.RUNNING, NodeStatus.PENDING)
        for n in still_possible(node_status, waits_for)
    )


def _open(node_status: Mapping[str, NodeStatus], task_nodes: Iterable[str]) -> list[str]:
    return [n for n in task_nodes if node_status[n] in (NodeStatus.PENDING, NodeStatus.RUNNING)]


def _reason(status: ExecutionStatus, node_status: Mapping[str, NodeStatus]) -> str | None:
    if status is ExecutionStatus.RUNNING:
        return None
    if status is ExecutionStatus.COMPLETED:
        return "every task completed"
    culprit = NodeStatus.FAILED if status is ExecutionStatus.FAILED else NodeStatus.CANCELLED
    nodes = ", ".join(n for n, s in node_status.items() if s is culprit)
    return f"task node(s) {nodes} {culprit.value}"


class ExecutionObserver:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        tasks: TaskEngine,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._tasks = tasks
        self._clock = clock
        self._changed: set[str] = set()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    async def __call__(self, result: MutationResult) -> None:
        """A TaskEngine observer: creation alone never moves an execution."""
        if result.change is not None and result.change.event_type != "task.created":
            self._changed.add(result.task.id)
            self._wake.set()

    def start(self) -> None:
        """Observe the TaskEngine (as the router, the task runs and the review gate do in
        their `start`), and follow what it notes."""
        if self._loop is None:
            self._tasks.add_observer(self)
            self._loop = asyncio.create_task(self._run(), name="workflow-execution-observer")

    async def stop(self, grace_s: float = 5.0) -> None:
        """Finish what is noted within the grace period; what is left is caught by the
        start-up pass of the next process."""
        if self._loop is None:
            return
        loop, self._loop = self._loop, None
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(loop), grace_s)
        except TimeoutError:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

    async def _run(self) -> None:
        await self.sync_all()
        while True:
            if not self._changed:
                if self._stopping:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            changed, self._changed = self._changed, set()
            await self._pass(changed)

    async def sync_all(self) -> None:
        """Sync every running execution: at start-up, and whenever a sweep is wanted (a
        pass that failed, say while the database was away, is made good by the next)."""
        await self._pass(None)

    async def _pass(self, task_ids: set[str] | None) -> None:
        """Sync the running executions that made these tasks (all of them for None). The
        loop must outlive a bad pass, and one execution's failure must not stop the rest."""
        try:
            async with self._sessionmaker() as session:
                if task_ids is None:
                    execution_ids = await store.running_execution_ids(session)
                else:
                    execution_ids = await store.running_executions_of_tasks(session, task_ids)
        except Exception:
            log.exception("workflow execution observer could not find the executions")
            return
        for execution_id in execution_ids:
            try:
                await self.sync(execution_id)
            except Exception:
                log.exception("workflow execution %s could not be synced", execution_id)

    async def sync(self, execution_id: str) -> ExecutionRead | None:
        """Bring one running execution in line with its tasks; None when not running."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            current = await store.get_execution(session, execution_id, lock=True)
            if current is None or current.status is not ExecutionStatus.RUNNING:
                return None
            tasks = await store.tasks_by_id(session, current.node_tasks.values())
            derived = {n: node_status_of(tasks.get(t)) for n, t in current.node_tasks.items()}
            node_status = current.node_status | derived
            status = execution_status_of(
                node_status, current.waits_for, fail_fast=current.fail_fast
            )
            if status is ExecutionStatus.FAILED:  # nothing more runs: what is open is cancelled
                node_status |= {n: NodeStatus.CANCELLED for n in _open(node_status, derived)}
            changed = {n: s for n, s in node_status.items() if current.node_status[n] is not s}
            if not changed and status is current.status:
                return current
            values: dict[str, object] = {
                "node_status": {n: s.value for n, s in node_status.items()},
                "status": status,
                "reason": _reason(status, node_status),
                "finished_at": None if status is ExecutionStatus.RUNNING else now,
            }
            synced = await execution_transitions.update(session, current, values)
            events = [
                node_event(n, current.node_tasks.get(n), current.node_status[n], s, synced.progress)
                for n, s in changed.items()
            ]
            if status is not current.status:
                events.append(execution_event(f"workflow.execution.{status.value}", synced))
            await event_store.append_events(session, execution_stream(execution_id), events, now)
        published(self._bus, [Written(execution_stream(execution_id))])
        if status is ExecutionStatus.FAILED:
            why = f"workflow execution {execution_id} failed"
            await cancel_open_tasks(self._sessionmaker, self._tasks, synced, ACTOR, why)
            return synced
        await self._narrow_dependencies(synced, tasks)
        return synced

    async def _narrow_dependencies(
        self, execution: ExecutionRead, tasks: Mapping[str, TaskRead]
    ) -> None:
        """A task behind an `any` join lists every task it might wait on; once one branch
        has met its requirement, its dependencies become the completed tasks, so whoever
        dispatches tasks whose dependencies are all completed can start it."""
        completed = {n for n, s in execution.node_status.items() if s is NodeStatus.COMPLETED}
        for node_id in ready_nodes(execution.node_status, execution.waits_for):
            task = tasks.get(execution.node_tasks[node_id])
            met = [
                execution.node_tasks[n]
                for n in leaves(execution.waits_for[node_id])
                if n in completed
            ]
            if task is None or set(task.dependencies) <= set(met):
                continue
            try:
                await self._tasks.submit(UpdateTask(task.id, {"dependencies": met}, ACTOR))
            except AppError as exc:  # best effort: the next change of the execution retries
                log.warning("could not narrow the dependencies of %s: %s", task.id, exc)
