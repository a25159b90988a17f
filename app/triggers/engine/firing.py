"""The fire path: every fire of every kind of trigger (a webhook delivery, a schedule's
fire time, a chain's source settling) starts its target here, through the normal create
paths, and is recorded once.

    fire(trigger_id, context, fire_key=…, fired_at=…, scheduled_for=…) -> FireResult

One transaction holds the whole fire:

1. the occasion's advisory lock (trigger id, `fire_key`), then its `trigger_fires` row:
   if there is one, that first fire is the answer (`replayed`) and nothing starts. Two
   processes firing one occasion at once: the second waits for the first's commit, then
   finds its fire. The database decides, not process memory;
2. the trigger's row, locked (`FOR UPDATE`): a disable or a delete either commits first
   (the fire is refused: `TriggerDisabled`, `NotFound`) or waits for the fire;
3. the target's templates rendered with the context, and the target started in a
   savepoint through `RunCommands.create_in` / `WorkflowCommands.activate_in` (the code
   of `POST /v1/runs` and of activation), under the idempotency key
   `{trigger_id}:{fire_key}` in the scope `triggers.fire`;
4. the fire row (`started`, or `failed` with the error when rendering or starting failed:
   the savepoint is rolled back, the failure recorded, nothing raised), the trigger's
   `last_fired_at`, and a `trigger.fired` / `trigger.fire_failed` event on the triggers
   stream.

So a crash before the commit leaves nothing (the occasion fires anew), and after it
leaves all of it. After the commit: the readers are woken, the fire counted in
`loopwright_trigger_fires_total{kind,status}`, and a workflow's tasks are created through
the TaskEngine (as an activation does after its own commit; a failure there fails the
execution, as it would an activation's).

The run's `metadata.trigger` says where it came from: `{id, kind, fire_id, fire_key,
fire_time}` (the scheduled time of a schedule's fire, else the fire's time), with what the
caller adds (`about`, e.g. a chain's depth).

A template context holds `trigger` ({id, name, kind}) and `fired_at` (ISO 8601) besides
what the caller gives (a webhook: `payload`, `headers`; a schedule: `fire_time`; a
chain: `source`).

The kind's fire rule (`Kind.admit`, `engine/kinds/`) is read in step 2, under the
trigger's lock: a schedule's overlap policy, while the run its previous fire started is
unfinished, records the fire `skipped`, or gives its run that run's lane (`enqueue`,
`interrupt`). The kinds' sources fire through `FirePath` (`fires.py`), the methods below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import AppError, NotFound
from app.core.ids import new_id
from app.core.streams import TRIGGERS_STREAM
from app.core.vocabulary import FireStatus, Multitask
from app.db.idempotent_create import CreateKey
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.runs.engine.runs import RunCommands, RunCreated
from app.runs.schemas.runs import RunCreate
from app.telemetry.metrics import Metrics
from app.triggers.engine.ceremonies import NoSprintForCeremony, ceremony_context
from app.triggers.engine.checks import check_target
from app.triggers.engine.fires import FireResult, TriggerDisabled
from app.triggers.engine.kinds import KINDS
from app.triggers.engine.templates import TemplateTooLarge, as_text, render
from app.triggers.schemas import FireRead, RunTarget, TriggerRead
from app.triggers.store import triggers as store
from app.triggers.store.triggers import FireRow
from app.workflows.engine.workflows import Activated, WorkflowCommands
from app.workflows.schemas.workflows import ActivateRequest

log = logging.getLogger(__name__)

FIRE_SCOPE = "triggers.fire"
MAX_ERROR_CHARS = 2_000
_EVENTS = {
    FireStatus.STARTED: "trigger.fired",
    FireStatus.FAILED: "trigger.fire_failed",
    FireStatus.SKIPPED: "trigger.fire_skipped",
}
# Who fires a workflow target (the actor of its tasks' audit trail).
ACTOR = "trigger:{trigger_id}"


class FireFailed(Exception):
    """The target could not be started; the message is the fire's `error`."""


