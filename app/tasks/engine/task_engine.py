"""TaskEngine: the single writer of task state in this process. Every change to a task
goes through it, so mutations of one task never race within a process; across processes,
row locks and the versions' compare-and-set keep replicas' engines safe together.

Callers `submit()` a mutation and await its result. The engine's `GroupCommitter` takes
whatever is queued (up to `max_batch`); the engine locks the rows involved, applies each
mutation in order to an in-memory working copy, and writes the result in one transaction:
a group commit in which every mutation keeps its own result or error. Audit rows and
events are written in that same transaction; callers, the bus, the log and observers only
hear of it after the commit.

If a group's transaction fails on the database, its mutations are retried one transaction
each, so one bad mutation cannot sink the others; if the database is unreachable they all
fail with `unavailable` at once. Reads do not go through the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.store import agent_loads
from app.core.errors import AppError
from app.core.streams import TASK_STREAM
from app.db import idempotency
from app.db.errors import StaleWrite, is_connectivity_error, translate
from app.db.idempotent_create import CreateKey
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.runtime.group_commit import GroupCommitter
from app.tasks.engine.task_mutations import (
    AssignTask,
    Change,
    CreateTask,
    MoveTask,
    TaskMutation,
    TransitionTask,
)
from app.tasks.engine.wip import WipCounter
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import tasks

log = logging.getLogger(__name__)

CREATE_SCOPE = "tasks.create"
# Keys of creates made by a run's tool call (`create_task`): they record the run, so they
# are kept while it may run again (and re-run a create cut short), not for the clients'
# window. A scope of their own: a client's key spelled the same neither finds nor blocks
# the task.
TOOL_CREATE_SCOPE = "tasks.create_task"


@dataclass(frozen=True)
class MutationResult:
    """The outcome of one mutation. `replayed` marks an idempotent create answered from its
    first response; `seq` is the event's sequence number in the task stream."""

    task: TaskRead
    change: Change | None
    seq: int | None = None
    replayed: bool = False
    # A board move's steps before its last, and a WIP limit's note: observers and the bus
    # hear of each, in order, before this one.
    earlier: tuple[MutationResult, ...] = ()


Observer = Callable[[MutationResult], Awaitable[None]]
Outcome = MutationResult | AppError  # a refused mutation does not fail its batch


def _worth_retrying_alone(exc: Exception) -> bool:
    """A failed group is retried one mutation per transaction when the database refused
    it (one bad mutation); not while the database is unreachable, nor after a bug."""
    refused = isinstance(exc, SQLAlchemyError | OSError | StaleWrite)
    return refused and not is_connectivity_error(exc)


class TaskEngine:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        *,
        queue_size: int = 1000,
        max_batch: int = 128,
        queue_full_retry_after_s: int = 1,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._idempotency_retention = idempotency_retention
        self._observers: list[Observer] = []
        self._writer: GroupCommitter[TaskMutation, Outcome] = GroupCommitter(
            sessionmaker,
            self._commit,
            max_batch=max_batch,
            queue_size=queue_size,
            queue_full_retry_after_s=queue_full_retry_after_s,
            after_commit=self._committed,
            isolate=_worth_retrying_alone,
            error=translate,
            # A mutation stands once accepted, even if its caller stops waiting: a workflow
            # execution, say, already names the tasks it submitted.
            write_abandoned=True,
            name="task-engine-writer",
        )

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._writer.start()

    @property
    def running(self) -> bool:
        return self._writer.running

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Refuse new mutations, let the queued ones commit within the timeout, then stop
        the writer; whatever is still queued fails with `shutting_down`."""
        await self._writer.stop(drain_timeout_s)

    def add_observer(self, observer: Observer) -> None:
        """Called after each committed mutation, in order. Errors are logged, not raised;
        an observer that needs time should hand the work to a task of its own."""
        self._observers.append(observer)

    # -- submission ------------------------------------------------------------------

    async def submit(self, mutation: TaskMutation) -> MutationResult:
        """Its result, once committed; `queue_full` (with a retry-after) when the queue is
        full, `shutting_down` once the engine stops."""
        outcome = await self._writer.submit(mutation)
        if isinstance(outcome, AppError):
            raise outcome
        return outcome

    @property
    def queue_depth(self) -> int:
        return self._writer.queue_depth

    # -- the writer ------------------------------------------------------------------

    async def _committed(self, outcomes: list[Outcome]) -> None:
        """After the commit: the bus and the log hear of the changes, then each observer
        of each change, in order."""
        changed = [
            step
            for o in outcomes
            if isinstance(o, MutationResult) and o.change
            for step in (*o.earlier, o)
        ]
        published(self._bus, [_written(result) for result in changed])
        for result in changed:
            for observer in self._observers:
                try:
                    await observer(result)
                except Exception:
                    log.exception("task observer %r failed", observer)

    async def _commit(self, session: AsyncSession, mutations: list[TaskMutation]) -> list[Outcome]:
        """Apply the batch in the writer's transaction; one outcome per mutation."""
        now = self._clock()
        keys_live_since = now - self._idempotency_retention  # older clients' keys are forgotten
        read = await tasks.lock_tasks(
            session, (m.task_id for m in mutations if not isinstance(m, CreateTask))
        )
        # Assignments by routing count their agents' tasks under the agents' row locks,
        # taken after the task rows (the order every writer takes them in).
        loads = await agent_loads.lock_agent_loads(
            session,
            (m.agent_id for m in mutations if isinstance(m, AssignTask)),
            leaving_out=read,
        )
        # Keyed creates do not go through `keyed_create` (one key per transaction): the
        # batch's keys are found in one query, and a create later in the batch must
        # replay a key an earlier one made but has not committed yet. The rules are the
        # same (`CreateKey.replays`, `CreateKey.record`). No advisory lock: in this
        # process the single writer serialises creates; one racing with a create in
        # another process fails on the key's primary key once the other commits (a
        # conflict: a retry of the request then replays the key).
        keys = await idempotency.find_scoped_keys(
            session,
            [(k.scope, k.key) for m in mutations if (k := _create_key(m)) is not None],
            live_since=keys_live_since,
        )
        # WIP limits are counted under their rows' locks, taken last (every writer takes
        # tasks, agents, then limits), for the projects the batch's tasks are or go in.
        wip = await WipCounter.locked(session, read, mutations)
        working: dict[str, TaskRead | None] = dict(read)
        last_change: dict[str, Change] = {}
        outcomes: list[Outcome] = []
        changes: list[Change] = []
        new_keys: list[idempotency.KeyRecord] = []
        for mutation in mutations:
            try:
                replay = _idempotent_replay(mutation, keys)
                if replay is not None:
                    outcomes.append(replay)
                    continue
                if isinstance(mutation, AssignTask):
                    mutation.check_room(loads.get(mutation.agent_id), working)
                current = working.get(mutation.task_id)
                steps = (
                    mutation.steps(current, now)
                    if isinstance(mutation, MoveTask)
                    else [mutation.apply(current, now)]
                )
                notes = wip.check(steps[-1], working, enforce=_enforces_wip(mutation))
            except AppError as exc:
                outcomes.append(exc)
                continue
            change = steps[-1]
            working[mutation.task_id] = change.after
            if change.writes_row:
                last_change[mutation.task_id] = change
            changes.extend([*steps, *notes])
            earlier = [*steps[:-1], *notes]
            outcomes.append(MutationResult(change.task, change, earlier=_unsequenced(earlier)))
            if (key := _create_key(mutation)) is not None:
                # A later create of this batch with the key replays this one.
                record = key.record(change.task.id, change.snapshot)
                keys[record.scope, record.key] = record
                new_keys.append(record)
        await _write(session, read, last_change, changes, new_keys, now, keys_live_since)
        seqs = await event_store.append_events(
            session,
            TASK_STREAM,
            [event_store.NewEvent(c.event_type, _event_data(c)) for c in changes],
            now,
        )
        seq_of = {id(change): seq for change, seq in zip(changes, seqs, strict=True)}
        return [_sequenced(o, seq_of) if isinstance(o, MutationResult) else o for o in outcomes]


