"""Run commands from outside the loop: create (with the lane's multitask policy), cancel,
and a human's response. Each is one short transaction that checks the transition,
compare-and-sets the version and appends its events; the bus hears of it after commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.store import agents as agent_store
from app.core.errors import Conflict, InvalidTransition, NotFound, ProblemCode, ValidationFailed
from app.core.ids import new_id
from app.core.messages import Message, pending_tool_uses, results_message
from app.core.states import RUN_ALLOWED, RunStatus, StopReason, WaitReason, check_run_transition
from app.core.streams import StreamEvent, run_stream
from app.core.vocabulary import Multitask, StepKind
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.events.engine.bus import EventBus
from app.events.engine.published import published, run_written
from app.runs.engine import run_transitions
from app.runs.schemas.history import RunFork
from app.runs.schemas.runs import RunCreate, RunRead, Usage
from app.runs.store import conversations, history
from app.runs.store import runs as run_store
from app.telemetry import tracing
from app.telemetry.metrics import Metrics

CREATE_SCOPE = "runs.create"
# Keys of child runs, made by `spawn_child_runs` from the parent's tool call: they record
# the parent (`run_id`), so they are kept while it may run again (and re-run a spawn cut
# short), not for the clients' window. A scope of their own: a client's key spelled the
# same neither finds nor blocks a child.
SPAWN_SCOPE = "runs.spawn"
CANCELLED_WHILE_WAITING = "cancelled before a human answered"


class ResumeUnavailable(Conflict):
    """Only a timed-out run whose last checkpoint is a resumable boundary can be resumed;
    `POST /v1/runs/{id}/retry` starts another attempt of any failed run."""

    code = ProblemCode.RESUME_UNAVAILABLE

    def __init__(self, status: RunStatus, resume_available: bool) -> None:
        self.status = status
        self.resume_available = resume_available
        super().__init__(
            f"the run is {status.value} (resume_available={str(resume_available).lower()})"
        )

    def extensions(self) -> dict[str, Any]:
        # `run_status`: a problem's own `status` is its HTTP status.
        return {"run_status": self.status.value, "resume_available": self.resume_available}


class LaneBusy(Conflict):
    """The lane is busy and the run asked not to wait (`multitask: reject`)."""

    code = ProblemCode.LANE_BUSY

    def __init__(self, lane: str, holder: str) -> None:
        self.lane = lane
        self.holder = holder
        super().__init__(f"lane {lane!r} is held by run {holder!r}")

    def extensions(self) -> dict[str, Any]:
        return {"lane": self.lane, "holder": self.holder}


@dataclass(frozen=True)
class RunCreated:
    """What a create did: the run (as it is now, for a replay), whether it is a replay, and
    the runs an `interrupt` cancelled (or asked to stop)."""

    run: RunRead
    replayed: bool
    superseded: list[RunRead] = field(default_factory=list)


def _cancel_event(run: RunRead) -> str:
    """What a cancel did to this run: settled it, or asked its loop to stop."""
    return (
        "agent_run.cancelled" if run.status is RunStatus.CANCELLED else "agent_run.cancel_requested"
    )


class RunCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._clock = clock
        self._metrics = metrics
        self._idempotency_retention = idempotency_retention

    def _published(self, *runs: RunRead, event: str | None = None) -> None:
        """After commit: wake readers of the runs' streams, log and count what happened
        (a run settled here, cancelled before a loop held it, is an outcome too)."""
        written = [run_written(run, [(event or _cancel_event(run), {})]) for run in runs]
        published(self._bus, written, metrics=self._metrics)
        for run in runs:
            if event is None and run.status is RunStatus.RUNNING:  # its loop has yet to see it
                asked = {"run_id": run.id, "status": run.status.value}
                self._bus.publish_ephemeral(run_stream(run.id), "agent_run.cancel_requested", asked)

    async def create(
        self,
        body: RunCreate,
        *,
        parent_run_id: str | None = None,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[RunRead, bool]:
        """The queued run, and whether it is an idempotent replay of an earlier create.
        A client's key is remembered for the retention window; a child's (`parent_run_id`:
        made by the parent's tool call) for as long as its parent may run again."""
        scope = CREATE_SCOPE if parent_run_id is None else SPAWN_SCOPE
        key = CreateKey.of(scope, idempotency_key, request_hash, run_id=parent_run_id)
        async with self._sessionmaker() as session, session.begin():
            created = await self.create_in(
                session, body, key=key, now=self._clock(), parent_run_id=parent_run_id
            )
        self.announce(created)
        return created.run, created.replayed

    async def create_in(
        self,
        session: AsyncSession,
        body: RunCreate,
        *,
        key: CreateKey | None,
        now: datetime,
        parent_run_id: str | None = None,
    ) -> RunCreated:
        """`create` inside the caller's transaction (a trigger's fire writes its own rows
        with the run's): the caller commits, then hands the result to `announce`. An error
        may leave rows written in the session: run it in a savepoint to go on after one."""
        touched: list[RunRead] = []
        keyed = await keyed_create(session, key, now=now, retention=self._idempotency_retention)
        if keyed.replay is not None:  # a repeat gets the run as it is now
            replay = await run_store.get_run(session, keyed.replay.resource_id)
            if replay is not None:
                return RunCreated(replay, replayed=True)
        if await agent_store.get_agent(session, body.agent_id) is None:
            raise NotFound("agent", body.agent_id)
        conversation_id = body.conversation_id or new_id("conv")
        if body.conversation_id is None:
            await conversations.create_conversation(session, conversation_id)
        elif not await conversations.exists(session, conversation_id):
            raise NotFound("conversation", conversation_id)
        lane = body.lane or f"conversation:{conversation_id}"
        # Serialise creates on one lane, so that `reject` and `interrupt` see each other.
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lane))"), {"lane": lane})
        active, queued = await run_store.lane(session, lane)
        if body.multitask is Multitask.REJECT and (active or queued):
            raise LaneBusy(lane, (active or queued[0]).id)
        if body.multitask is Multitask.INTERRUPT:
            touched += await self._supersede(session, active, queued, now)
        run = await run_store.insert_run(
            session,
            _queued_run(
                agent_id=body.agent_id,
                conversation_id=conversation_id,
                lane=lane,
                input_text=body.input,
                multitask=body.multitask,
                metadata=body.metadata,
                now=now,
                parent_run_id=parent_run_id,
                not_before=body.not_before,
            ),
        )
        delayed = {"not_before": run.not_before.isoformat()} if run.not_before else {}
        opened: StreamEvent = ("agent_run.queued", {"lane": lane} | delayed)
        await run_transitions.record(session, run, now, events=[opened])
        await keyed.remember(run.id)
        return RunCreated(run, replayed=False, superseded=touched)

    def announce(self, created: RunCreated) -> None:
        """After the commit of `create_in`: wake the readers (the workers among them)."""
        if created.replayed:
            return
        self._published(created.run, event="agent_run.queued")
        self._published(*created.superseded)

    async def _supersede(
        self,
        session: AsyncSession,
        active: RunRead | None,
        queued: list[RunRead],
        now: datetime,
    ) -> list[RunRead]:
        """`interrupt`: the queued runs are cancelled now, the active one at its next
        boundary (or now, when it waits on a human)."""
        touched = [await self._cancel_locked(session, run, now) for run in queued]
        if active is not None:
            touched.append(await self._cancel_locked(session, active, now))
        return touched

    async def cancel(self, run_id: str) -> RunRead:
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            run = await run_store.get_run(session, run_id, lock=True)
            if run is None:
                raise NotFound("run", run_id)
            run = await self._cancel_locked(session, run, now)
        self._published(run)
        return run

    async def _cancel_locked(self, session: AsyncSession, run: RunRead, now: datetime) -> RunRead:
        check_run_transition(run.status, RunStatus.CANCELLED)
        if run.status is RunStatus.RUNNING:
            # The loop sees the flag at its next boundary; nothing is interrupted mid-tool.
            if run.cancel_requested:
                return run
            changed = await run_store.update_run(
                session,
                run.id,
                read_version=run.version,
                values={"cancel_requested": True, "cancel_requested_at": now},
            )
            assert changed is not None  # the row is locked
            # Its history is its worker's to write: the request goes to the board and its
            # lane, and to the run's live readers; its loop records the cancel it settles.
            asked: list[StreamEvent] = [("agent_run.cancel_requested", {})]
            await run_transitions.announce(session, [(changed, asked, now)])
            return changed
        closing: tuple[list[Message], dict[str, Any]] = ([], {})
        if run.status is RunStatus.WAITING_ON_HUMAN:
            closing = await self._closing(session, run, CANCELLED_WHILE_WAITING)
        return await run_transitions.move(
            session,
            run,
            RunStatus.CANCELLED,
            now,
            events=[("agent_run.cancelled", {})],
            values={
                "cancel_requested": True,
                "cancel_requested_at": run.cancel_requested_at or now,
                "stop_reason": StopReason.CANCELLED,
                "waiting_for": None,
                **run_store.finished(now),
            },
            messages=closing[0],
            data=closing[1],
        )

    async def _closing(
        self, session: AsyncSession, run: RunRead, missing: str
    ) -> tuple[list[Message], dict[str, Any]]:
        """What closes the transcript of a paused run: its unanswered tool calls get their
        recorded results, or the error `missing` (recorded in the ledger too)."""
        transcript = await history.transcript(session, run.conversation_id)
        pending = pending_tool_uses(transcript)
        if not pending:
            return [], {}
        ledger = await history.ledger(session, run.id)
        results = {
            call_id: (entry.result, entry.is_error)
            for call_id, entry in ledger.items()
            if entry.completed_at is not None and entry.result is not None
        }
        unanswered = [call.id for call in pending if call.id not in results]
        completed = [history.completed_entry(i, missing, True, 1, True) for i in unanswered]
        message = results_message(pending, results, missing)
        return [message], ({"completed": completed} if completed else {})

    async def retry(self, run_id: str) -> RunRead:
        """Send a dead-lettered (or failed, or timed-out) run back to the queue with a fresh
        retry budget; it keeps its error log and its place in its lane's order."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            run = await run_store.get_run(session, run_id, lock=True)
            if run is None:
                raise NotFound("run", run_id)
            if RunStatus.QUEUED not in RUN_ALLOWED[run.status] or run.status in (
                RunStatus.RUNNING,
                RunStatus.WAITING_ON_HUMAN,
            ):
                allowed = [s for s in RUN_ALLOWED if RunStatus.QUEUED in RUN_ALLOWED[s]]
                raise InvalidTransition(run.status, RunStatus.QUEUED, allowed)
            retried = ("agent_run.retry", {"previous_status": run.status.value})
            changed = await run_transitions.move(
                session,
                run,
                RunStatus.QUEUED,
                now,
                events=[retried],
                values={"attempt": 1, "not_before": None, "finished_at": None, "stop_reason": None},
            )
        self._published(changed, event="agent_run.retry")
        return changed

    async def resume(self, run_id: str) -> RunRead:
        """A timed-out run whose last checkpoint is resumable goes back to the head of its
        lane; its loop continues from its transcript and tool-call ledger."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            run = await run_store.get_run(session, run_id, lock=True)
            if run is None:
                raise NotFound("run", run_id)
            if run.status is not RunStatus.TIMED_OUT or not run.resume_available:
                raise ResumeUnavailable(run.status, run.resume_available)
            changed = await run_transitions.move(
                session,
                run,
                RunStatus.QUEUED,
                now,
                events=[("agent_run.resume", {"automatic": False})],
                values={"finished_at": None},
            )
        self._published(changed, event="agent_run.resume")
        return changed

    async def respond(
        self, run_id: str, response: str | None, *, retry_call: bool = False
    ) -> RunRead:
        """A human's answer: it becomes the result of the call the run waits on (or, with
        `retry_call`, that call is run again), and the run goes back to the head of its
        lane's queue."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            run = await run_store.get_run(session, run_id, lock=True)
            if run is None:
                raise NotFound("run", run_id)
            if run.status is not RunStatus.WAITING_ON_HUMAN or not run.waiting_for:
                raise InvalidTransition(run.status, RunStatus.QUEUED, RUN_ALLOWED[run.status])
            waiting = run.waiting_for
            if waiting.reason is WaitReason.APPROVAL:
                approval = waiting.approval_id
                raise Conflict(
                    f"the run waits on approval {approval!r}: approve or reject it at "
                    f"/v1/approvals/{approval}"
                )
            call_id = waiting.tool_call_id
            values: dict[str, Any] = {"waiting_for": None}
            ledger: dict[str, Any] = {}
            if retry_call:
                if waiting.reason is not WaitReason.RESUME_UNSAFE or call_id is None:
                    raise Conflict("only a call cut short by a crash can be retried")
                ledger["forgotten"] = [call_id]  # it runs as never started
            elif call_id is not None:
                answer = history.completed_entry(call_id, response or "", False, 1, False)
                ledger["completed"] = [answer]
            else:  # the agent's prompt changed under the run: the answer accepts the new one
                values["system_prompt_hash"] = None
            answered = {"tool_call_id": call_id, "action": "retry_call" if retry_call else "answer"}
            changed = await run_transitions.move(
                session,
                run,
                RunStatus.QUEUED,
                now,
                events=[("agent_run.human_response", answered)],
                values=values,
                data=ledger,
            )
        self._published(changed, event="agent_run.human_response")
        return changed

    async def fork(self, run_id: str, body: RunFork) -> RunRead:
        """A new run, on a new conversation, that starts from the state `run_id` was in
        after step `body.from_seq`: the transcript up to there (and `body.input` after it),
        the watchers' state, the iteration, its loop kind and its plan. The original is
        untouched; calls it left unanswered at that step run again in the fork, as new
        calls with new ledger keys."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            source = await run_store.get_run(session, run_id)
            if source is None:
                raise NotFound("run", run_id)
            state = await history.state_at(session, run_id, body.from_seq)
            if state is None:
                raise ValidationFailed.field(
                    "body.from_seq", f"run {run_id!r} has no step {body.from_seq}"
                )
            if await agent_store.get_agent(session, source.agent_id) is None:
                raise NotFound("agent", source.agent_id)
            transcript = await history.transcript(session, source.conversation_id)
            copied = transcript[: state.transcript_end]
            _check_fork_input(copied, body)
            if body.input is not None:
                copied.append(Message.user_text(body.input))
            conversation_id = new_id("conv")
            await conversations.create_conversation(session, conversation_id)
            fork = await run_store.insert_run(
                session,
                _queued_run(
                    agent_id=source.agent_id,
                    conversation_id=conversation_id,
                    lane=f"conversation:{conversation_id}",
                    input_text=body.input or source.input,
                    multitask=Multitask.ENQUEUE,
                    metadata=source.metadata,
                    now=now,
                    iteration=state.iteration,
                )
                # It goes on as its source would have: the same loop kind, in the plan as
                # it stood after the step (a planning loop does not plan again).
                | {
                    "execution_loop": source.execution_loop
                    and source.execution_loop.model_dump(mode="json"),
                    "plan": state.plan,
                },
            )
            forked = {"from_run_id": run_id, "from_seq": body.from_seq}
            events: list[StreamEvent] = [
                ("agent_run.queued", {"lane": fork.lane}),
                ("agent_run.forked", forked),
            ]
            # Its first step is a resume point: the loop goes on from it, as a run resumed.
            step = history.NewStep(
                fork.id,
                conversation_id,
                StepKind.INPUT,
                RunStatus.QUEUED,
                now,
                [m.model_dump(mode="json") for m in copied],
                {
                    "opening": [list(e) for e in events],
                    "iteration": state.iteration,
                    "usage": Usage.none_yet(),
                    "loop": state.loop_counters,
                },
            )
            await history.append_locked(session, step)
            await run_transitions.announce(session, [(fork, events, now)])
        self._published(fork, event="agent_run.queued")
        return fork


