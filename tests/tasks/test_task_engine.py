"""The TaskEngine on the real database: group commit with a result or error per mutation,
the retry and assignment rules, idempotent creates, observers and the bus after commit,
back-pressure, shutdown, the one-by-one fallback and durability across a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pytest

from app.core.errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidTransition,
    NotFound,
    QueueFull,
    ShuttingDown,
    ValidationFailed,
    VersionConflict,
)
from app.core.states import TaskStatus as S
from app.db.connection import make_engine, make_sessionmaker
from app.db.idempotency import request_hash
from app.events.engine.bus import EventBus
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.engine.task_mutations import (
    CancelTask,
    CreateTask,
    DeleteTask,
    TaskMutation,
    TransitionTask,
    UpdateTask,
)
from app.tasks.schemas.tasks import TaskCreate, TaskRead
from tests.support.engine import CountingClock, Gate, ManualClock, Reader, StartEngine


def create(title: str = "a task", task_id: str | None = None, **fields: Any) -> CreateTask:
    body = TaskCreate.model_validate({"title": title, **fields})
    return CreateTask(body, "alice", task_id=task_id) if task_id else CreateTask(body, "alice")


async def gather(engine: TaskEngine, *mutations: TaskMutation) -> list[Any]:
    """Submit concurrently; each mutation's result or error, in submission order."""
    return await asyncio.gather(*(engine.submit(m) for m in mutations), return_exceptions=True)


async def enqueue(engine: TaskEngine, mutations: Iterable[TaskMutation]) -> list[Any]:
    """Submit without awaiting the results, while the writer is held."""
    pending = [asyncio.create_task(engine.submit(m)) for m in mutations]
    await asyncio.sleep(0)  # one turn of the loop: each submit runs until it awaits its result
    assert engine.queue_depth == len(pending)
    return pending


@pytest.mark.parametrize(("assignee", "status"), [(None, S.CREATED), ("ana", S.ASSIGNED)])
async def test_create_stores_version_1_with_one_audit_row_and_one_event(
    engine: TaskEngine, read: Reader, assignee: str | None, status: S
) -> None:
    result = await engine.submit(create(assigned_to=assignee))

    task = result.task
    assert (task.status, task.version, task.retry_count, task.created_by) == (status, 1, 0, "alice")
    assert await read.task(task.id) == task
    trail = await read.trail(task.id)
    assert [(t.from_status, t.to_status, t.task_version) for t in trail] == [(None, status, 1)]
    [event] = await read.events()
    assert (event.seq, event.type, result.seq) == (1, "task.created", 1)
    assert event.data["task"]["id"] == task.id
    assert (event.data["from"], event.data["to"]) == (None, status)


async def test_concurrent_updates_at_one_version_let_exactly_one_win(
    engine: TaskEngine, read: Reader, clock: CountingClock
) -> None:
    task = (await engine.submit(create())).task
    before = clock.reads

    results = await gather(
        engine,
        *(UpdateTask(task.id, {"title": f"w{i}"}, "al", expected_version=1) for i in range(50)),
    )

    assert clock.reads - before == 1, "all 50 should share one transaction"
    assert (results[0].task.version, results[0].task.title) == (2, "w0")
    assert all(isinstance(r, VersionConflict) for r in results[1:])
    assert {(r.expected, r.current) for r in results[1:]} == {(1, 2)}
    assert await read.task(task.id) == results[0].task


async def test_failed_mutations_in_a_batch_leave_the_others_committed(
    engine: TaskEngine, read: Reader, clock: CountingClock
) -> None:
    a, b, c = [(await engine.submit(create(t, assigned_to="bo"))).task for t in "abc"]
    before = clock.reads

    renamed, missing, illegal, cancelled, deleted = await gather(
        engine,
        UpdateTask(a.id, {"title": "renamed"}, "alice"),
        UpdateTask("task_missing", {"title": "x"}, "alice"),
        TransitionTask(a.id, S.COMPLETED, "alice"),
        CancelTask(b.id, "alice", reason="not needed"),
        DeleteTask(c.id, "alice", expected_version=1),
    )

    assert clock.reads - before == 1, "one transaction for the whole batch"
    assert isinstance(missing, NotFound)
    assert isinstance(illegal, InvalidTransition)
    assert (illegal.current, illegal.target) == ("assigned", "completed")
    assert [r.seq for r in (renamed, cancelled, deleted)] == [4, 5, 6]
    assert await read.task(a.id) == renamed.task
    assert await read.task(b.id) == cancelled.task
    assert cancelled.task.status is S.CANCELLED
    assert await read.task(c.id) is None
    types = [e.type for e in await read.events()]
    assert types[3:] == ["task.updated", "task.transitioned", "task.deleted"]


