"""The fire path on the real database with an injected clock: one fire per occasion however
many callers fire it at once, the run or execution started through the normal create
paths with its templates rendered, failures recorded rather than raised, skips, and
inbound webhooks' clock-bound signature checks."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate
from app.core.config import TriggerSettings
from app.core.errors import NotFound, ValidationFailed
from app.core.model_config import ModelConfig
from app.core.signatures import SignatureExpired, SignatureReused, signature_header
from app.core.streams import TRIGGERS_STREAM
from app.core.vocabulary import FireStatus, Multitask, TriggerKind
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.runs.engine.runs import RunCommands
from app.runs.models import Run
from app.runs.schemas.runs import RunCreate, RunRead
from app.runs.store import runs as run_store
from app.tasks.engine.task_engine import TaskEngine
from app.telemetry.metrics import Metrics
from app.triggers.engine import templates
from app.triggers.engine.commands import TriggerCommands
from app.triggers.engine.fires import FireResult, TriggerDisabled
from app.triggers.engine.firing import TriggerFiring
from app.triggers.engine.hooks import TriggerHooks
from app.triggers.engine.kinds.chain import ChainFire
from app.triggers.engine.kinds.schedule import ScheduleFire
from app.triggers.models import HookSignature, TriggerFire
from app.triggers.schemas import TriggerCreate, TriggerRead
from app.workflows import store as workflow_store
from app.workflows.engine.workflows import WorkflowCommands
from tests.support.engine import ManualClock
from tests.telemetry.test_metrics import sample
from tests.workflows.test_workflow_observer import LINE

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


class World:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        engine: TaskEngine,
        clock: ManualClock,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.clock = clock
        self.metrics = Metrics()
        self.runs = RunCommands(sessionmaker, bus, clock=clock)
        self.workflows = WorkflowCommands(sessionmaker, bus, engine, clock=clock)
        self.firing = TriggerFiring(
            sessionmaker, bus, self.runs, self.workflows, clock=clock, metrics=self.metrics
        )
        # The scheduler's and the chain relay's entries to the fire path.
        self.fire_schedule = ScheduleFire(self.firing)
        self.fire_chain = ChainFire(self.firing)
        self.triggers = TriggerCommands(sessionmaker, bus, clock=clock)
        self.agents = AgentCommands(sessionmaker)

    async def agent(self) -> str:
        model = ModelConfig(provider="scripted", name="scripted", script=[{"text": "done"}])
        return (await self.agents.create(AgentCreate(name="a", model=model))).id

    async def trigger(self, kind: str = "webhook", **fields: Any) -> TriggerRead:
        body = TriggerCreate.model_validate({"kind": kind, "name": "t", **fields})
        trigger, _ = await self.triggers.create(body)
        return trigger

    async def count(self, model: Any) -> int:
        async with self.sessionmaker() as session:
            return int(await session.scalar(select(func.count()).select_from(model)) or 0)

    async def events(self) -> list[event_store.StoredEvent]:
        async with self.sessionmaker() as session:
            return await event_store.read_events(session, TRIGGERS_STREAM, after=0, limit=100)


@pytest.fixture
def world(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    engine: TaskEngine,
    clock: ManualClock,
) -> World:
    return World(sessionmaker, bus, engine, clock)


def run_target(agent_id: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "run", "agent_id": agent_id, "input": "Issue: {{ payload.title }}", **fields}


async def test_an_occasion_fired_by_many_at_once_fires_once(world: World) -> None:
    trigger = await world.trigger(target=run_target(await world.agent()))
    context = {"payload": {"title": "crash"}}

    results = await asyncio.gather(
        *(world.firing.fire(trigger.id, context, fire_key="delivery:1") for _ in range(8))
    )

    assert len({r.fire.id for r in results}) == 1
    assert sorted(r.replayed for r in results) == [False] + [True] * 7
    assert await world.count(Run) == 1 and await world.count(TriggerFire) == 1
    (event,) = await world.events()
    assert event.type == "trigger.fired" and event.data["run_id"] == results[0].fire.run_id
    assert (
        sample(world.metrics, "loopwright_trigger_fires_total", kind="webhook", status="started")
        == 1
    )


async def test_a_fire_starts_its_run_through_the_normal_create_path(world: World) -> None:
    agent_id = await world.agent()
    trigger = await world.trigger(
        "schedule",
        config={"interval_s": 3600},
        target=run_target(
            agent_id,
            input="Report for {{ fire_time }} by {{ trigger.name }}",
            lane="reports:{{ trigger.id }}",
            metadata={"source": "{{ trigger.kind }}", "trigger": "overwritten"},
            delay_s=30,
        ),
    )
    assert trigger.next_fire_at == NOW + timedelta(hours=1)
    due = NOW - timedelta(minutes=1)
    world.clock.advance(seconds=5)

    result = await world.firing.fire(
        trigger.id,
        {"fire_time": due.isoformat()},
        fire_key=due.isoformat(),
        scheduled_for=due,
        multitask=Multitask.REJECT,
        about={"depth": 1},
    )

    fire = result.fire
    assert fire.status is FireStatus.STARTED and fire.scheduled_for == due
    async with world.sessionmaker() as session:
        run = await run_store.get_run(session, fire.run_id or "")
    assert run is not None
    assert run.input == f"Report for {due.isoformat()} by t"
    assert run.lane == f"reports:{trigger.id}" and run.multitask is Multitask.REJECT
    assert run.not_before == world.clock.now + timedelta(seconds=30)
    assert run.metadata == {
        "source": "schedule",
        "trigger": {
            "id": trigger.id,
            "kind": "schedule",
            "fire_id": fire.id,
            "fire_key": due.isoformat(),
            "fire_time": due.isoformat(),
            "depth": 1,
        },
    }


async def test_a_target_that_cannot_start_is_a_failed_fire_not_an_error(world: World) -> None:
    agent_id = await world.agent()
    empty = await world.trigger(target=run_target(agent_id, input="{{ payload.missing }}"))
    busy = await world.trigger(target=run_target(agent_id, lane="solo", multitask="reject"))
    await world.runs.create(RunCreate(agent_id=agent_id, input="holder", lane="solo"))

    first = await world.firing.fire(empty.id, {"payload": {}}, fire_key="a")
    second = await world.firing.fire(busy.id, {"payload": {"title": "x"}}, fire_key="b")

    assert first.fire.status is FireStatus.FAILED and "rendered input is empty" in (
        first.fire.error or ""
    )
    assert second.fire.status is FireStatus.FAILED and "lane 'solo' is held" in (
        second.fire.error or ""
    )
    assert second.fire.run_id is None
    assert await world.count(Run) == 1  # the holder: the refused run's savepoint rolled back
    assert [e.type for e in await world.events()] == ["trigger.fire_failed"] * 2
    # The same occasion again is the same failure, not a second try.
    again = await world.firing.fire(busy.id, {"payload": {"title": "x"}}, fire_key="b")
    assert again.replayed and again.fire == second.fire


async def test_a_deleted_agent_fails_the_fire(world: World) -> None:
    agent_id = await world.agent()
    trigger = await world.trigger(target=run_target(agent_id))
    await world.agents.delete(agent_id, expected_version=None)

    result = await world.firing.fire(trigger.id, {"payload": {"title": "x"}}, fire_key="k")

    assert result.fire.status is FireStatus.FAILED
    assert result.fire.error == f"agent {agent_id!r} does not exist"


async def test_a_workflow_target_activates_with_its_context_rendered(world: World) -> None:
    workflow = await world.workflows.create(LINE)
    trigger = await world.trigger(
        target={
            "kind": "workflow",
            "workflow_id": workflow.id,
            "context": {"ticket": "{{ payload.ticket }}", "by": "{{ headers.x_sender }}"},
        }
    )
    context = {"payload": {"ticket": 42}, "headers": {"x_sender": "ci"}}

    result = await world.firing.fire(trigger.id, context, fire_key="k")

    assert result.fire.status is FireStatus.STARTED and result.fire.run_id is None
    async with world.sessionmaker() as session:
        execution = await workflow_store.get_execution(session, result.fire.execution_id or "")
    assert execution is not None
    assert execution.context == {"ticket": 42, "by": "ci"}
    assert len(execution.node_tasks) == 2  # its tasks were made after the commit


async def test_a_deleted_workflow_fails_the_fire(world: World) -> None:
    workflow = await world.workflows.create(LINE)
    trigger = await world.trigger(target={"kind": "workflow", "workflow_id": workflow.id})
    await world.workflows.delete(workflow.id, expected_version=None)

    result = await world.firing.fire(trigger.id, {}, fire_key="k")

    assert result.fire.status is FireStatus.FAILED
    assert result.fire.error == f"workflow {workflow.id!r} does not exist"


async def test_skips_are_recorded_once(world: World) -> None:
    trigger = await world.trigger(
        "schedule",
        config={"cron": "0 * * * *"},
        target=run_target(await world.agent(), input="tick {{ fire_time }}"),
    )
    due = NOW.replace(minute=0)

    skipped = await world.firing.skip(
        trigger.id, fire_key="t1", reason="overlap: skip", scheduled_for=due
    )
    again = await world.firing.skip(trigger.id, fire_key="t1", reason="overlap: skip")

    assert skipped.fire.status is FireStatus.SKIPPED and skipped.fire.error == "overlap: skip"
    assert again.replayed and again.fire == skipped.fire
    (event,) = await world.events()
    assert event.type == "trigger.fire_skipped"
    assert event.data["scheduled_for"] == due.isoformat()


async def test_a_disabled_or_missing_trigger_does_not_fire(world: World) -> None:
    trigger = await world.trigger(target=run_target(await world.agent()))
    await world.triggers.set_enabled(trigger.id, False, expected_version=None)

    with pytest.raises(TriggerDisabled):
        await world.firing.fire(trigger.id, {}, fire_key="k")
    with pytest.raises(TriggerDisabled):
        await world.firing.skip(trigger.id, fire_key="k", reason="r")
    with pytest.raises(NotFound):
        await world.firing.fire("trg_missing", {}, fire_key="k")
    assert await world.count(TriggerFire) == 0


# -- inbound webhooks, on the injected clock -------------------------------------------------


async def test_signatures_expire_and_are_forgotten_once_they_could_not_pass(
    world: World, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    settings = TriggerSettings(signature_tolerance_s=60)
    hooks = TriggerHooks(sessionmaker, world.firing, settings, clock=world.clock)
    trigger = await world.trigger(target=run_target(await world.agent()))
    secret = trigger.secret or ""
    body = b'{"title": "one"}'
    signed_at = int(world.clock.now.timestamp())
    header = signature_header(secret, signed_at, body)

    delivery = await hooks.authenticate(trigger.id, body, header)
    answer = await hooks.deliver(delivery, {"title": "one"}, headers={}, delivery_id=None)
    assert answer.status_code == 202 and answer.body.status is FireStatus.STARTED

    world.clock.advance(seconds=59)  # still inside the window: a replay is refused as reused
    replay = await hooks.authenticate(trigger.id, body, header)
    with pytest.raises(SignatureReused):
        await hooks.deliver(replay, {"title": "one"}, headers={}, delivery_id="new-id")

    world.clock.advance(seconds=2)  # past it: refused as expired before anything is read
    with pytest.raises(SignatureExpired):
        await hooks.authenticate(trigger.id, body, header)

    world.clock.advance(seconds=60)  # twice the tolerance since it was accepted
    fresh = signature_header(secret, int(world.clock.now.timestamp()), body)
    later = await hooks.authenticate(trigger.id, body, fresh)
    await hooks.deliver(later, {"title": "one"}, headers={}, delivery_id=None)
    async with sessionmaker() as session:
        kept = list(await session.scalars(select(HookSignature.signature)))
    assert kept == [later.signature]  # the first was pruned as the second was recorded


async def test_a_hook_refuses_other_kinds(world: World) -> None:
    settings = TriggerSettings()
    hooks = TriggerHooks(world.sessionmaker, world.firing, settings, clock=world.clock)
    schedule = await world.trigger(
        "schedule",
        config={"interval_s": 60},
        target=run_target(await world.agent(), input="tick"),
    )
    assert schedule.kind == TriggerKind.SCHEDULE and schedule.secret is None
    with pytest.raises(NotFound):
        await hooks.authenticate(schedule.id, b"{}", "t=1,v1=00")


async def test_a_rendered_run_that_is_not_valid_fails_the_fire(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id = await world.agent()
    trigger = await world.trigger(target=run_target(agent_id, lane="{{ payload.lane }}"))

    bad_lane = await world.firing.fire(
        trigger.id, {"payload": {"title": "x", "lane": "a/events"}}, fire_key="1"
    )
    no_lane = await world.firing.fire(trigger.id, {"payload": {"title": "x"}}, fire_key="2")
    monkeypatch.setattr(templates, "MAX_RENDERED_CHARS", 10)
    too_big = await world.firing.fire(trigger.id, {"payload": {"title": "x" * 20}}, fire_key="3")

    assert bad_lane.fire.status is FireStatus.FAILED
    assert (bad_lane.fire.error or "").startswith("the rendered run is not valid: lane: ")
    assert no_lane.fire.status is FireStatus.STARTED  # an empty lane: the conversation's
    async with world.sessionmaker() as session:
        run = await run_store.get_run(session, no_lane.fire.run_id or "")
    assert run is not None and run.lane == f"conversation:{run.conversation_id}"
    assert too_big.fire.status is FireStatus.FAILED
    assert (too_big.fire.error or "").startswith("target.input: the rendered template is over")


async def test_tasks_that_cannot_be_made_after_the_commit_fail_the_execution(
    world: World, engine: TaskEngine, caplog: pytest.LogCaptureFixture
) -> None:
    workflow = await world.workflows.create(LINE)
    trigger = await world.trigger(target={"kind": "workflow", "workflow_id": workflow.id})
    await engine.stop(drain_timeout_s=1)  # the TaskEngine refuses what comes now

    with caplog.at_level(logging.WARNING, logger="app.triggers.engine.firing"):
        result = await world.firing.fire(trigger.id, {}, fire_key="k")

    assert result.fire.status is FireStatus.STARTED  # the fire did start its execution
    async with world.sessionmaker() as session:
        execution = await workflow_store.get_execution(session, result.fire.execution_id or "")
    assert execution is not None and execution.status == "failed"
    assert "whose tasks could not be made" in caplog.text


async def test_a_firing_without_metrics_and_a_schema_that_cannot_resolve(
    world: World, bus: EventBus
) -> None:
    firing = TriggerFiring(world.sessionmaker, bus, world.runs, world.workflows, clock=world.clock)
    hooks = TriggerHooks(world.sessionmaker, firing, TriggerSettings(), clock=world.clock)
    schema = {"$ref": "http://127.0.0.1:9/schema.json"}
    trigger = await world.trigger(
        target=run_target(await world.agent()), config={"payload_schema": schema}
    )
    body = b'{"title": "x"}'
    header = signature_header(trigger.secret or "", int(world.clock.now.timestamp()), body)
    delivery = await hooks.authenticate(trigger.id, body, header)

    with pytest.raises(ValidationFailed) as caught:
        await hooks.deliver(delivery, {"title": "x"}, headers={}, delivery_id=None)
    assert caught.value.errors[0].field == "body"
    assert "cannot be resolved" in caught.value.errors[0].message

    fired = await firing.fire(trigger.id, {"payload": {"title": "x"}}, fire_key="k")
    assert fired.fire.status is FireStatus.STARTED


# -- schedules' overlap policies and chains' depth --------------------------------------------


async def schedule_trigger(world: World, overlap: str, target: dict[str, Any]) -> TriggerRead:
    return await world.trigger(
        "schedule", config={"interval_s": 60, "overlap": overlap}, target=target
    )


async def run_of(world: World, result: FireResult | None) -> RunRead:
    assert result is not None and result.fire.run_id is not None, result
    async with world.sessionmaker() as session:
        run = await run_store.get_run(session, result.fire.run_id)
    assert run is not None
    return run


async def test_overlap_skip_records_the_fire_skipped_while_the_last_run_is_unfinished(
    world: World,
) -> None:
    agent_id = await world.agent()
    trigger = await schedule_trigger(world, "skip", run_target(agent_id, input="{{ fire_time }}"))
    first_time, second_time, third_time = (NOW + timedelta(minutes=m) for m in (1, 2, 3))

    first = await world.fire_schedule(trigger.id, first_time, NOW)
    second = await world.fire_schedule(trigger.id, second_time, NOW)
    run = await run_of(world, first)
    assert run.input == first_time.isoformat() and run.metadata["trigger"]["fire_time"] == (
        first_time.isoformat()
    )
    assert second is not None and second.fire.status is FireStatus.SKIPPED
    assert second.fire.error == f"overlap: the previous fire's run {run.id} is queued"
    assert second.fire.scheduled_for == second_time

    await world.runs.cancel(run.id)  # finished: the next fire starts a run again
    third = await world.fire_schedule(trigger.id, third_time, NOW)
    assert third is not None and third.fire.status is FireStatus.STARTED


async def test_overlap_enqueue_and_interrupt_take_the_last_runs_lane(world: World) -> None:
    agent_id = await world.agent()
    queued = await schedule_trigger(world, "enqueue", run_target(agent_id, input="tick"))
    cutting = await schedule_trigger(world, "interrupt", run_target(agent_id, input="tick"))
    later = NOW + timedelta(minutes=1)

    first = await run_of(world, await world.fire_schedule(queued.id, NOW, NOW))
    behind = await run_of(world, await world.fire_schedule(queued.id, later, NOW))
    assert behind.lane == first.lane and behind.multitask is Multitask.ENQUEUE
    assert behind.conversation_id != first.conversation_id  # a lane, not a conversation

    held = await run_of(world, await world.fire_schedule(cutting.id, NOW, NOW))
    taker = await run_of(world, await world.fire_schedule(cutting.id, later, NOW))
    assert taker.lane == held.lane and taker.multitask is Multitask.INTERRUPT
    async with world.sessionmaker() as session:
        cancelled = await run_store.get_run(session, held.id)
    assert cancelled is not None and cancelled.status == "cancelled"


async def test_overlap_of_a_workflow_target(world: World) -> None:
    workflow = await world.workflows.create(LINE)
    target = {"kind": "workflow", "workflow_id": workflow.id}
    skipping = await schedule_trigger(world, "skip", target)
    beside = await schedule_trigger(world, "enqueue", target)
    later = NOW + timedelta(minutes=1)

    assert (await world.fire_schedule(skipping.id, NOW, NOW)) is not None
    skipped = await world.fire_schedule(skipping.id, later, NOW)
    assert skipped is not None and skipped.fire.status is FireStatus.SKIPPED
    assert "execution" in (skipped.fire.error or "")
    await world.fire_schedule(beside.id, NOW, NOW)
    both = await world.fire_schedule(beside.id, later, NOW)
    assert both is not None and both.fire.status is FireStatus.STARTED


async def test_a_chain_fire_records_its_depth_and_stops_past_the_limit(world: World) -> None:
    agent_id = await world.agent()
    chain = await world.trigger(
        "chain",
        config={"source": "workflow", "workflow_id": "wf_any"},
        target=run_target(agent_id, input="after {{ source.id }}"),
    )
    context = {"source": {"kind": "workflow", "id": "wfx_1"}}

    fired = await world.fire_chain(chain.id, context, "workflow:wfx_1:9", 2)
    run = await run_of(world, fired)
    assert run.input == "after wfx_1" and run.metadata["trigger"]["depth"] == 2
    assert run.metadata["trigger"]["source"] == {"kind": "workflow", "id": "wfx_1"}
    deep = await world.fire_chain(chain.id, context, "workflow:wfx_2:9", 6)
    assert deep is not None and deep.fire.status is FireStatus.SKIPPED
    assert deep.fire.error == "chain depth 6 is over the limit of 5"
    assert deep.fire.source_id == "wfx_1"

    await world.triggers.set_enabled(chain.id, False, expected_version=None)
    assert await world.fire_chain(chain.id, context, "workflow:wfx_3:9", 1) is None
    assert await world.fire_schedule("trg_gone", NOW, NOW) is None