@dataclass
class Fired:
    """A fire written in a transaction not yet committed; `TriggerFiring.published` does
    what follows the commit."""

    result: FireResult
    trigger: TriggerRead
    run: RunCreated | None = None
    execution: Activated | None = None
    activation: ActivateRequest | None = field(default=None)


class TriggerFiring:
    """The one fire path (see the module's docstring). Built once per process."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        runs: RunCommands,
        workflows: WorkflowCommands,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._runs = runs
        self._workflows = workflows
        self._clock = clock
        self._metrics = metrics

    # -- whole fires, each in a transaction of its own ------------------------------------

    async def fire(
        self,
        trigger_id: str,
        context: Mapping[str, Any],
        *,
        fire_key: str,
        fired_at: datetime | None = None,
        scheduled_for: datetime | None = None,
        multitask: Multitask | None = None,
        about: Mapping[str, Any] | None = None,
        source_id: str | None = None,
        catching_up: bool = False,
    ) -> FireResult:
        """Fire the trigger for the occasion `fire_key`, once: a second call for the same
        occasion (here or in another process) gets the first fire back, `replayed`. A
        target that cannot start is a `failed` fire, not an exception; a trigger that is
        gone or disabled raises (NotFound, TriggerDisabled) and records nothing.
        `multitask` overrides a run target's lane policy (and the kind's fire rule's);
        `about` is added to the run's `metadata.trigger`; `source_id` is a chain's source
        (the run or execution whose end fired it)."""
        fired_at = fired_at or self._clock()
        async with self._sessionmaker() as session, session.begin():
            found = await self.claim(session, trigger_id, fire_key)
            if found is not None:
                return FireResult(found.fire, replayed=True, response=found.response)
            trigger = await self.enabled_trigger(session, trigger_id)
            kind = KINDS.of(trigger.kind)
            admission = await kind.admit(session, trigger, catching_up=catching_up)
            if admission.skip is not None:
                fired = await self._record(
                    session,
                    trigger,
                    new_id("fire"),
                    FireStatus.SKIPPED,
                    fire_key=fire_key,
                    fired_at=fired_at,
                    scheduled_for=scheduled_for,
                    error=admission.skip,
                    source_id=source_id,
                )
            else:
                fired = await self.fire_in(
                    session,
                    trigger,
                    context,
                    fire_key=fire_key,
                    fired_at=fired_at,
                    scheduled_for=scheduled_for,
                    multitask=multitask or admission.multitask,
                    lane=admission.lane,
                    about=about,
                    source_id=source_id,
                )
        return await self.published(fired)

    async def skip(
        self,
        trigger_id: str,
        *,
        fire_key: str,
        reason: str,
        fired_at: datetime | None = None,
        scheduled_for: datetime | None = None,
        source_id: str | None = None,
    ) -> FireResult:
        """Record that the occasion `fire_key` starts nothing (`skipped`, with the policy's
        `reason`): a schedule's overlap or misfire policy said no. Once per occasion, as a
        fire."""
        fired_at = fired_at or self._clock()
        async with self._sessionmaker() as session, session.begin():
            found = await self.claim(session, trigger_id, fire_key)
            if found is not None:
                return FireResult(found.fire, replayed=True, response=found.response)
            trigger = await self.enabled_trigger(session, trigger_id)
            fired = await self._record(
                session,
                trigger,
                new_id("fire"),
                FireStatus.SKIPPED,
                fire_key=fire_key,
                fired_at=fired_at,
                scheduled_for=scheduled_for,
                error=reason,
                source_id=source_id,
            )
        return await self.published(fired)

    # -- the parts, for a caller that owns the transaction (webhooks) ---------------------

    async def claim(self, session: AsyncSession, trigger_id: str, fire_key: str) -> FireRow | None:
        """Lock the occasion until the transaction ends; its first fire if it had one."""
        await store.lock_occasion(session, trigger_id, fire_key)
        return await store.get_fire(session, trigger_id, fire_key)

    @staticmethod
    async def enabled_trigger(
        session: AsyncSession, trigger_id: str, *, with_secret: bool = False
    ) -> TriggerRead:
        """The trigger, locked until the transaction ends; NotFound or TriggerDisabled."""
        trigger = await store.get_trigger(session, trigger_id, lock=True, with_secret=with_secret)
        if trigger is None:
            raise NotFound("trigger", trigger_id)
        if not trigger.enabled:
            raise TriggerDisabled(trigger_id)
        return trigger

    async def fire_in(
        self,
        session: AsyncSession,
        trigger: TriggerRead,
        context: Mapping[str, Any],
        *,
        fire_key: str,
        fired_at: datetime,
        scheduled_for: datetime | None = None,
        multitask: Multitask | None = None,
        lane: str | None = None,
        about: Mapping[str, Any] | None = None,
        response: Callable[[FireRead], dict[str, Any]] | None = None,
        source_id: str | None = None,
    ) -> Fired:
        """Steps 3 and 4 in the caller's transaction, after `claim` found no fire and the
        trigger was read locked (`enabled_trigger`); `response` makes the answer stored
        with the fire. Commit, then call `published`."""
        fire_id = new_id("fire")
        fire_time = scheduled_for or fired_at
        full_context = {
            **context,
            "trigger": {"id": trigger.id, "name": trigger.name, "kind": trigger.kind},
            "fired_at": fired_at.isoformat(),
        }
        marker = {
            "id": trigger.id,
            "kind": trigger.kind,
            "fire_id": fire_id,
            "fire_key": fire_key,
            "fire_time": fire_time.isoformat(),
            **(about or {}),
        }
        key = CreateKey(FIRE_SCOPE, f"{trigger.id}:{fire_key}", fire_key)
        run: RunCreated | None = None
        execution: Activated | None = None
        activation: ActivateRequest | None = None
        error: str | None = None
        try:
            target = check_target(trigger.kind, trigger.target.model_dump(mode="json"), "target")
            async with session.begin_nested():
                if isinstance(target.target, RunTarget):
                    if target.target.sprint is not None:  # a ceremony: the sprint's data
                        about = await ceremony_context(session, target.target.sprint)
                        full_context = {**full_context, **about}
                    body = _run_body(target.target, target.templates, full_context, marker)
                    delay_s = target.target.delay_s
                    body = _with_overrides(body, multitask, lane, fired_at, delay_s)
                    run = await self._runs.create_in(session, body, key=key, now=fired_at)
                else:
                    activation = _activation(target.templates, full_context)
                    execution = await self._workflows.activate_in(
                        session, target.target.workflow_id, activation, key=key, now=fired_at
                    )
        except (FireFailed, NoSprintForCeremony, AppError) as exc:
            error = _clip(str(exc))
        status = FireStatus.FAILED if error is not None else FireStatus.STARTED
        fired = await self._record(
            session,
            trigger,
            fire_id,
            status,
            fire_key=fire_key,
            fired_at=fired_at,
            scheduled_for=scheduled_for,
            error=error,
            run_id=run.run.id if run else None,
            execution_id=execution.execution.id if execution else None,
            response=response,
            source_id=source_id,
        )
        fired.run, fired.execution, fired.activation = run, execution, activation
        return fired

    async def _record(
        self,
        session: AsyncSession,
        trigger: TriggerRead,
        fire_id: str,
        status: FireStatus,
        *,
        fire_key: str,
        fired_at: datetime,
        scheduled_for: datetime | None,
        error: str | None,
        run_id: str | None = None,
        execution_id: str | None = None,
        response: Callable[[FireRead], dict[str, Any]] | None = None,
        source_id: str | None = None,
    ) -> Fired:
        fire = FireRead(
            id=fire_id,
            trigger_id=trigger.id,
            fire_key=fire_key,
            status=status,
            fired_at=fired_at,
            scheduled_for=scheduled_for,
            run_id=run_id,
            execution_id=execution_id,
            source_id=source_id,
            error=error,
        )
        answer = response(fire) if response is not None else None
        stored = await store.insert_fire(session, fire.model_dump() | {"response": answer})
        await store.mark_fired(session, trigger.id, fired_at)
        data = {
            "trigger_id": trigger.id,
            "kind": trigger.kind,
            "fire_id": fire_id,
            "fire_key": fire_key,
            "status": status.value,
            "run_id": run_id,
            "execution_id": execution_id,
            "source_id": source_id,
            "scheduled_for": scheduled_for.isoformat() if scheduled_for else None,
            "error": error,
        }
        event = event_store.NewEvent(_EVENTS[status], data)
        await event_store.append_events(session, TRIGGERS_STREAM, [event], fired_at)
        return Fired(FireResult(stored, response=answer), trigger)

    async def published(self, fired: Fired) -> FireResult:
        """After the commit of a fire: wake the readers, count the fire, and make a
        workflow's tasks (a failure there fails the execution and is logged)."""
        fire = fired.result.fire
        events = [(_EVENTS[fire.status], {"fire_id": fire.id, "trigger_id": fire.trigger_id})]
        published(self._bus, [Written(TRIGGERS_STREAM, events, {"trigger_id": fire.trigger_id})])
        if self._metrics is not None:
            self._metrics.trigger_fired(fired.trigger.kind, fire.status.value)
        if fired.run is not None:
            self._runs.announce(fired.run)
        if fired.execution is not None and fired.activation is not None:
            actor = ACTOR.format(trigger_id=fired.trigger.id)
            try:
                await self._workflows.complete(fired.execution, actor)
            except AppError as exc:
                log.warning(
                    "trigger %s started execution %s, whose tasks could not be made: %s",
                    fired.trigger.id,
                    fired.execution.execution.id,
                    exc,
                )
        return fired.result


