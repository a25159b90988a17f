"""The end of a dispatch whose subtasks all completed: the peers' debate rounds
(decentralized: each peer sees the others' latest results on the shared thread and revises
its own) and the orchestrator's synthesis run, on the parent's lane so the parent's review
shows it.

Each run is created under its key (`identity.run_key`) in the transaction that records it
in the coordination, and found there on the next pass, so a pass repeated after a crash
never makes one twice. A pass that finds a run still working raises `Waiting`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.coordination import store
from app.coordination.engine import identity, prompts
from app.coordination.engine.log import CoordinationLog, Waiting
from app.coordination.schemas import CoordinationRead, CoordinationRun
from app.core.crashpoints import crash_point
from app.core.states import RunStatus
from app.core.vocabulary import CoordinationRunPurpose, CoordinationTopology
from app.runs.engine.runs import RunCommands
from app.runs.schemas.runs import RunCreate, RunRead
from app.runs.store import runs as run_store
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import task_runs as task_run_store

# A run in these states no longer works (as the task-runs bridge counts them).
RUN_DONE = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED}
)
SYNTHESISED = frozenset({CoordinationTopology.CENTRALIZED, CoordinationTopology.DECENTRALIZED})


def synthesised(c: CoordinationRead) -> bool:
    """Centralized and decentralized end with a synthesis; context_dependent when one of
    its waves fanned out (centralized)."""
    return any(t in SYNTHESISED for t in [c.topology, *c.wave_topologies])


class Synthesis:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        runs: RunCommands,
        log: CoordinationLog,
        clock: Callable[[], datetime],
    ) -> None:
        self._sessionmaker = sessionmaker
        self._runs = runs
        self._log = log
        self._clock = clock

    async def run(
        self, c: CoordinationRead, parent: TaskRead, children: dict[int, TaskRead]
    ) -> str:
        """The peers' rounds, then the synthesis; `Waiting` until its run is done. Answers
        the phase detail's addition."""
        results = await self._results(c, children)
        if c.topology is CoordinationTopology.DECENTRALIZED:
            for round_ in range(1, c.request.options.debate_rounds + 1):
                results = await self._debate_round(c, parent, children, round_, results)
        synthesis = await self._run_of(
            c,
            CoordinationRunPurpose.SYNTHESIS,
            None,
            None,
            RunCreate(
                agent_id=c.orchestrator_agent_id or "",
                lane=task_run_store.task_lane(parent.id),
                input=prompts.synthesis_input(parent, [results[i] for i in sorted(results)]),
                metadata={"coordination_id": c.id, "task_id": parent.id},
            ),
        )
        if synthesis.status not in RUN_DONE:
            raise Waiting
        return f"; synthesis run {synthesis.id} {synthesis.status.value}"

    async def _debate_round(
        self,
        c: CoordinationRead,
        parent: TaskRead,
        children: dict[int, TaskRead],
        round_: int,
        results: dict[int, prompts.Contribution],
    ) -> dict[int, prompts.Contribution]:
        """Each peer sees the others' latest results and revises its own, all at once;
        the round's answers (a peer whose run did not complete keeps its last one)."""
        rounds = c.request.options.debate_rounds
        runs: dict[int, RunRead] = {}
        for i, own in results.items():
            state, previous = c.subtasks[i], await self._latest_run(children[i].id)
            others = [results[j] for j in sorted(results) if j != i]
            runs[i] = await self._run_of(
                c,
                CoordinationRunPurpose.PEER,
                round_,
                i,
                RunCreate(
                    agent_id=state.agent_id or "",
                    conversation_id=previous.conversation_id if previous else None,
                    lane=task_run_store.task_lane(children[state.index].id),
                    input=prompts.peer_input(parent, round_, rounds, own, others),
                    metadata={"coordination_id": c.id, "task_id": children[state.index].id},
                ),
            )
        if any(run.status not in RUN_DONE for run in runs.values()):
            raise Waiting
        return {
            i: prompts.Contribution(own.title, runs[i].result or own.text)
            if runs[i].status is RunStatus.COMPLETED
            else own
            for i, own in results.items()
        }

    async def _run_of(
        self,
        c: CoordinationRead,
        purpose: CoordinationRunPurpose,
        round_: int | None,
        index: int | None,
        create: RunCreate,
    ) -> RunRead:
        """The coordinator's run for this purpose, created under its key the first time."""
        for made in c.runs:
            if (made.purpose, made.round, made.index) == (purpose, round_, index):
                async with self._sessionmaker() as session:
                    run = await run_store.get_run(session, made.run_id)
                if run is not None:
                    return run
        slot = ":".join(str(p) for p in (purpose.value, round_, index) if p is not None)
        entry_of = {"purpose": purpose.value, "round": round_, "index": index}
        async with self._sessionmaker() as session, session.begin():
            # The run and its place in the coordination commit together; the key makes a
            # coordinator in another process that raced this one find the same run.
            created = await self._runs.create_in(
                session, create, key=identity.run_key(c.id, slot), now=self._clock()
            )
            entry = CoordinationRun(run_id=created.run.id, **entry_of)
            runs = [r for r in c.runs if r.run_id != entry.run_id] + [entry]
            await store.set_runs(session, c.id, runs)
            if not created.replayed:
                data = {**entry_of, "run_id": created.run.id}
                await self._log.append(session, c, "coordination.run.created", data)
        self._runs.announce(created)
        self._log.heard(c)
        if purpose is CoordinationRunPurpose.SYNTHESIS:
            crash_point("coordination_synthesis_created")
        c.runs[:] = runs
        return created.run

    async def _results(
        self, c: CoordinationRead, children: dict[int, TaskRead]
    ) -> dict[int, prompts.Contribution]:
        found: dict[int, prompts.Contribution] = {}
        for state in c.subtasks:
            run = await self._latest_run(children[state.index].id)
            title = children[state.index].title
            found[state.index] = prompts.Contribution(title, (run.result if run else None) or "")
        return found

    async def _latest_run(self, task_id: str) -> RunRead | None:
        async with self._sessionmaker() as session:
            return await task_run_store.latest_run(session, task_id)
