"""The execution observer on a real TaskEngine and database: it catches up at start-up
with what happened while nobody watched, and a repeated pass changes nothing."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.states import TaskStatus
from app.core.streams import execution_stream
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import TransitionTask
from app.workflows import store
from app.workflows.engine.workflow_observer import ExecutionObserver
from app.workflows.engine.workflows import WorkflowCommands
from app.workflows.schemas.workflows import ActivateRequest, WorkflowCreate

LINE = WorkflowCreate.model_validate(
    {
        "name": "line",
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "a", "type": "task", "config": {"title": "A", "assigned_to": "ann"}},
            {"id": "b", "type": "task", "config": {"title": "B", "assigned_to": "ann"}},
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "a"},
            {"id": "e2", "source": "a", "target": "b"},
            {"id": "e3", "source": "b", "target": "e"},
        ],
    }
)


async def test_a_start_up_pass_finishes_what_happened_unobserved(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, engine: TaskEngine
) -> None:
    commands = WorkflowCommands(sessionmaker, bus, engine)
    workflow = await commands.create(LINE)
    execution = (await commands.activate(workflow.id, ActivateRequest(), "tester")).execution
    for task_id in execution.node_tasks.values():  # no observer is registered yet
        for target in (TaskStatus.IN_PROGRESS, TaskStatus.IN_REVIEW, TaskStatus.COMPLETED):
            await engine.submit(TransitionTask(task_id, target, "tester"))
    async with sessionmaker() as session:
        still = await store.get_execution(session, execution.id)
    assert still is not None and still.status == "running"

    observer = ExecutionObserver(sessionmaker, bus, engine)
    with bus.subscribe(execution_stream(execution.id)) as wake:
        observer.start()
        await wake.wait(10)
    await observer.stop()

    async with sessionmaker() as session:
        done = await store.get_execution(session, execution.id)
        events = await event_store.read_events(
            session, execution_stream(execution.id), after=0, limit=100
        )
    assert done is not None and done.status == "completed" and done.finished_at is not None
    assert done.node_status == {
        "s": "completed",
        "a": "completed",
        "b": "completed",
        "e": "completed",
    }
    assert [e.type for e in events] == [
        "workflow.execution.started",
        "workflow.node.changed",
        "workflow.node.changed",
        "workflow.execution.completed",
    ]
    assert await observer.sync(execution.id) is None  # finished: nothing more to do


async def test_a_pass_with_nothing_new_writes_nothing(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, engine: TaskEngine
) -> None:
    commands = WorkflowCommands(sessionmaker, bus, engine)
    workflow = await commands.create(LINE)
    execution = (await commands.activate(workflow.id, ActivateRequest(), "tester")).execution
    observer = ExecutionObserver(sessionmaker, bus, engine)
    first = await observer.sync(execution.id)
    again = await observer.sync(execution.id)
    assert first is not None and again is not None
    assert first.version == again.version == execution.version
    assert again.ready_task_ids == [execution.node_tasks["a"]]

    async with sessionmaker() as session:  # where the review gate finds its timeout policy
        owner = await store.workflow_of_task(session, execution.node_tasks["b"])
        assert owner is not None and owner.id == workflow.id
        assert owner.review_timeout_s == 86_400 and owner.review_timeout_policy == "escalate"
        assert await store.workflow_of_task(session, "task_elsewhere") is None