def _unsequenced(changes: Sequence[Change]) -> tuple[MutationResult, ...]:
    return tuple(MutationResult(change.task, change) for change in changes)


def _sequenced(result: MutationResult, seq_of: dict[int, int]) -> MutationResult:
    """The result with its events' sequence numbers (a replay has none)."""
    if result.change is None:
        return result
    earlier = tuple(_sequenced(step, seq_of) for step in result.earlier)
    return replace(result, seq=seq_of[id(result.change)], earlier=earlier)


def _enforces_wip(mutation: TaskMutation) -> bool:
    """A strict WIP limit refuses what pulls work into a column; a transition recording
    what already happened (`enforce_wip` False) is counted, never refused."""
    return not isinstance(mutation, TransitionTask) or mutation.enforce_wip


def _create_key(mutation: TaskMutation) -> CreateKey | None:
    """The key a create is remembered by; None for any other mutation or an unkeyed create."""
    if not isinstance(mutation, CreateTask):
        return None
    scope = CREATE_SCOPE if mutation.run_id is None else TOOL_CREATE_SCOPE
    return CreateKey.of(
        scope, mutation.idempotency_key, mutation.request_hash, run_id=mutation.run_id
    )


def _idempotent_replay(
    mutation: TaskMutation, keys: dict[tuple[str, str], idempotency.KeyRecord]
) -> MutationResult | None:
    key = _create_key(mutation)
    if key is None:
        return None
    first = key.replays(keys.get((key.scope, key.key)))
    if first is None:
        return None
    return MutationResult(TaskRead.model_validate(first.response), None, replayed=True)


def _written(result: MutationResult) -> Written:
    assert result.change is not None
    return Written(
        TASK_STREAM,
        [(result.change.event_type, {"seq": result.seq})],
        {"task_id": result.task.id, "status": result.task.status.value},
    )


def _event_data(change: Change) -> dict[str, object]:
    extra: dict[str, object] = {}
    if change.transition is not None:
        extra = {
            "from": change.transition.from_status,
            "to": change.transition.to_status,
            "reason": change.reason,
            "actor": change.transition.actor,
        }
    elif change.reason is not None:
        extra = {"reason": change.reason}
    return {"task": change.snapshot, **extra, **change.extra}


async def _write(
    session: AsyncSession,
    read: dict[str, TaskRead],
    last_change: dict[str, Change],
    changes: Sequence[Change],
    new_keys: Sequence[idempotency.KeyRecord],
    now: datetime,
    keys_live_since: datetime,
) -> None:
    """Write each touched row once, in its final state for this batch."""
    inserts: list[tasks.TaskRow] = []
    updates: list[tuple[tasks.TaskRow, int]] = []
    deletions: list[tuple[str, int]] = []
    for task_id, change in last_change.items():
        original, final = read.get(task_id), change.after
        if original is None and final is not None:
            inserts.append(change.snapshot)
        elif original is not None and final is None:
            deletions.append((task_id, original.version))
        elif original is not None and final is not None:
            updates.append((change.snapshot, original.version))
    await tasks.insert_tasks(session, inserts)
    await tasks.update_tasks(session, updates)
    await tasks.delete_tasks(session, deletions)
    await tasks.insert_transitions(session, [c.transition for c in changes if c.transition])
    await idempotency.insert_keys(session, new_keys, now, live_since=keys_live_since)