def _queued_run(
    *,
    agent_id: str,
    conversation_id: str,
    lane: str,
    input_text: str,
    multitask: Multitask,
    metadata: dict[str, Any],
    now: datetime,
    parent_run_id: str | None = None,
    iteration: int = 0,
    not_before: datetime | None = None,
) -> dict[str, Any]:
    """The row of a new run, queued on its lane."""
    return {
        "id": new_id("run"),
        "agent_id": agent_id,
        "conversation_id": conversation_id,
        "lane": lane,
        "input": input_text,
        "multitask": multitask,
        "status": RunStatus.QUEUED,
        "iteration": iteration,
        "usage": Usage.none_yet(),
        "attempt": 1,
        "not_before": not_before,
        "parent_run_id": parent_run_id,
        "metadata": metadata,
        "cancel_requested": False,
        "lease_token": 0,
        "resume_available": False,
        # Its spans join the trace of the span creating it now (a request, a parent's tool
        # call); nothing when this process does not trace.
        "trace_context": tracing.carrier(),
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }


def _check_fork_input(transcript: list[Message], body: RunFork) -> None:
    """A fork's transcript must be one a model can go on from."""
    if pending_tool_uses(transcript) and body.input is not None:
        raise ValidationFailed.field(
            "body.input",
            f"step {body.from_seq} left tool calls unanswered (they run again in the fork): "
            "fork without `input`, or from another step",
        )
    ends_answered = bool(transcript) and transcript[-1].role == "assistant"
    if ends_answered and not pending_tool_uses(transcript) and body.input is None:
        raise ValidationFailed.field(
            "body.input",
            f"step {body.from_seq} ends with the model's answer: give the fork an `input`",
        )