def _run_body(
    target: RunTarget,
    templates: Mapping[str, Any],
    context: Mapping[str, Any],
    marker: Mapping[str, Any],
) -> RunCreate:
    """The run the target asks for, its templates rendered."""
    text = as_text(_rendered(templates["input"], context, "input"))
    if not text.strip():
        raise FireFailed("the rendered input is empty (do the placeholders name what is sent?)")
    lane = None
    if "lane" in templates:
        lane = as_text(_rendered(templates["lane"], context, "lane")) or None
    metadata: dict[str, Any] = _rendered(templates["metadata"], context, "metadata")  # an object
    fields = {
        "agent_id": target.agent_id,
        "conversation_id": target.conversation_id,
        "lane": lane,
        "input": text,
        "multitask": target.multitask,
        "metadata": {**metadata, "trigger": dict(marker)},
    }
    try:
        return RunCreate.model_validate(fields)
    except ValidationError as exc:
        raise FireFailed(f"the rendered run is not valid: {_errors(exc)}") from None


def _with_overrides(
    body: RunCreate,
    multitask: Multitask | None,
    lane: str | None,
    fired_at: datetime,
    delay_s: int | None,
) -> RunCreate:
    changes: dict[str, Any] = {}
    if multitask is not None:
        changes["multitask"] = multitask
    if lane is not None:
        changes["lane"] = lane
    if delay_s is not None:
        changes["not_before"] = fired_at + timedelta(seconds=delay_s)
    return body.model_copy(update=changes) if changes else body


def _activation(templates: Mapping[str, Any], context: Mapping[str, Any]) -> ActivateRequest:
    # A template's object renders as an object: the context is always one.
    return ActivateRequest(context=_rendered(templates["context"], context, "context"))


def _rendered(template: Any, context: Mapping[str, Any], name: str) -> Any:
    try:
        return render(template, context)
    except TemplateTooLarge as exc:
        raise FireFailed(f"target.{name}: {exc}") from None


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
    )


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
