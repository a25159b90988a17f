"""The phases of one coordination, each a step of `Phases.advance`:

    decompose   the request's DAG, or the decomposer agent's (one LLM call, validated)
    route       the subtasks become child tasks of the parent (`created`); each is given
                an agent by the routing strategy, wave by wave (a wave's subtasks spread)
    topology    the requested topology (or `auto`) resolved per wave; sas waves go to the
                backbone agent (the orchestrator)
    validate    fails when no subtask has an agent
    dispatch    the parent goes `in_progress`; wave after wave, subtasks are assigned to
                their agents (at most `max_concurrency_per_wave` unsettled at once; one at a
                time in a sas wave), and the task-runs bridge runs each on its own lane,
                with the review gate after it; the roll-up cancels what can no longer run.
                Once every subtask settled: the peers' debate rounds (decentralized), then
                the orchestrator's synthesis on the parent's lane (centralized,
                decentralized, context_dependent with a centralized wave)
    roll_up     the subtasks' statuses (and the synthesis) become the parent's outcome
    update_parent  the parent walks to it: `in_review` (its review decides), `failed` or
                `cancelled`; the coordination settles

Every pass re-derives what to do from the rows (the coordination, the child tasks, the
runs), so a pass repeated, late or made after a crash converges. What a phase makes is
found again rather than made twice: child tasks have ids derived from the coordination
and the subtask's index, the coordinator's runs are created under keys of their own
(`identity.py`), and a phase is recorded compare-and-set on the phase it was in, so of
two coordinators (two processes) one records and the other's write is stale. A person
cancelling (or completing) the parent calls the coordination off.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentRead
from app.agents.store import agents as agent_store
from app.coordination import store
from app.coordination.engine.dag import SubtaskDag
from app.coordination.engine.decomposer import Decomposer, DecompositionFailed
from app.coordination.engine.log import CoordinationLog, Waiting
from app.coordination.engine.roll_up import roll_up
from app.coordination.engine.synthesis import Synthesis, synthesised
from app.coordination.engine.topology import resolve_topology
from app.coordination.schemas import CoordinationRead, Decomposition, SubtaskState
from app.core.crashpoints import crash_point
from app.core.errors import AppError, VersionConflict
from app.core.states import (
    TASK_TERMINAL,
    ExecutionStatus,
    NodeStatus,
    RunStatus,
    TaskStatus,
    task_path,
)
from app.core.vocabulary import (
    CoordinationPhase,
    CoordinationRunPurpose,
    CoordinationTopology,
    PhaseOutcome,
)
from app.db.errors import StaleWrite
from app.routing.engine.base import Unroutable
from app.routing.engine.router import TaskRouter
from app.runs.store import runs as run_store
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import AssignTask, CreateTask, TransitionTask
from app.tasks.schemas.tasks import RouteRequest, TaskCreate, TaskRead
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store
from app.workflows.engine.workflow_observer import node_status_of

log = logging.getLogger(__name__)

ACTOR = "coordinator"
Phase = CoordinationPhase
Topology = CoordinationTopology
_SETTLED = frozenset({NodeStatus.COMPLETED, NodeStatus.FAILED, NodeStatus.CANCELLED})
_OUTCOME_STATUS = {
    TaskStatus.COMPLETED: ExecutionStatus.COMPLETED,
    TaskStatus.FAILED: ExecutionStatus.FAILED,
    TaskStatus.CANCELLED: ExecutionStatus.CANCELLED,
}


def child_id(coordination_id: str, index: int) -> str:
    """Subtask `index`'s task id: derived, so a coordinator that crashed while creating
    the subtasks finds the ones it made (a second create is refused as existing)."""
    return f"task_{coordination_id.removeprefix('coord_')}_{index}"


class Phases:
    """Runs a coordination's phases: what the coordinator calls for each coordination it
    drives (one pass at a time per coordination, in this process)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        tasks: TaskEngine,
        router: TaskRouter,
        decomposer: Decomposer,
        log: CoordinationLog,
        synthesis: Synthesis,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._tasks = tasks
        self._router = router
        self._decomposer = decomposer
        self._log = log
        self._synthesis = synthesis

    async def advance(self, coordination_id: str) -> None:
        """Run phases until one has to wait or the coordination settles."""
        while True:
            async with self._sessionmaker() as session:
                coordination = await store.get_coordination(session, coordination_id)
                parent = (
                    await task_store.get_task(session, coordination.parent_task_id)
                    if coordination
                    else None
                )
            if coordination is None or parent is None:
                return  # deleted with its parent
            if coordination.status is not ExecutionStatus.RUNNING:
                return
            try:
                if parent.status in TASK_TERMINAL and coordination.phase is not Phase.UPDATE_PARENT:
                    await self._called_off(coordination, parent)
                else:
                    await self._PHASES[coordination.phase](self, coordination, parent)
            except Waiting:
                return
            except (StaleWrite, VersionConflict):
                # Another writer moved it on (a coordinator elsewhere, or the parent's own
                # run finishing): read it again. Each phase is safe to run again.
                continue

    async def _called_off(self, c: CoordinationRead, parent: TaskRead) -> None:
        reason = f"the parent task was {parent.status.value} while it was coordinated"
        await self._cancel_children(c, range(len(c.subtasks)), reason)
        await self._log.record(
            c,
            PhaseOutcome.FAILED,
            reason,
            status=ExecutionStatus.CANCELLED,
            reason=reason,
        )

    # -- decompose ---------------------------------------------------------------------

    async def _decompose(self, c: CoordinationRead, parent: TaskRead) -> None:
        given = c.request.decomposition
        if given is not None:
            decomposition, outcome = given, PhaseOutcome.SKIPPED
            detail = f"given with the request: {len(given.subtasks)} subtasks"
        else:
            agent = await self._agent(c.request.options.decomposer)
            if agent is None:
                await self._fail(c, "the decomposer agent no longer exists")
                return
            try:
                async with self._sessionmaker() as session:
                    team = await agent_store.all_agents(session)
                decomposition = await self._decomposer.decompose(parent, agent, team=team)
            except DecompositionFailed as exc:
                await self._fail(c, f"decomposition failed: {exc.reason}")
                return
            outcome = PhaseOutcome.OK
            detail = f"{agent.name} decomposed it into {len(decomposition.subtasks)} subtasks"
        dag = SubtaskDag.of(decomposition)
        waves = dag.waves()
        wave_of = {i: w for w, wave in enumerate(waves) for i in wave}
        subtasks = [
            SubtaskState(index=i, task_id=child_id(c.id, i), wave=wave_of[i])
            for i in range(len(decomposition.subtasks))
        ]
        crash_point("coordination_decomposed")
        await self._log.record(
            c,
            outcome,
            detail,
            next_phase=Phase.ROUTE,
            decomposition=decomposition.model_dump(mode="json"),
            subtasks=_dumped(subtasks),
        )

    # -- route -------------------------------------------------------------------------

    async def _route(self, c: CoordinationRead, parent: TaskRead) -> None:
        decomposition = _decomposition(c)
        children = await self._create_children(c, parent, decomposition)
        options = c.request.options
        routed: list[SubtaskState] = []
        planned: dict[str, int] = {}
        for state in sorted(c.subtasks, key=lambda s: (s.wave, s.index)):
            if state.wave != (routed[-1].wave if routed else 0):
                planned = {}  # another wave: the last one's subtasks will have finished
            draft = decomposition.subtasks[state.index]
            request = RouteRequest(
                strategy=options.routing_strategy,
                role=draft.role,
                skills=draft.required_skills,
                agent=options.orchestrator,
            )
            choice = await self._router.plan(children[state.index], request, planned)
            if isinstance(choice, Unroutable):
                routed.append(state.model_copy(update={"route_reason": choice.reason}))
                continue
            planned[choice.agent_id] = planned.get(choice.agent_id, 0) + 1
            routed.append(
                state.model_copy(
                    update={"agent_id": choice.agent_id, "route_reason": choice.reason}
                )
            )
        routed.sort(key=lambda s: s.index)
        unroutable = [s.index for s in routed if s.agent_id is None]
        detail = f"{len(routed) - len(unroutable)} of {len(routed)} subtasks have an agent"
        if unroutable:
            detail += "; none for subtask(s) " + ", ".join(map(str, unroutable))
        crash_point("coordination_routed")
        await self._log.record(
            c, PhaseOutcome.OK, detail, next_phase=Phase.TOPOLOGY, subtasks=_dumped(routed)
        )

    async def _create_children(
        self, c: CoordinationRead, parent: TaskRead, decomposition: Decomposition
    ) -> dict[int, TaskRead]:
        """The subtasks as child tasks of the parent, `created` (nobody's until dispatch),
        with their DAG as task dependencies. Those a crashed pass made already are kept."""
        existing = await self._children(c)
        made: dict[int, TaskRead] = {}
        for state in c.subtasks:
            if state.index in existing:
                made[state.index] = existing[state.index]
                continue
            draft = decomposition.subtasks[state.index]
            dag = SubtaskDag.of(decomposition)
            fields = TaskCreate(
                title=draft.title,
                description=draft.description,
                type=parent.type,
                priority=parent.priority,
                project=parent.project,
                reviewers=parent.reviewers,
                dependencies=[child_id(c.id, d) for d in dag.dependencies[state.index]],
                acceptance_criteria=draft.acceptance_criteria,
                estimated_complexity=draft.estimated_complexity or parent.estimated_complexity,
                max_retries=parent.max_retries,
                parent_task_id=parent.id,
                delegation_chain=parent.delegation_chain,
                created_by=ACTOR,
            )
            mutation = CreateTask(fields, ACTOR, task_id=state.task_id)
            made[state.index] = (await self._tasks.submit(mutation)).task
        return made

    # -- topology and validation -------------------------------------------------------

    async def _topology(self, c: CoordinationRead, parent: TaskRead) -> None:
        waves = _waves(c)
        requested = c.request.options.topology or parent.coordination_topology
        choice = resolve_topology(parent.task_structure, requested, [len(w) for w in waves])
        orchestrator = await self._agent(c.request.options.orchestrator)
        backbone = orchestrator.id if orchestrator else _first_routed(c.subtasks)
        subtasks = [
            s.model_copy(update={"agent_id": backbone, "route_reason": "the sas backbone"})
            if backbone and choice.per_wave[s.wave] is Topology.SAS
            else s
            for s in c.subtasks
        ]
        await self._log.record(
            c,
            PhaseOutcome.OK,
            choice.reason,
            next_phase=Phase.VALIDATE,
            topology=choice.topology,
            wave_topologies=[t.value for t in choice.per_wave],
            orchestrator_agent_id=backbone,
            subtasks=_dumped(subtasks),
        )

    async def _validate(self, c: CoordinationRead, parent: TaskRead) -> None:
        if all(s.agent_id is None for s in c.subtasks):
            reasons = "; ".join(f"{s.index}: {s.route_reason}" for s in c.subtasks)
            reason = f"no subtask could be routed ({reasons})"
            await self._cancel_children(c, range(len(c.subtasks)), reason)
            await self._fail(c, reason)
            return
        waves = ", ".join(str(w) for w in _waves(c))
        detail = f"{len(c.subtasks)} subtasks in {len(_waves(c))} wave(s): {waves}"
        await self._log.record(c, PhaseOutcome.OK, detail, next_phase=Phase.DISPATCH)

    # -- dispatch ----------------------------------------------------------------------

    async def _dispatch(self, c: CoordinationRead, parent: TaskRead) -> None:
        # The parent is the coordination's (by its id: no agent holds it, so no agent's
        # capacity goes to waiting on its own subtasks).
        await self._walk(
            parent, TaskStatus.IN_PROGRESS, f"coordination {c.id} dispatches", owner=c.id
        )
        children = await self._children(c)
        unroutable = [s.index for s in c.subtasks if s.agent_id is None]
        await self._cancel_children(c, unroutable, "no agent could take this subtask")
        statuses = [node_status_of(children.get(s.index)) for s in c.subtasks]
        rolled = roll_up(statuses, _dag(c), fail_fast=c.request.options.fail_fast)
        await self._cancel_children(c, rolled.cancel, rolled.reason)
        if rolled.outcome is None:
            await self._accept_reviews(c, children)
            await self._start_wave(c, children, statuses, set(rolled.cancel))
            raise Waiting
        synthesis = ""
        if rolled.outcome is TaskStatus.COMPLETED and synthesised(c):
            synthesis = await self._synthesis.run(c, parent, children)
        counts = {s: statuses.count(s) for s in _SETTLED if statuses.count(s)}
        detail = ", ".join(f"{n} {s.value}" for s, n in sorted(counts.items()))
        await self._log.record(c, PhaseOutcome.OK, detail + synthesis, next_phase=Phase.ROLL_UP)

    async def _start_wave(
        self,
        c: CoordinationRead,
        children: dict[int, TaskRead],
        statuses: Sequence[NodeStatus],
        cancelling: set[int],
    ) -> None:
        """Assign the subtasks of the first wave not yet settled, up to its concurrency."""
        waves = _waves(c)
        current = next(
            (
                w
                for w, wave in enumerate(waves)
                if any(statuses[i] not in _SETTLED and i not in cancelling for i in wave)
            ),
            None,
        )
        if current is None:
            return
        limit = c.request.options.max_concurrency_per_wave or len(waves[current])
        if c.wave_topologies[current] is Topology.SAS:
            limit = 1  # one agent works the backbone, one subtask after another
        wave = [i for i in waves[current] if i not in cancelling]
        working = sum(
            1
            for i in wave
            if statuses[i] not in _SETTLED and children[i].status is not TaskStatus.CREATED
        )
        for i in wave:
            task, state = children.get(i), c.subtasks[i]
            if working >= limit:
                return
            if task is None or task.status is not TaskStatus.CREATED or state.agent_id is None:
                continue  # deleted (it counts as cancelled), started, or nobody's
            mutation = AssignTask(
                task.id,
                state.agent_id,
                c.request.options.routing_strategy,
                ACTOR,
                f"coordination {c.id}, wave {current}: {state.route_reason}",
            )
            try:
                await self._tasks.submit(mutation)
            except AppError as exc:  # full for now (or moved by hand): the next pass retries
                log.info("coordination %s: subtask %s not started: %s", c.id, i, exc)
                continue
            working += 1
            await self._log.event(
                c,
                "coordination.subtask.started",
                {"index": i, "task_id": task.id, "agent_id": state.agent_id, "wave": current},
            )
            crash_point("coordination_dispatched")

    async def _accept_reviews(self, c: CoordinationRead, children: dict[int, TaskRead]) -> None:
        """With `auto_accept`, a subtask in review is completed by the coordinator (the
        review gate withdraws the review it asked)."""
        if not c.request.options.auto_accept:
            return
        for task in children.values():
            if task.status is TaskStatus.IN_REVIEW:
                await self._walk(task, TaskStatus.COMPLETED, f"accepted by coordination {c.id}")

    # -- roll-up and the parent ----------------------------------------------------------

    async def _roll_up(self, c: CoordinationRead, parent: TaskRead) -> None:
        children = await self._children(c)
        statuses = [node_status_of(children.get(s.index)) for s in c.subtasks]
        rolled = roll_up(statuses, _dag(c), fail_fast=c.request.options.fail_fast)
        outcome, reason = rolled.outcome or TaskStatus.FAILED, rolled.reason
        synthesis = next((r for r in c.runs if r.purpose is CoordinationRunPurpose.SYNTHESIS), None)
        if outcome is TaskStatus.COMPLETED and synthesis is not None:
            async with self._sessionmaker() as session:
                run = await run_store.get_run(session, synthesis.run_id)
            if run is None or run.status is not RunStatus.COMPLETED:
                status = run.status.value if run else "gone"
                outcome, reason = (
                    TaskStatus.FAILED,
                    f"the synthesis run {synthesis.run_id} {status}",
                )
        await self._log.record(
            c,
            PhaseOutcome.OK,
            f"{outcome.value}: {reason}",
            next_phase=Phase.UPDATE_PARENT,
            outcome=outcome.value,
            reason=reason,
        )

    async def _update_parent(self, c: CoordinationRead, parent: TaskRead) -> None:
        outcome = c.outcome or TaskStatus.FAILED
        why = f"coordination {c.id}: {c.reason}"
        target = TaskStatus.IN_REVIEW if outcome is TaskStatus.COMPLETED else outcome
        if parent.status not in TASK_TERMINAL:
            parent = await self._walk(parent, target, why)
            if c.request.options.auto_accept and parent.status is TaskStatus.IN_REVIEW:
                parent = await self._walk(parent, TaskStatus.COMPLETED, why)
        crash_point("coordination_parent_updated")
        await self._log.record(
            c,
            PhaseOutcome.OK,
            f"the parent task is {parent.status.value}",
            status=_OUTCOME_STATUS[outcome],
        )

    # -- helpers -------------------------------------------------------------------------

    async def _walk(
        self, task: TaskRead, target: TaskStatus, why: str, *, owner: str | None = None
    ) -> TaskRead:
        """Move a task along the table's shortest path to `target` (each step audited);
        a task already past it, or with no way there, stays. A step to `assigned` gives
        an unowned task to `owner`."""
        for step in task_path(task.status, target) or ():
            overrides = (
                {"assigned_to": owner}
                if step is TaskStatus.ASSIGNED and task.assigned_to is None and owner
                else {}
            )
            mutation = TransitionTask(
                task.id,
                step,
                ACTOR,
                expected_version=task.version,
                reason=why,
                overrides=overrides,
                enforce_wip=False,  # the coordination's bookkeeping, not a pull of new work
            )
            task = (await self._tasks.submit(mutation)).task
        return task

    async def _cancel_children(
        self, c: CoordinationRead, indices: Sequence[int] | range, reason: str
    ) -> None:
        """Cancel subtasks not yet settled; one never started (`created`, which only
        assignment leaves) is given to the coordination on its way."""
        if not indices:
            return
        children = await self._children(c)
        for i in indices:
            task = children.get(i)
            if task is None or task.status in TASK_TERMINAL:
                continue
            try:
                await self._walk(task, TaskStatus.CANCELLED, reason, owner=c.id)
            except AppError as exc:  # moved meanwhile: the next pass sees it
                log.info("coordination %s: subtask %s not cancelled: %s", c.id, i, exc)

    async def _children(self, c: CoordinationRead) -> dict[int, TaskRead]:
        ids = {s.task_id: s.index for s in c.subtasks}
        async with self._sessionmaker() as session:
            found = await task_store.get_tasks(session, list(ids))
        return {ids[t.id]: t for t in found}

    async def _agent(self, name: str | None) -> AgentRead | None:
        if name is None:
            return None
        async with self._sessionmaker() as session:
            agent_id = await task_run_store.resolve_agent(session, name)
            return await agent_store.get_agent(session, agent_id) if agent_id else None

    async def _fail(self, c: CoordinationRead, reason: str) -> None:
        await self._log.record(
            c, PhaseOutcome.FAILED, reason, status=ExecutionStatus.FAILED, reason=reason
        )

    _PHASES = {
        Phase.DECOMPOSE: _decompose,
        Phase.ROUTE: _route,
        Phase.TOPOLOGY: _topology,
        Phase.VALIDATE: _validate,
        Phase.DISPATCH: _dispatch,
        Phase.ROLL_UP: _roll_up,
        Phase.UPDATE_PARENT: _update_parent,
    }


def _decomposition(c: CoordinationRead) -> Decomposition:
    assert c.decomposition is not None  # recorded by the decompose phase
    return c.decomposition


def _dag(c: CoordinationRead) -> SubtaskDag:
    return SubtaskDag.of(_decomposition(c))


def _waves(c: CoordinationRead) -> list[list[int]]:
    return _dag(c).waves()


def _first_routed(subtasks: Sequence[SubtaskState]) -> str | None:
    return next((s.agent_id for s in sorted(subtasks, key=lambda s: s.index) if s.agent_id), None)


def _dumped(subtasks: Sequence[SubtaskState]) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json") for s in subtasks]