async def test_two_updates_to_one_task_in_a_batch_each_keep_their_own_result(
    engine: TaskEngine, read: Reader, clock: CountingClock
) -> None:
    task = (await engine.submit(create("zero"))).task
    before = clock.reads

    first, second = await gather(
        engine,
        UpdateTask(task.id, {"title": "one"}, "alice", expected_version=1),
        UpdateTask(task.id, {"priority": "high"}, "bob", expected_version=2),
    )

    assert clock.reads - before == 1
    assert (first.task.version, first.task.title, first.task.priority) == (2, "one", "medium")
    assert (second.task.version, second.task.title, second.task.priority) == (3, "one", "high")
    assert second.seq == first.seq + 1
    assert await read.task(task.id) == second.task
    assert [e.data["task"]["version"] for e in await read.events()] == [1, 2, 3]


async def test_retry_from_failed_counts_and_is_refused_once_retries_are_used(
    engine: TaskEngine, read: Reader
) -> None:
    task = (await engine.submit(create(assigned_to="ana", max_retries=1))).task

    async def move(to: S) -> TaskRead:
        return (await engine.submit(TransitionTask(task.id, to, "alice"))).task

    assert (await move(S.FAILED)).retry_count == 0
    retried = await move(S.ASSIGNED)
    await move(S.FAILED)
    with pytest.raises(InvalidTransition) as refused:
        await move(S.ASSIGNED)

    assert (retried.status, retried.retry_count, retried.version) == (S.ASSIGNED, 1, 3)
    assert (refused.value.current, refused.value.allowed) == ("failed", [])
    assert "retries exhausted" in refused.value.detail
    now = await read.task(task.id)
    assert now is not None
    assert (now.status, now.retry_count, now.version) == (S.FAILED, 1, 4)


async def test_assigning_without_an_assignee_is_refused_naming_the_field(
    engine: TaskEngine, read: Reader
) -> None:
    task = (await engine.submit(create())).task

    with pytest.raises(ValidationFailed) as refused:
        await engine.submit(TransitionTask(task.id, S.ASSIGNED, "alice"))
    assert await read.task(task.id) == task
    assigned = await engine.submit(
        TransitionTask(task.id, S.ASSIGNED, "alice", overrides={"assigned_to": "ana"})
    )

    assert [e.field for e in refused.value.errors] == ["assigned_to"]
    assert (assigned.task.status, assigned.task.assigned_to) == (S.ASSIGNED, "ana")


@pytest.mark.parametrize("same_batch", [False, True])
async def test_a_repeated_create_with_the_same_key_replays_the_first(
    engine: TaskEngine, read: Reader, same_batch: bool
) -> None:
    body = TaskCreate(title="once")
    digest = request_hash(body.model_dump(mode="json"))
    first, second = (CreateTask(body, "alice", "key-1", digest) for _ in range(2))

    if same_batch:
        one, two = await gather(engine, first, second)
    else:
        one, two = await engine.submit(first), await engine.submit(second)

    assert (one.replayed, two.replayed) == (False, True)
    assert two.task == one.task
    assert (two.change, two.seq) == (None, None)
    assert await read.tasks() == [one.task]
    assert len(await read.events()) == 1


async def test_a_reused_key_with_a_different_body_is_refused(
    engine: TaskEngine, read: Reader
) -> None:
    await engine.submit(CreateTask(TaskCreate(title="a"), "alice", "key-1", "hash-a"))
    other = CreateTask(TaskCreate(title="b"), "alice", "key-1", "hash-b")

    with pytest.raises(IdempotencyKeyReused):
        await engine.submit(other)
    assert await read.task(other.task_id) is None


async def test_a_key_is_remembered_for_its_window_then_a_create_with_it_is_new(
    start_engine: StartEngine, read: Reader
) -> None:
    clock = ManualClock()
    engine = start_engine(clock=clock, idempotency_retention=timedelta(hours=24))
    body = TaskCreate(title="once a day")
    digest = request_hash(body.model_dump(mode="json"))
    first = await engine.submit(CreateTask(body, "alice", "key-1", digest))

    clock.advance(hours=24)  # the last instant of the window
    replay = await engine.submit(CreateTask(body, "alice", "key-1", digest))
    clock.advance(seconds=1)  # forgotten, whether or not the sweep has run
    fresh = await engine.submit(CreateTask(body, "alice", "key-1", digest))
    again = await engine.submit(CreateTask(body, "alice", "key-1", digest))

    assert (replay.replayed, replay.task) == (True, first.task)
    assert not fresh.replayed and fresh.task.id != first.task.id
    assert (again.replayed, again.task) == (True, fresh.task)  # the key now names the new one
    assert {t.id for t in await read.tasks()} == {first.task.id, fresh.task.id}


async def test_an_expired_key_may_come_back_with_another_body(
    start_engine: StartEngine, read: Reader
) -> None:
    clock = ManualClock()
    engine = start_engine(clock=clock, idempotency_retention=timedelta(minutes=5))
    await engine.submit(CreateTask(TaskCreate(title="a"), "alice", "key-1", "hash-a"))
    with pytest.raises(IdempotencyKeyReused):
        await engine.submit(CreateTask(TaskCreate(title="b"), "alice", "key-1", "hash-b"))

    clock.advance(minutes=6)
    # Two creates with the expired key in one batch: the first is new, the second replays it.
    one, two = await gather(
        engine,
        CreateTask(TaskCreate(title="b"), "alice", "key-1", "hash-b"),
        CreateTask(TaskCreate(title="b"), "alice", "key-1", "hash-b"),
    )

    assert (one.task.title, one.replayed, two.replayed) == ("b", False, True)
    assert two.task == one.task
    assert sorted(t.title for t in await read.tasks()) == ["a", "b"]


async def test_observers_see_each_committed_result_in_order(
    engine: TaskEngine, read: Reader
) -> None:
    seen: list[tuple[str, int | None, int | None]] = []

    async def reader(result: MutationResult) -> None:
        row = await read.task(result.task.id)  # a fresh session sees only committed data
        seen.append(("reader", result.seq, row.version if row else None))

    async def recorder(result: MutationResult) -> None:
        seen.append(("recorder", result.seq, result.task.version))

    engine.add_observer(reader)
    engine.add_observer(recorder)
    body = TaskCreate(title="watched")
    task = (await engine.submit(CreateTask(body, "alice", "key-1", "h"))).task
    await gather(engine, UpdateTask(task.id, {"title": "x"}, "alice"), create("other"))
    await engine.submit(CreateTask(body, "alice", "key-1", "h"))  # a replay changes nothing
    await engine.stop()  # waits for the writer, observers included

    expected = [(1, 1), (2, 2), (3, 1)]  # (seq, committed version); the replay is not seen
    assert seen == [(who, s, v) for s, v in expected for who in ("reader", "recorder")]


async def test_a_failing_observer_does_not_stop_the_engine(engine: TaskEngine) -> None:
    seen: list[int | None] = []

    async def broken(result: MutationResult) -> None:
        raise RuntimeError("observer bug")

    async def recorder(result: MutationResult) -> None:
        seen.append(result.seq)

    engine.add_observer(broken)
    engine.add_observer(recorder)
    task = (await engine.submit(create())).task
    updated = await engine.submit(UpdateTask(task.id, {"title": "still works"}, "alice"))
    await engine.stop()

    assert updated.task.version == 2
    assert seen == [1, 2]


async def test_the_bus_wakes_readers_after_commit(
    engine: TaskEngine, bus: EventBus, read: Reader
) -> None:
    with bus.subscribe("tasks") as subscription:
        with pytest.raises(NotFound):
            await engine.submit(UpdateTask("task_missing", {"title": "x"}, "alice"))
        assert await subscription.wait(timeout_s=0) is False  # nothing committed, no wake-up

        result = await engine.submit(create())
        assert await subscription.wait(timeout_s=5) is True

    assert [e.seq for e in await read.events()] == [result.seq]


async def test_a_full_queue_refuses_with_retry_after_and_writes_nothing(
    start_engine: StartEngine, read: Reader
) -> None:
    engine = start_engine(queue_size=1, queue_full_retry_after_s=3)
    gate = Gate()
    engine.add_observer(gate)
    first = asyncio.create_task(engine.submit(create("first")))
    await gate.entered.wait()
    [queued] = await enqueue(engine, [create("queued")])
    refused = create("refused")

    with pytest.raises(QueueFull) as full:
        await engine.submit(refused)
    gate.opened.set()

    assert full.value.retry_after_s == 3
    assert [(await first).seq, (await queued).seq] == [1, 2]
    assert await read.task(refused.task_id) is None
    assert len(await read.events()) == 2


async def test_stop_commits_queued_mutations_before_returning_then_refuses(
    engine: TaskEngine, gate: Gate, read: Reader
) -> None:
    first = asyncio.create_task(engine.submit(create("first")))
    await gate.entered.wait()
    queued = await enqueue(engine, [create(f"queued {i}") for i in range(10)])

    async def release() -> None:  # runs once stop() is waiting for the queue to drain
        gate.opened.set()

    await asyncio.gather(engine.stop(drain_timeout_s=30), release())

    assert len(await read.tasks()) == 11
    assert [(await p).task.version for p in [first, *queued]] == [1] * 11
    with pytest.raises(ShuttingDown):
        await engine.submit(create("too late"))


async def test_a_mutation_stuck_past_the_drain_timeout_gets_shutting_down(
    engine: TaskEngine, gate: Gate, read: Reader
) -> None:
    first = asyncio.create_task(engine.submit(create("first")))
    await gate.entered.wait()  # never opened: the writer stays in the observer
    stuck_mutation = create("stuck")
    [stuck] = await enqueue(engine, [stuck_mutation])

    await engine.stop(drain_timeout_s=0.05)

    assert (await first).seq == 1
    with pytest.raises(ShuttingDown):
        await stuck
    assert await read.task(stuck_mutation.task_id) is None


async def test_a_failed_group_commit_retries_each_mutation_alone(
    engine: TaskEngine, read: Reader, clock: CountingClock
) -> None:
    taken, other = [(await engine.submit(create(t))).task for t in ("taken", "other")]
    before = clock.reads

    dup, new, renamed = await gather(
        engine,
        create("dup", task_id=taken.id),  # a primary-key violation sinks the group transaction
        create("new"),
        UpdateTask(other.id, {"title": "renamed"}, "alice"),
    )

    assert clock.reads - before == 4, "one failed group transaction, then one per mutation"
    assert type(dup) is Conflict
    assert "pk_tasks" in dup.detail
    assert await read.task(taken.id) == taken
    assert await read.task(new.task.id) == new.task
    assert await read.task(other.id) == renamed.task
    assert [e.seq for e in await read.events()] == [1, 2, new.seq, renamed.seq] == [1, 2, 3, 4]


async def test_two_creates_of_one_id_in_a_batch_keep_the_first_and_refuse_the_second(
    engine: TaskEngine, read: Reader
) -> None:
    other = (await engine.submit(create("other"))).task

    one, two, renamed = await gather(
        engine,
        create("first", task_id="task_dup"),
        create("second", task_id="task_dup"),
        UpdateTask(other.id, {"title": "renamed"}, "alice"),
    )

    assert isinstance(one, MutationResult)
    assert isinstance(two, Conflict)
    assert await read.task("task_dup") == one.task
    assert await read.task(other.id) == renamed.task
    assert [e.type for e in await read.events()] == ["task.created"] * 2 + ["task.updated"]


async def test_a_create_never_replaces_a_task_that_the_same_batch_touches(
    engine: TaskEngine, read: Reader
) -> None:
    taken = (await engine.submit(create("taken"))).task

    dup, raised = await gather(
        engine,
        create("impostor", task_id=taken.id),
        UpdateTask(taken.id, {"priority": "high"}, "alice"),
    )

    assert isinstance(dup, Conflict)
    assert (raised.task.title, raised.task.version) == ("taken", 2)
    assert await read.task(taken.id) == raised.task


async def test_versions_and_audit_trail_survive_an_engine_restart(
    engine: TaskEngine, bus: EventBus, clock: CountingClock, read: Reader, database_url: str
) -> None:
    task = (await engine.submit(create(assigned_to="ana"))).task
    await engine.submit(TransitionTask(task.id, S.IN_PROGRESS, "alice", expected_version=1))
    await engine.stop()

    db = make_engine(database_url)
    restarted = TaskEngine(make_sessionmaker(db), bus, clock=clock)
    restarted.start()
    try:
        with pytest.raises(VersionConflict) as stale:
            await restarted.submit(TransitionTask(task.id, S.IN_REVIEW, "bob", expected_version=1))
        review = await restarted.submit(
            TransitionTask(task.id, S.IN_REVIEW, "bob", expected_version=2)
        )
    finally:
        await restarted.stop()
        await db.dispose()

    assert stale.value.current == 2
    assert (review.task.version, review.seq) == (3, 3)
    trail = await read.trail(task.id)
    assert [(t.from_status, t.to_status, t.task_version, t.actor) for t in trail] == [
        (None, S.ASSIGNED, 1, "alice"),
        (S.ASSIGNED, S.IN_PROGRESS, 2, "alice"),
        (S.IN_PROGRESS, S.IN_REVIEW, 3, "bob"),
    ]
